/**
 * Worker-side task kinds of speech-to-text.
 *
 * `asr.recognize`: one utterance (normally one VAD segment) of 16 kHz mono Int16 PCM, moved to
 * the worker by the caller (`transfer: [pcm.buffer]`), recognised by the engine this thread
 * loaded once. `sampleOffset` places the segment in the whole recording, so the words come
 * back with absolute times and segments can run on different workers in any order.
 */
import { defineTasks, perThreadWhileUsed, TaskError } from "../tasks.ts"
import { ASR_SAMPLE_RATE, AsrError, type AsrEngine, type AsrEngineId } from "./AsrEngine.ts"
import { PocketSphinxAsr, type PocketSphinxOptions } from "./PocketSphinxAsr.ts"

export interface RecognizeInput {
  /** s16le mono at 16 kHz; its buffer is detached from the caller when transferred. */
  readonly pcm: Int16Array
  /** Index of `pcm[0]` in the whole recording, samples at 16 kHz. */
  readonly sampleOffset: number
  /** ISO 639-1; undefined lets the engine answer its own language. */
  readonly language?: string
  /** Default "pocketsphinx". */
  readonly engine?: AsrEngineId
  /** Library and model locations; each distinct value loads its own decoder per thread. */
  readonly pocketsphinx?: PocketSphinxOptions
  /**
   * Give the decoder back (ps_free, ~90 MB) once this thread has not recognised anything for
   * this long, ms (STT_MODEL_IDLE_RELEASE_S); undefined keeps it for the life of the thread.
   */
  readonly releaseAfterMs?: number
}

export interface RecognizedWord {
  readonly text: string
  /** ms from the start of the whole recording. */
  readonly startMs: number
  readonly endMs: number
  /** 0..1. */
  readonly confidence: number
  /** Natural log of the posterior, ≤ 0. */
  readonly logprob: number
}

export interface RecognizeOutput {
  readonly language: string
  readonly words: ReadonlyArray<RecognizedWord>
  /** Duration of this segment, ms. */
  readonly durationMs: number
  /** Wall time of the recognition in the worker (model load excluded), ms. */
  readonly engineMs: number
}

const engines = new Map<string, ReturnType<typeof perThreadWhileUsed<AsrEngine>>>()

const withEngine = <T>(input: RecognizeInput, f: (engine: AsrEngine) => Promise<T>): Promise<T> => {
  const options = input.pocketsphinx ?? {}
  const key = JSON.stringify([input.engine ?? "pocketsphinx", options.libraryPath, options.modelDirectory, options.extraArgs])
  let use = engines.get(key)
  if (use === undefined) engines.set(key, (use = perThreadWhileUsed<AsrEngine>(() => PocketSphinxAsr.load(options), (engine) => engine.dispose())))
  return use(input.releaseAfterMs, f)
}

const asTaskError = (e: unknown): unknown => (AsrError.is(e) ? new TaskError(e.reason, e.message, "AsrError") : e)

export const asrTasks = defineTasks({
  "asr.recognize": async (input: RecognizeInput): Promise<RecognizeOutput> => {
    if (!(input.pcm instanceof Int16Array)) throw new TaskError("InvalidInput", "pcm must be an Int16Array", "AsrError")
    if (!Number.isInteger(input.sampleOffset) || input.sampleOffset < 0) {
      throw new TaskError("InvalidInput", `sampleOffset must be a non-negative integer, got ${input.sampleOffset}`, "AsrError")
    }
    try {
      return await withEngine(input, async (engine) => {
        const started = performance.now()
        const result = await engine.recognize(input.pcm, input.language === undefined ? undefined : { language: input.language })
        const engineMs = performance.now() - started
        const offsetMs = (input.sampleOffset * 1000) / ASR_SAMPLE_RATE
        const words = result.words.map((w) => ({ ...w, startMs: w.startMs + offsetMs, endMs: w.endMs + offsetMs }))
        return { language: result.language, words, durationMs: (input.pcm.length * 1000) / ASR_SAMPLE_RATE, engineMs }
      })
    } catch (e) {
      throw asTaskError(e)
    }
  }
})
