/**
 * Worker-side task kinds of text-to-speech.
 *
 * `tts.synthesize`: one engine call for one segment of text, resampled in the worker to the rate
 * the caller streams at and converted to s16le, so the main thread only copies bytes. The PCM
 * buffer is transferred, not cloned. Engines load lazily, once per worker thread, and stay.
 */
import { floatToInt16 } from "../audio/Pcm.ts"
import { resample } from "../audio/Resampler.ts"
import { defineTasks, perThread, TaskError, transfer } from "../tasks.ts"
import { EspeakTts } from "./EspeakTts.ts"
import { FliteTts } from "./FliteTts.ts"
import { PiperTts } from "./PiperTts.ts"
import { type EngineVoice, type TtsEngine, TtsError, type WordTiming } from "./TtsEngine.ts"

export interface SynthesizeInput {
  readonly text: string
  readonly voice: EngineVoice
  /** 0.5 to 2. */
  readonly speed: number
  /** Hz of the returned PCM. */
  readonly sampleRate: number
  /** Directory of Piper voices; required only for `voice.engine === "piper"`. */
  readonly piperDirectory?: string
}

export interface SynthesizeOutput {
  /** s16le mono at `sampleRate`. */
  readonly pcm: Int16Array
  readonly sampleRate: number
  /** Sample rate the engine produced before resampling, Hz (for logs and benches). */
  readonly engineSampleRate: number
  readonly words: ReadonlyArray<WordTiming>
  /** Wall time of the engine call in the worker, ms. */
  readonly engineMs: number
}

const espeak = perThread(() => EspeakTts.load())
const flite = perThread(() => FliteTts.load())
const pipers = new Map<string, () => Promise<PiperTts>>()

/** The engine of a voice, loaded once per worker thread and shared by every task kind. */
export const engineFor = (input: { readonly voice: EngineVoice; readonly piperDirectory?: string | undefined }): Promise<TtsEngine> => {
  switch (input.voice.engine) {
    case "espeak":
      return espeak()
    case "flite":
      return flite()
    case "piper": {
      const directory = input.piperDirectory
      if (directory === undefined) throw new TtsError("EngineUnavailable", "no Piper voice directory is configured")
      let load = pipers.get(directory)
      if (load === undefined) pipers.set(directory, (load = perThread(() => PiperTts.load({ directory }))))
      return load()
    }
  }
}

export const ttsTasks = defineTasks({
  "tts.synthesize": async (input: SynthesizeInput) => {
    const started = performance.now()
    const engine = await engineFor(input)
    let result
    try {
      result = await engine.synthesize({ text: input.text, voice: input.voice, speed: input.speed })
    } catch (e) {
      if (TtsError.is(e)) throw new TaskError(e.reason, e.message, "TtsError")
      throw e
    }
    const engineMs = performance.now() - started
    const samples = result.sampleRate === input.sampleRate ? result.samples : resample(result.samples, result.sampleRate, input.sampleRate)
    const pcm = floatToInt16(samples)
    const output: SynthesizeOutput = { pcm, sampleRate: input.sampleRate, engineSampleRate: result.sampleRate, words: result.words, engineMs }
    return transfer(output, [pcm.buffer as ArrayBuffer])
  }
})
