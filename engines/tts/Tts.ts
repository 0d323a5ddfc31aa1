/**
 * Text-to-speech as the main thread sees it: one synthesis of one piece of text, by a preset
 * engine voice (`tts.synthesize`), with the expressive tags' prosody (`tts.expressive`), or by a
 * clone's plan (`clone.synthesize`). Engine failures come back as `SpeechError` with the engine's
 * reason (404/400/502 at the edge); a busy or closing pool stays `EngineError` (503).
 *
 * `Tts` is the interface; `PoolTts.layer` runs it on the inference worker pool (`Inference`),
 * which is today's only implementation. Another one (an HTTP-backed engine) is another layer of
 * the same tag. Main thread only: worker code never imports this module.
 */
import { Context, Effect, Layer } from "effect"
import type { CloneSynthesizeInput } from "../clone/tasks.ts"
import { type EngineError, Inference, type Priority } from "../Inference.ts"
import type { ExpressiveInput } from "./expressiveTasks.ts"
import { fromEngine, type SpeechError } from "./SpeechError.ts"
import type { PcmBlock, SynthesizeInput, SynthesizeOutput, SynthesizeSummary } from "./tasks.ts"

export interface TtsOptions {
  /** Realtime for live sessions and streamed segments; batch for whole files and previews. */
  readonly priority: Priority
}

export class Tts extends Context.Service<Tts, {
  /** A preset engine voice (espeak, Flite, Piper). */
  readonly synthesize: (input: SynthesizeInput, options: TtsOptions) => Effect.Effect<SynthesizeOutput, SpeechError | EngineError>
  /**
   * The same synthesis, its PCM handed to `onBlock` (on the main thread, outside any fiber) as
   * the engine makes it; the bytes add up to `synthesize`'s. Interrupting stops the engine at its
   * next block.
   */
  readonly synthesizeStream: (
    input: SynthesizeInput,
    options: TtsOptions,
    onBlock: (pcm: Int16Array) => void
  ) => Effect.Effect<SynthesizeSummary, SpeechError | EngineError>
  /** Tagged text (SPEC 2.4): the same output, rendered with the tags' prosody and effects. */
  readonly synthesizeExpressive: (input: ExpressiveInput, options: TtsOptions) => Effect.Effect<SynthesizeOutput, SpeechError | EngineError>
  /** A voice clone's plan over its base voice. */
  readonly synthesizeClone: (input: CloneSynthesizeInput, options: TtsOptions) => Effect.Effect<SynthesizeOutput, SpeechError | EngineError>
  /**
   * Gives back PCM a synthesis returned once its bytes are written out (`Inference.recycle`):
   * every view of its buffer reads as empty afterwards.
   */
  readonly recycle: (pcm: Int16Array) => void
}>()("speech/engines/Tts") {}

const makePoolTts = Effect.gen(function*() {
  const pool = yield* Inference
  return Tts.of({
    // The task answers with the whole output when run, with a summary when streamed.
    synthesize: (input, options) =>
      pool.run("tts.synthesize", input, { priority: options.priority, spares: true }).pipe(Effect.map((o) => o as SynthesizeOutput), Effect.mapError(fromEngine)),
    synthesizeStream: (input, options, onBlock) =>
      pool.stream("tts.synthesize", input, (piece) => onBlock((piece as PcmBlock).pcm), { priority: options.priority, spares: true }).pipe(
        Effect.map((o) => o as SynthesizeSummary),
        Effect.mapError(fromEngine)
      ),
    synthesizeExpressive: (input, options) => pool.run("tts.expressive", input, { priority: options.priority }).pipe(Effect.mapError(fromEngine)),
    synthesizeClone: (input, options) => pool.run("clone.synthesize", input, { priority: options.priority }).pipe(Effect.mapError(fromEngine)),
    recycle: (pcm) => pool.recycle(pcm.buffer)
  })
})

/** `Tts` on the worker pool: the inputs go to the workers as given. */
export const PoolTts = {
  make: makePoolTts,
  layer: Layer.effect(Tts, makePoolTts) as Layer.Layer<Tts, never, Inference>
}
