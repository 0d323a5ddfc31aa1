/**
 * The one FFT: iterative radix-2 over (re, im), lengths a power of two. Two entry points share
 * its butterflies and differ only in where the twiddle factors come from, each kept exactly as it
 * was when they were two modules, so every result is bit-identical to before:
 *
 * - `fftInPlace` (clone resynthesis, tests): complex, forward or inverse (the inverse divides by
 *   n, so forward then inverse returns the input). Twiddles are the recurrence w_k = w_(k-1) · w
 *   per stage, built once per size and direction and cached.
 * - `PowerSpectrum` (speaker features, voice analysis): |X[k]|² of one real frame, zero-padded,
 *   with twiddles cos/sin(2πk/n) computed directly; scratch buffers are reused, so one instance
 *   per user (cheap), never shared by concurrent callers.
 *
 * Written here rather than taken from meyda: speaker features use 25 ms frames (400 samples at
 * 16 kHz, zero-padded to 512), meyda accepts only power-of-two frame sizes and costs ≈ 265 µs a
 * frame; this costs a few µs. Plain functions, no `effect`: worker threads load this module.
 */

/**
 * Radix-2 butterflies over bit-reversed (re, im). The twiddle for butterfly k of the stage whose
 * blocks are 2·half long is at index `half - 1 + k` in per-stage tables (`perStage`), else at
 * `k · n / (2·half)` in one table of n/2 entries.
 */
const butterflies = (re: Float64Array, im: Float64Array, cos: Float64Array, sin: Float64Array, perStage: boolean): void => {
  const n = re.length
  for (let half = 1; half < n; half <<= 1) {
    const base = perStage ? half - 1 : 0
    const step = perStage ? 1 : n / (2 * half)
    for (let start = 0; start < n; start += 2 * half) {
      for (let k = 0; k < half; k++) {
        const wr = cos[base + k * step]!
        const wi = sin[base + k * step]!
        const a = start + k
        const b = a + half
        const tr = re[b]! * wr - im[b]! * wi
        const ti = re[b]! * wi + im[b]! * wr
        re[b] = re[a]! - tr
        im[b] = im[a]! - ti
        re[a] = re[a]! + tr
        im[a] = im[a]! + ti
      }
    }
  }
}

interface Twiddles {
  readonly cos: Float64Array
  readonly sin: Float64Array
}

const recurrenceTables = new Map<number, Twiddles>()

/** Per-stage twiddles by recurrence (n - 1 entries); the key's sign is the direction. */
const recurrenceTwiddles = (n: number, inverse: boolean): Twiddles => {
  const key = inverse ? -n : n
  let t = recurrenceTables.get(key)
  if (t === undefined) {
    const cos = new Float64Array(Math.max(0, n - 1))
    const sin = new Float64Array(Math.max(0, n - 1))
    for (let len = 2; len <= n; len <<= 1) {
      const ang = ((inverse ? 2 : -2) * Math.PI) / len
      const wr = Math.cos(ang)
      const wi = Math.sin(ang)
      const base = len / 2 - 1
      let cr = 1
      let ci = 0
      for (let k = 0; k < len / 2; k++) {
        cos[base + k] = cr
        sin[base + k] = ci
        const nr = cr * wr - ci * wi
        ci = cr * wi + ci * wr
        cr = nr
      }
    }
    t = { cos, sin }
    recurrenceTables.set(key, t)
  }
  return t
}

/**
 * In-place complex FFT over (re, im); length must be a power of two. The inverse divides by n,
 * so forward then inverse returns the input.
 */
export const fftInPlace = (re: Float64Array, im: Float64Array, inverse: boolean) => {
  const n = re.length
  for (let i = 1, j = 0; i < n; i++) {
    let bit = n >> 1
    for (; j & bit; bit >>= 1) j ^= bit
    j ^= bit
    if (i < j) {
      ;[re[i], re[j]] = [re[j]!, re[i]!]
      ;[im[i], im[j]] = [im[j]!, im[i]!]
    }
  }
  const { cos, sin } = recurrenceTwiddles(n, inverse)
  butterflies(re, im, cos, sin, true)
  if (inverse) for (let i = 0; i < n; i++) {
    re[i] = re[i]! / n
    im[i] = im[i]! / n
  }
}

/** Power spectrum of one real frame, tables built once per size. */
export class PowerSpectrum {
  /** Number of bins returned: size / 2 + 1 (DC … Nyquist). */
  readonly bins: number
  private readonly re: Float64Array
  private readonly im: Float64Array
  private readonly cos: Float64Array
  private readonly sin: Float64Array
  private readonly reversed: Uint32Array

  /** `size` must be a power of two ≥ 2 (samples). */
  constructor(readonly size: number) {
    if (!Number.isInteger(size) || size < 2 || (size & (size - 1)) !== 0) throw new RangeError(`FFT size must be a power of two, got ${size}`)
    this.bins = size / 2 + 1
    this.re = new Float64Array(size)
    this.im = new Float64Array(size)
    this.cos = new Float64Array(size / 2)
    this.sin = new Float64Array(size / 2)
    for (let k = 0; k < size / 2; k++) {
      this.cos[k] = Math.cos((2 * Math.PI * k) / size)
      this.sin[k] = -Math.sin((2 * Math.PI * k) / size)
    }
    this.reversed = new Uint32Array(size)
    const bits = Math.log2(size)
    for (let i = 0; i < size; i++) {
      let r = 0
      for (let b = 0; b < bits; b++) r |= ((i >> b) & 1) << (bits - 1 - b)
      this.reversed[i] = r
    }
  }

  /**
   * |X[k]|² for k = 0 … size/2 of `frame` (shorter frames are zero-padded; longer ones are an
   * error), written into `out` (length ≥ bins). Unscaled: Parseval gives Σ|X|² = size · Σx².
   */
  compute(frame: ArrayLike<number>, out: Float64Array): Float64Array {
    const n = this.size
    if (frame.length > n) throw new RangeError(`frame of ${frame.length} samples exceeds FFT size ${n}`)
    const { re, im, reversed } = this
    for (let i = 0; i < n; i++) {
      const j = reversed[i]!
      re[j] = i < frame.length ? frame[i]! : 0
      im[j] = 0
    }
    butterflies(re, im, this.cos, this.sin, false)
    for (let k = 0; k < this.bins; k++) out[k] = re[k]! * re[k]! + im[k]! * im[k]!
    return out
  }
}
