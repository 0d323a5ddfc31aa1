/**
 * Realtime speech recognition as the main thread sees it: the engine service the realtime
 * speech-to-text endpoint's actor is built on (the endpoint itself does not exist yet).
 *
 * `open` places one `asr.stream` session (streamingSessions.ts) on one worker thread for the
 * life of the caller's scope (session affinity: engines/Inference.ts). The caller then
 *  - `push`es audio in the session's `audioFormat` as it arrives (no ffmpeg: InputPcm.ts),
 *  - gets `onPartial` with the hypothesis each time it changes (≈ every 160 ms of speech),
 *  - `commit`s when the caller pauses (manual, or the actor's VAD): the utterance's words, times
 *    in ms since the session's first sample (its audio clock), each with its logprob,
 *  - ends it by closing the scope (the decoder goes back to its thread at once).
 * Which layer decodes (`engine`: PocketSphinx now, a streaming neural model later) is the
 * worker's business: this interface, the actor and the endpoint stay as they are.
 *
 * Failures: a thread that dies fails the session (`done`, and every later call) with
 * TranscriptionError EngineFailed (the actor's `transcriber_error`); `SessionsFull` stays an
 * EngineError (the actor's `resource_exhausted`); a language the engine lacks is
 * TranscriptionError UnsupportedLanguage at `open`.
 */
import { Context, Effect, Layer, type Scope } from "effect"
import type { InputAudioFormat } from "../audio/InputPcm.ts"
import { type EngineError, Inference } from "../Inference.ts"
import type { PocketSphinxOptions } from "./PocketSphinxAsr.ts"
import type { StreamCommitted, StreamInit, StreamMessage, StreamPartial, StreamStats } from "./streamingSessions.ts"
import { type TranscriptionError, transcriptionFromEngine } from "./TranscriptionError.ts"

export type { StreamCommitted, StreamPartial, StreamStats }

export interface StreamingConfig {
  readonly audioFormat: InputAudioFormat
  /** ISO 639-1; undefined: the engine's own. */
  readonly language?: string | undefined
}

export interface StreamingRecognition {
  /** The worker thread that holds the session's state. */
  readonly threadId: number
  /** Audio bytes in the session's format, in arrival order (copied: the caller keeps its buffer). */
  readonly push: (audio: Uint8Array) => Effect.Effect<void, TranscriptionError | EngineError>
  /** Ends the utterance: its words. With nothing pushed since the last commit, no words. */
  readonly commit: Effect.Effect<StreamCommitted, TranscriptionError | EngineError>
  /** A pause began (the VAD's silence onset): the worker computes the commit's words now, in order after the audio pushed so far. */
  readonly prepare: Effect.Effect<void, TranscriptionError | EngineError>
  /** `commit` answering the words of the last `prepare`: only for a caller that knows only silence came since. */
  readonly commitPrepared: Effect.Effect<StreamCommitted, TranscriptionError | EngineError>
  /** Drops the utterance in progress. */
  readonly reset: Effect.Effect<void, TranscriptionError | EngineError>
  /** The hosting thread's sessions and decoders (tests, the bench). */
  readonly stats: Effect.Effect<StreamStats, TranscriptionError | EngineError>
  /** Fails when the session ends other than by its scope (the thread died, the engine failed). */
  readonly done: Effect.Effect<void, TranscriptionError | EngineError>
}

export class StreamingRecognizer extends Context.Service<StreamingRecognizer, {
  readonly open: (
    config: StreamingConfig,
    onPartial: (partial: StreamPartial) => void
  ) => Effect.Effect<StreamingRecognition, TranscriptionError | EngineError, Scope.Scope>
}>()("speech/engines/StreamingRecognizer") {}

export interface PoolStreamingRecognizerOptions {
  /** Library and model locations (POCKETSPHINX_LIBRARY, POCKETSPHINX_MODEL_DIR). */
  readonly pocketsphinx?: PocketSphinxOptions
  /** Spare decoders unused this long are freed, ms (STT_MODEL_IDLE_RELEASE_S). */
  readonly releaseAfterMs?: number
  /** Audio between two partials, ms; default 160. */
  readonly partialEveryMs?: number
  /** "full" (default): exact synchronous words, a second decode at commit; "live": the live pass's words, a cheap commit. */
  readonly finalPass?: "full" | "live"
}

const make = (options: PoolStreamingRecognizerOptions) => Effect.map(Inference, (pool) => StreamingRecognizer.of({
  open: (config, onPartial) =>
    Effect.gen(function*() {
      const init: StreamInit = {
        audioFormat: config.audioFormat,
        ...(config.language === undefined ? {} : { language: config.language }),
        ...(options.pocketsphinx === undefined ? {} : { pocketsphinx: options.pocketsphinx }),
        ...(options.releaseAfterMs === undefined ? {} : { releaseAfterMs: options.releaseAfterMs }),
        ...(options.partialEveryMs === undefined ? {} : { partialEveryMs: options.partialEveryMs }),
        ...(options.finalPass === undefined ? {} : { finalPass: options.finalPass })
      }
      const session = yield* pool.openSession("asr.stream", init, (event) => onPartial(event as StreamPartial))
      const call = <A>(m: StreamMessage) => session.call<A>(m).pipe(Effect.mapError(transcriptionFromEngine))
      return {
        threadId: session.threadId,
        push: (audio: Uint8Array) => {
          // A copy of its own, moved: the caller's buffer may be a view into a larger one.
          const own = audio.slice()
          return session.send({ type: "audio", audio: own } satisfies StreamMessage, [own.buffer]).pipe(Effect.mapError(transcriptionFromEngine))
        },
        commit: call<StreamCommitted>({ type: "commit" }),
        prepare: session.send({ type: "prepare" } satisfies StreamMessage).pipe(Effect.mapError(transcriptionFromEngine)),
        commitPrepared: call<StreamCommitted>({ type: "commit", prepared: true }),
        reset: session.send({ type: "reset" } satisfies StreamMessage).pipe(Effect.mapError(transcriptionFromEngine)),
        stats: call<StreamStats>({ type: "stats" }),
        done: session.done.pipe(Effect.mapError(transcriptionFromEngine))
      } satisfies StreamingRecognition
    }).pipe(Effect.mapError((e) => (e._tag === "EngineError" ? transcriptionFromEngine(e) : e)))
}))

/** `StreamingRecognizer` on the worker pool's sessions. */
export const PoolStreamingRecognizer = {
  layer: (options: PoolStreamingRecognizerOptions = {}): Layer.Layer<StreamingRecognizer, never, Inference> => Layer.effect(StreamingRecognizer, make(options))
}
