/**
 * Worker-side task kinds of text-to-speech.
 *
 * `tts.synthesize`: one engine call for one segment of text, resampled in the worker to the rate
 * the caller streams at and converted to s16le, so the main thread only copies bytes. Run plainly
 * it returns the whole PCM (transferred, not cloned); run as a stream (`Inference.stream`) it
 * emits the engine's first two blocks as soon as they are made (espeak-ng: 100 ms of audio each;
 * Flite and Piper: the whole segment), the rest in pieces of 0.5 s growing to 2 s, and returns the summary; it
 * stops at the engine's next block once the caller has gone. Both forms run the same blocks through the same resampler, so the
 * streamed bytes equal the whole ones. Engines load lazily, once per worker thread, and stay.
 */
import { PcmBlocks } from "../audio/PcmBlocks.ts"
import { joinIntoOutput } from "../SpareBuffers.ts"
import { defineTasks, perThread, type TaskContext, TaskError, transfer } from "../tasks.ts"
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

/** What a streamed synthesis returns after its `PcmBlock`s: the output without the audio. */
export interface SynthesizeSummary extends Omit<SynthesizeOutput, "pcm"> {
  /** Samples of PCM sent, in all. */
  readonly samples: number
}

/** One piece of a streamed synthesis: s16 mono at the request's rate. */
export interface PcmBlock {
  readonly pcm: Int16Array
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

/**
 * Audio per streamed piece after the first two blocks, s: the first piece, and the most any
 * piece grows to. The first blocks go out the moment the engine makes them (that is the time to
 * first audio); later blocks, made far faster than real time, are joined into pieces that double
 * from the first size to the largest (0.5, 1, 2, 2 … s): a 5 s sentence is then 6 messages,
 * frames and writes instead of 12 at a fixed 0.5 s (or 50 unjoined), which is what sessions per
 * core are made of, and the audio the client holds grows faster than it plays. The cost: audio
 * made waits for its piece to fill, at espeak-ng's ~1 ms of CPU per audio second ≤ 2 ms.
 */
const FIRST_PIECE_SECONDS = 0.5
const LARGEST_PIECE_SECONDS = 2

/**
 * Hands on the first two blocks at once, then blocks joined into pieces of at least `size`
 * samples, doubling after each piece up to `largest`. Two blocks, not one: the WebSocket holds a
 * chunk's newest block back (its last frame carries the alignment), so its first frame leaves
 * when the second block arrives.
 */
class Pieces {
  private pending: Array<Int16Array> = []
  private count = 0
  private alone = 2
  constructor(private size: number, private readonly largest: number, private readonly out: (pcm: Int16Array) => void) {}
  push(pcm: Int16Array): void {
    if (this.alone > 0) {
      this.alone--
      return this.out(pcm)
    }
    this.pending.push(pcm)
    this.count += pcm.length
    if (this.count >= this.size) this.flush()
  }
  flush(): void {
    if (this.count === 0) return
    const pcm = joinIntoOutput(this.pending)
    this.pending = []
    this.count = 0
    this.size = Math.min(2 * this.size, this.largest)
    this.out(pcm)
  }
}

export const ttsTasks = defineTasks({
  "tts.synthesize": async (input: SynthesizeInput, ctx: TaskContext) => {
    const started = performance.now()
    const engine = await engineFor(input)
    const request = { text: input.text, voice: input.voice, speed: input.speed }
    const engineSampleRate = engine.sampleRateFor(input.voice)
    const emit = ctx.emit
    const whole: Array<Int16Array> = []
    const pieces = emit === undefined ? undefined : new Pieces(Math.round(input.sampleRate * FIRST_PIECE_SECONDS), Math.round(input.sampleRate * LARGEST_PIECE_SECONDS), (pcm) => emit({ pcm } satisfies PcmBlock, [pcm.buffer as ArrayBuffer]))
    const blocks = new PcmBlocks(engineSampleRate, input.sampleRate, pieces === undefined ? (pcm) => whole.push(pcm) : (pcm) => pieces.push(pcm))
    let words: ReadonlyArray<WordTiming>
    try {
      if (engine.synthesizeBlocks !== undefined) {
        const result = await engine.synthesizeBlocks(request, (block) => {
          blocks.push(block)
          return !ctx.cancelled()
        })
        words = result.words
      } else {
        const result = await engine.synthesize(request)
        blocks.push(result.samples)
        words = result.words
      }
    } catch (e) {
      if (TtsError.is(e)) throw new TaskError(e.reason, e.message, "TtsError")
      throw e
    }
    // Cancelled: the caller has gone and drops whatever comes back.
    if (!ctx.cancelled()) {
      blocks.end()
      pieces?.flush()
    }
    const summary: SynthesizeSummary = { sampleRate: input.sampleRate, samples: blocks.samples, engineSampleRate, words, engineMs: performance.now() - started }
    if (emit !== undefined) return summary
    const pcm = joinIntoOutput(whole)
    const { samples: _, ...rest } = summary
    return transfer({ ...rest, pcm } satisfies SynthesizeOutput, [pcm.buffer as ArrayBuffer])
  }
})
