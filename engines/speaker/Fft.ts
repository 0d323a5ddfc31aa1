/**
 * Power spectrum of one real frame: iterative radix-2 FFT with tables built once per size.
 *
 * Written here rather than taken from meyda because speaker features use 25 ms frames (400
 * samples at 16 kHz, zero-padded to 512) and meyda accepts only power-of-two frame sizes and
 * costs ≈ 265 µs a frame; this costs a few µs. Not thread-safe across concurrent callers of one
 * instance (scratch buffers are reused): make one per user, which is cheap.
 */

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
    for (let half = 1; half < n; half <<= 1) {
      const step = n / (2 * half)
      for (let start = 0; start < n; start += 2 * half) {
        for (let k = 0; k < half; k++) {
          const wr = this.cos[k * step]!
          const wi = this.sin[k * step]!
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
    for (let k = 0; k < this.bins; k++) out[k] = re[k]! * re[k]! + im[k]! * im[k]!
    return out
  }
}
