/**
 * Worker-side task kinds of voice activity detection.
 *
 * `vad.segments`: speech segments of 16 kHz mono Int16 PCM (moved to the worker by the caller,
 * `transfer: [pcm.buffer]`). Times come back absolute: `sampleOffset` is the index of `pcm[0]`
 * in the whole recording, so a long recording can be cut into chunks (cut in silence, or
 * overlapping: the model's state restarts at each call). The model loads once per thread.
 *
 * `vad.probabilities`: per-frame speech probabilities of one block of a long recording, with
 * the model state carried from the previous block (`carry` in, `carry` out), so a recording
 * streamed in blocks gets the probabilities one call over the whole of it would give; the caller
 * turns them into segments with `speechSegments`. Blocks are whole frames but the last.
 */
import { defineTasks, perThreadWhileUsed, TaskError, type Transfer, transfer } from "../tasks.ts"
import { SileroVad, VAD_FRAME_MS, VAD_SAMPLE_RATE, VadError, type VadCarry } from "./SileroVad.ts"
import type { SpeechSegment, VadOptions } from "./SpeechSegments.ts"

export interface VadSegmentsInput {
  /** s16le mono at 16 kHz. */
  readonly pcm: Int16Array
  /** Index of `pcm[0]` in the whole recording, samples at 16 kHz; default 0. */
  readonly sampleOffset?: number
  readonly options?: Partial<VadOptions>
  /** Return the per-frame probabilities too (moved, not copied); for diarization and tests. */
  readonly withProbabilities?: boolean
  /** Give the model back once this thread has not used it for this long, ms; undefined keeps it. */
  readonly releaseAfterMs?: number
}

export interface VadSegmentsOutput {
  /** ms from the start of the whole recording. */
  readonly segments: ReadonlyArray<SpeechSegment>
  /** Present when asked for: one per `frameMs` frame from `sampleOffset`. */
  readonly probabilities?: Float32Array
  readonly frameMs: number
  /** Duration of this chunk, ms. */
  readonly durationMs: number
  /** Wall time of the model runs in the worker (load excluded), ms. */
  readonly engineMs: number
}

export interface VadProbabilitiesInput {
  /** s16le mono at 16 kHz; a multiple of the 512-sample frame unless it is the last block. */
  readonly pcm: Int16Array
  /** What the previous block returned; absent for the first block. */
  readonly carry?: VadCarry
  /** Give the model back once this thread has not used it for this long, ms; undefined keeps it. */
  readonly releaseAfterMs?: number
}

export interface VadProbabilitiesOutput {
  /** One per 32 ms frame of this block (moved). */
  readonly probabilities: Float32Array
  /** For the next block (moved). */
  readonly carry: VadCarry
  readonly engineMs: number
}

const silero = perThreadWhileUsed(() => SileroVad.load(), (vad) => vad.dispose())

/** Runs `f` with this thread's model, loading it if needed. */
const withSilero = async <T>(releaseAfterMs: number | undefined, f: (vad: SileroVad) => Promise<T>): Promise<T> => {
  try {
    return await silero(releaseAfterMs, f)
  } catch (e) {
    throw VadError.is(e) ? new TaskError(e.reason, e.message, "VadError") : e
  }
}

export const vadTasks = defineTasks({
  "vad.segments": async (input: VadSegmentsInput): Promise<VadSegmentsOutput | Transfer<VadSegmentsOutput>> => {
    if (!(input.pcm instanceof Int16Array)) throw new TaskError("InvalidInput", "pcm must be an Int16Array", "VadError")
    const sampleOffset = input.sampleOffset ?? 0
    if (!Number.isInteger(sampleOffset) || sampleOffset < 0) throw new TaskError("InvalidInput", `bad sampleOffset ${sampleOffset}`, "VadError")
    const { result, engineMs } = await withSilero(input.releaseAfterMs, async (vad) => {
      const started = performance.now()
      try {
        return { result: await vad.segments(input.pcm, input.options), engineMs: performance.now() - started }
      } catch (e) {
        if (e instanceof RangeError) throw new TaskError("InvalidInput", e.message, "VadError")
        throw e
      }
    })
    const offsetMs = (sampleOffset * 1000) / VAD_SAMPLE_RATE
    const segments = result.segments.map((s) => ({ startMs: s.startMs + offsetMs, endMs: s.endMs + offsetMs }))
    const base = { segments, frameMs: VAD_FRAME_MS, durationMs: result.durationMs, engineMs }
    if (input.withProbabilities !== true) return base
    const output: VadSegmentsOutput = { ...base, probabilities: result.probabilities }
    return transfer(output, [result.probabilities.buffer as ArrayBuffer])
  },
  "vad.probabilities": async (input: VadProbabilitiesInput): Promise<Transfer<VadProbabilitiesOutput>> => {
    if (!(input.pcm instanceof Int16Array)) throw new TaskError("InvalidInput", "pcm must be an Int16Array", "VadError")
    const output: VadProbabilitiesOutput = await withSilero(input.releaseAfterMs, async (vad) => {
      const started = performance.now()
      const result = await vad.continueProbabilities(input.pcm, input.carry)
      return { ...result, engineMs: performance.now() - started }
    })
    return transfer(output, [output.probabilities.buffer as ArrayBuffer, output.carry.state.buffer as ArrayBuffer, output.carry.context.buffer as ArrayBuffer])
  }
})
