/**
 * Worker-side task kind of the expressive path (SPEC 2.4 tags): `tts.expressive` renders one
 * segment's parts (Expressive.ts) and returns the same shape as `tts.synthesize`: s16le at the
 * requested rate, resampled here, the PCM buffer transferred. Engines load lazily, once per
 * thread; espeak shares the thread's runtime with `tts.synthesize`, Flite gets its own scratch
 * directory. Hazard: a Piper voice used here is loaded a second time in the thread (the loader of
 * `tts.synthesize` is private to its module).
 */
import { floatToInt16 } from "../audio/Pcm.ts"
import { resample } from "../audio/Resampler.ts"
import { defineTasks, TaskError, transfer } from "../tasks.ts"
import { renderExpressive, softLimit } from "./Expressive.ts"
import type { ExpressivePart } from "./ExpressiveTags.ts"
import { engineFor, type SynthesizeOutput } from "./tasks.ts"
import { type EngineVoice, TtsError } from "./TtsEngine.ts"

export interface ExpressiveInput {
  /** One segment's parts; offsets relative to the segment (word timings come back the same way). */
  readonly parts: ReadonlyArray<ExpressivePart>
  readonly voice: EngineVoice
  /** 0.5 to 2; speech parts only. */
  readonly speed: number
  /** Hz of the returned PCM. */
  readonly sampleRate: number
  /** Directory of Piper voices; required only for `voice.engine === "piper"`. */
  readonly piperDirectory?: string
}

export const expressiveTasks = defineTasks({
  "tts.expressive": async (input: ExpressiveInput) => {
    const started = performance.now()
    let result
    try {
      result = await renderExpressive(await engineFor(input), { parts: input.parts, voice: input.voice, speed: input.speed })
    } catch (e) {
      if (TtsError.is(e)) throw new TaskError(e.reason, e.message, "TtsError")
      throw e
    }
    const engineMs = performance.now() - started
    const samples = result.sampleRate === input.sampleRate ? result.samples : resample(result.samples, result.sampleRate, input.sampleRate)
    // The band-limited resampler can overshoot limited peaks by a few per cent: limit again.
    const pcm = floatToInt16(softLimit(samples))
    const output: SynthesizeOutput = { pcm, sampleRate: input.sampleRate, engineSampleRate: result.sampleRate, words: result.words, engineMs }
    return transfer(output, [pcm.buffer as ArrayBuffer])
  }
})
