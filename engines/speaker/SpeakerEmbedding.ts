/**
 * The speaker-embedding contract: 16 kHz mono speech → a fixed-length, L2-normalised vector whose
 * cosine with another is high for the same voice and lower for a different one. Used by
 * diarization (clustering windows of one recording) and by the voice-clone bench (reference vs
 * synthesis). Implementations run on worker threads; the default is classical (MfccEmbedding.ts),
 * a neural one (ECAPA, x-vector from a model directory) plugs in behind the same shape.
 *
 * Units: input is Float32 samples in [-1, 1] at exactly 16 000 Hz; windows are ms from the start
 * of that buffer, end exclusive.
 *
 * Hazards:
 *  - Cosines are comparable only between vectors of the same implementation (`name`): never mix
 *    embeddings of two implementations in one clustering or one stored profile.
 *  - Audio with no usable speech (digital silence, shorter than one analysis frame) gives the
 *    all-zero vector, whose cosine with anything is 0; callers that cluster must skip it
 *    (`isZero`). Every other result has norm 1 (± float rounding).
 */

export const EMBEDDING_SAMPLE_RATE = 16000

export interface EmbeddingWindow {
  /** ms from the start of the buffer. */
  readonly startMs: number
  /** ms, end exclusive; past the buffer's end is clamped. */
  readonly endMs: number
}

export interface SpeakerEmbedding {
  /** Identifies the implementation and its version, e.g. "mfcc-stats-v1". */
  readonly name: string
  readonly dimension: number
  /** One vector for the whole buffer. */
  embed(pcm16k: Float32Array): Float32Array
  /**
   * One vector per window of one buffer. Implementations may share work across overlapping
   * windows (analysis frames computed once), so a result can differ slightly from `embed` of the
   * same slice at its edges; it is deterministic all the same.
   */
  embedWindows(pcm16k: Float32Array, windows: ReadonlyArray<EmbeddingWindow>): Array<Float32Array>
}

export class SpeakerEmbeddingError extends Error {
  override readonly name = "SpeakerEmbeddingError"
  constructor(readonly reason: "InvalidInput" | "WrongDimension", message: string) {
    super(message)
  }
}

/** Cosine similarity; 0 when either vector is all zeros. Throws on a length mismatch. */
export const cosine = (a: ArrayLike<number>, b: ArrayLike<number>): number => {
  if (a.length !== b.length) throw new RangeError(`cosine of vectors of length ${a.length} and ${b.length}`)
  let ab = 0
  let aa = 0
  let bb = 0
  for (let i = 0; i < a.length; i++) {
    ab += a[i]! * b[i]!
    aa += a[i]! * a[i]!
    bb += b[i]! * b[i]!
  }
  return aa === 0 || bb === 0 ? 0 : ab / Math.sqrt(aa * bb)
}

/** Scales to unit length in place; an all-zero (or non-finite) vector becomes all zeros. */
export const l2Normalise = (v: Float32Array): Float32Array => {
  let s = 0
  for (let i = 0; i < v.length; i++) s += v[i]! * v[i]!
  const norm = Math.sqrt(s)
  if (!(norm > 0) || !Number.isFinite(norm)) v.fill(0)
  else for (let i = 0; i < v.length; i++) v[i] = v[i]! / norm
  return v
}

export const isZero = (v: ArrayLike<number>): boolean => {
  for (let i = 0; i < v.length; i++) if (v[i] !== 0) return false
  return true
}

/** Samples of `pcm16k` that a window covers, clamped to the buffer (a view, not a copy). */
export const windowSlice = (pcm16k: Float32Array, w: EmbeddingWindow): Float32Array => {
  const start = Math.max(0, Math.min(pcm16k.length, Math.round((w.startMs * EMBEDDING_SAMPLE_RATE) / 1000)))
  const end = Math.max(start, Math.min(pcm16k.length, Math.round((w.endMs * EMBEDDING_SAMPLE_RATE) / 1000)))
  return pcm16k.subarray(start, end)
}

export interface SpeakerEmbeddingHooks {
  readonly name: string
  readonly dimension: number
  /** The implementation's one method; its result is checked and L2-normalised here. */
  readonly embed: (pcm16k: Float32Array) => Float32Array
  /** Optional batched form sharing work across windows; default: `embed` of each slice. */
  readonly embedWindows?: (pcm16k: Float32Array, windows: ReadonlyArray<EmbeddingWindow>) => Array<Float32Array>
}

const checkPcm = (pcm: unknown): Float32Array => {
  if (!(pcm instanceof Float32Array)) throw new SpeakerEmbeddingError("InvalidInput", "speaker embedding needs Float32Array PCM at 16 kHz")
  return pcm
}

const checkWindows = (windows: ReadonlyArray<EmbeddingWindow>) => {
  for (const w of windows) {
    if (!(Number.isFinite(w.startMs) && Number.isFinite(w.endMs) && w.startMs >= 0 && w.endMs >= w.startMs)) {
      throw new SpeakerEmbeddingError("InvalidInput", `bad window ${JSON.stringify(w)}: need 0 ≤ startMs ≤ endMs`)
    }
  }
}

/**
 * Builds a `SpeakerEmbedding` from an implementation's hook: input checks, dimension check and
 * L2 normalisation live here so that every implementation honours the contract the same way.
 */
export const makeSpeakerEmbedding = (hooks: SpeakerEmbeddingHooks): SpeakerEmbedding => {
  const finish = (v: Float32Array): Float32Array => {
    if (v.length !== hooks.dimension) throw new SpeakerEmbeddingError("WrongDimension", `${hooks.name} returned ${v.length} values, not ${hooks.dimension}`)
    return l2Normalise(v)
  }
  const embed = (pcm16k: Float32Array) => finish(hooks.embed(checkPcm(pcm16k)))
  return {
    name: hooks.name,
    dimension: hooks.dimension,
    embed,
    embedWindows: (pcm16k, windows) => {
      checkPcm(pcm16k)
      checkWindows(windows)
      if (hooks.embedWindows === undefined) return windows.map((w) => embed(windowSlice(pcm16k, w)))
      const out = hooks.embedWindows(pcm16k, windows)
      if (out.length !== windows.length) throw new SpeakerEmbeddingError("WrongDimension", `${hooks.name} returned ${out.length} vectors for ${windows.length} windows`)
      return out.map(finish)
    }
  }
}
