/**
 * Band-limited sample-rate conversion, one-shot or streaming (state kept across chunks).
 *
 * Filter: polyphase windowed-sinc. The rate ratio is reduced to L/M (e.g. 22050 → 48000 is
 * 320/147); output sample n sits at input time n·M/L and is the dot product of 2·H input samples
 * with one of L precomputed phase rows.
 *   - cutoff (-6 dB) at 0.4575 × the lower of the two rates (0.915 × its Nyquist),
 *   - Kaiser window β = 8.6, 16 zero crossings each side at the lower rate,
 *     so H = 16 × max(1, inRate/outRate) input samples (32 halved the alias floor to ≈ -90 dB
 *     but cost as much CPU as espeak-ng itself at 22050 → 24000; speech has little energy at
 *     the band edge, and -59 dB there is far below audibility),
 *   - transition band ≈ 0.415–0.5 × lower rate: e.g. for 8000 Hz output, flat to ~3.3 kHz and
 *     measured: a 4.3 kHz tone into 8 kHz output at -70 dB, 8.5 kHz into 16 kHz at -59 dB,
 *     3.3 kHz passes at -0.5 dB; every phase row is normalised to unity DC gain.
 * The filter is centred (zero delay): output n is aligned with input time n·M/L. A stream holds
 * back H input samples (≈ 1.5 ms at 22050 → 48000) until `flush()`, which pads with zeros and
 * emits the tail; a stream's concatenated output equals the one-shot output sample for sample,
 * which is what keeps sentence-by-sentence synthesis free of clicks at segment boundaries.
 * Cost: 2·H multiply-adds per output sample (32 when upsampling, 90 for 22050 → 8000), four f32
 * lanes at a time in a WebAssembly SIMD kernel (ResamplerKernel.ts); the JavaScript loop below
 * (float64 sums) is the fallback where WebAssembly SIMD is unavailable. bench/resampler.ts, ms of
 * CPU per second of audio on one core here, streamed in 100 ms blocks, 22050 → 24000 and
 * 22050 → 8000: SIMD ≈ 0.1–0.18 and 0.1–0.14, JavaScript ≈ 1.0–1.6 and 0.9–1.4, i.e. 8–10× (the
 * ranges are the load of a shared machine; the ratio holds), against ≈ 8 ms for espeak-ng's own
 * synthesis. The kernels agree to ≈ 2e-7 of full scale, not bit for bit; a stream keeps the
 * kernel it started with, so stream = one-shot holds sample for sample with either.
 */

import { floatToInt16 } from "./Pcm.ts"
import { createSimdKernel, platformWasm } from "./ResamplerKernel.ts"

const ZERO_CROSSINGS = 16
const KAISER_BETA = 8.6
const CUTOFF = 0.915

interface Design {
  readonly L: number
  readonly M: number
  /** Half-length of the filter in input samples. */
  readonly H: number
  /** L rows of 2H taps, row-major. */
  readonly table: Float32Array
  /** The SIMD kernel can take this design (its table and scratch fit the kernel's budget). */
  readonly simd: boolean
}

const designs = new Map<string, Design>()
/** Designs kept (oldest dropped first); the usual pairs are a handful. */
const MAX_DESIGNS = 64

/** Compiled once per thread (each worker thread evaluates this module anew); undefined without SIMD. */
const simdKernel = createSimdKernel(platformWasm)

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b))

/** Zeroth-order modified Bessel function of the first kind (series; converges fast for β ≤ 20). */
const besselI0 = (x: number): number => {
  let sum = 1
  let term = 1
  const q = (x * x) / 4
  for (let k = 1; k < 64; k++) {
    term *= q / (k * k)
    sum += term
    if (term < sum * 1e-17) break
  }
  return sum
}

const design = (inRate: number, outRate: number): Design => {
  const key = `${inRate}>${outRate}`
  const cached = designs.get(key)
  if (cached) return cached
  const g = gcd(inRate, outRate)
  const L = outRate / g
  const M = inRate / g
  const down = Math.max(1, inRate / outRate)
  const H = Math.ceil(ZERO_CROSSINGS * down)
  // Cutoff in cycles per input sample.
  const fc = 0.5 * CUTOFF * Math.min(1, outRate / inRate)
  const i0Beta = besselI0(KAISER_BETA)
  const taps = 2 * H
  const table = new Float32Array(L * taps)
  const row = new Float64Array(taps)
  for (let p = 0; p < L; p++) {
    let sum = 0
    for (let m = 0; m < taps; m++) {
      // Distance (input samples) from the output instant to input sample j = i - H + 1 + m.
      const tau = p / L + H - 1 - m
      const x = 2 * fc * tau
      const sinc = x === 0 ? 1 : Math.sin(Math.PI * x) / (Math.PI * x)
      const r = tau / H
      const w = r <= -1 || r >= 1 ? 0 : besselI0(KAISER_BETA * Math.sqrt(1 - r * r)) / i0Beta
      row[m] = 2 * fc * sinc * w
      sum += row[m]!
    }
    for (let m = 0; m < taps; m++) table[p * taps + m] = row[m]! / sum
  }
  const d = { L, M, H, table, simd: simdKernel?.admit(taps, L, M) ?? false }
  // Bounded: each distinct pair of rates (uploads may have any rate) holds its table here.
  if (designs.size >= MAX_DESIGNS) designs.delete(designs.keys().next().value!)
  designs.set(key, d)
  return d
}

const checkRate = (rate: number, what: string) => {
  if (!Number.isInteger(rate) || rate <= 0 || rate > 1_000_000) throw new RangeError(`${what} must be a positive integer Hz, got ${rate}`)
}

/** Streaming resampler: push chunks, then flush once. Not reusable after `flush()`. */
export class Resampler {
  private readonly d: Design
  /** Chosen once, so that every block of a stream goes through the same arithmetic. */
  private readonly kernel: Kernel
  private buf: Float32Array
  /** Absolute input index of buf[0]; negative at the start (implicit leading zeros). */
  private bufStart: number
  private bufLen: number
  /** Integer part of the next output's input time, and its phase (0..L-1). */
  private i = 0
  private p = 0
  private produced = 0
  private consumed = 0
  private finished = false

  constructor(readonly inRate: number, readonly outRate: number) {
    checkRate(inRate, "input rate")
    checkRate(outRate, "output rate")
    this.d = design(inRate, outRate)
    this.kernel = kernelFor(this.d)
    // H zeros before the first sample so the first outputs see a full filter window.
    this.buf = new Float32Array(Math.max(4096, 4 * this.d.H))
    this.bufStart = -this.d.H
    this.bufLen = this.d.H
  }

  /** Output samples that `inputSamples` input samples turn into once flushed. */
  static outputLength(inputSamples: number, inRate: number, outRate: number): number {
    const g = gcd(inRate, outRate)
    return Math.ceil((inputSamples * (outRate / g)) / (inRate / g))
  }

  /** Feeds input; returns every output sample that no longer depends on future input. */
  push(chunk: Float32Array): Float32Array {
    if (this.finished) throw new Error("Resampler: push after flush")
    this.append(chunk)
    this.consumed += chunk.length
    return this.produce(new Float32Array(this.available(this.bufStart + this.bufLen - this.d.H, Infinity)))
  }

  /**
   * `floatToInt16(push(int16ToFloat(chunk)))`, sample for sample, without the two intermediate
   * Float32Arrays per block (the TTS workers' path from espeak-ng's s16 to s16 at another rate):
   * the input is converted straight into the window, and the SIMD kernel converts its output to
   * s16 itself. Measured (bench/resampler.ts, 22050 → 24000 in espeak-ng's blocks): the JavaScript
   * float → s16 pass had cost more than the filter.
   */
  pushInt16(chunk: Int16Array): Int16Array {
    if (this.finished) throw new Error("Resampler: push after flush")
    const at = this.bufLen
    this.reserve(at + chunk.length)
    const buf = this.buf
    if (this.kernel === wasmKernel) simdKernel!.toFloat(chunk, buf.subarray(at, at + chunk.length))
    else for (let k = 0; k < chunk.length; k++) buf[at + k] = chunk[k]! / 32768
    this.bufLen = at + chunk.length
    this.consumed += chunk.length
    return this.produce(new Int16Array(this.available(this.bufStart + this.bufLen - this.d.H, Infinity)))
  }

  /** Pads the end with zeros and returns the remaining output; the stream is then finished. */
  flush(): Float32Array {
    if (this.finished) return new Float32Array(0)
    this.finished = true
    this.append(new Float32Array(this.d.H))
    const total = Resampler.outputLength(this.consumed, this.inRate, this.outRate)
    return this.produce(new Float32Array(this.available(this.bufStart + this.bufLen - this.d.H, total)))
  }

  private reserve(need: number) {
    if (need > this.buf.length) {
      const bigger = new Float32Array(Math.max(need, this.buf.length * 2))
      bigger.set(this.buf.subarray(0, this.bufLen))
      this.buf = bigger
    }
  }

  private append(chunk: Float32Array) {
    const need = this.bufLen + chunk.length
    this.reserve(need)
    this.buf.set(chunk, this.bufLen)
    this.bufLen = need
  }

  /** Outputs that can be made while i < iLimit (so i + H - 1 is buffered) and produced < maxOut. */
  private available(iLimit: number, maxOut: number): number {
    const { L, M } = this.d
    return Math.max(0, Math.min(maxOut - this.produced, Math.ceil(((iLimit - this.i) * L - this.p) / M)))
  }

  /** Fills `out` with the next outputs (see `available`) and drops the input no later one needs. */
  private produce<A extends Float32Array | Int16Array>(out: A): A {
    const { L, M, H } = this.d
    const count = out.length
    this.kernel(this.d, this.buf, this.i - H + 1 - this.bufStart, this.p, out)
    // The kernel stepped the input time by count·M/L, one output at a time; the same, at once.
    const step = this.p + count * M
    this.i += Math.floor(step / L)
    this.p = step % L
    this.produced += count
    // Drop input that no future output can reach (index < i - H + 1).
    const buf = this.buf
    const keepFrom = Math.min(this.i - H + 1 - this.bufStart, this.bufLen)
    if (keepFrom > 0) {
      buf.copyWithin(0, keepFrom, this.bufLen)
      this.bufLen -= keepFrom
      this.bufStart += keepFrom
    }
    return out
  }
}

/**
 * The filter itself: fills `out` with the outputs whose input time starts at i + p/L, where
 * buf[j] is input sample i - H + 1, the first of the first output's window (every sample the
 * windows touch must be in `buf`); an Int16Array `out` gets them as floatToInt16 would. Two
 * implementations: SIMD (ResamplerKernel.ts, f32x4 lanes) and this JavaScript loop (float64
 * sums), the fallback where WebAssembly SIMD is unavailable. Their outputs differ in the last
 * bits (float32 against float64 rounding).
 */
type Kernel = (d: Design, buf: Float32Array, j: number, p: number, out: Float32Array | Int16Array) => void

const jsKernel: Kernel = (d, buf, j, p, out) => {
  if (out instanceof Int16Array) {
    const samples = new Float32Array(out.length)
    jsLoop(d, buf, j, p, samples)
    out.set(floatToInt16(samples))
  } else jsLoop(d, buf, j, p, out)
}

const jsLoop = (d: Design, buf: Float32Array, j: number, p: number, out: Float32Array): void => {
  const { L, M, H, table } = d
  const taps = 2 * H
  const count = out.length
  for (let n = 0; n < count; n++) {
    // Four partial sums over running indices: one running sum is bound by the latency of each
    // addition, four independent ones overlap (measured ≈ 2× on this loop). taps = 2·H is even
    // but not always a multiple of four (22050 → 8000: 90), hence the tail.
    let k = j
    let r = p * taps
    const end4 = r + (taps & ~3)
    const end = r + taps
    let a0 = 0
    let a1 = 0
    let a2 = 0
    let a3 = 0
    while (r < end4) {
      a0 += buf[k]! * table[r]!
      a1 += buf[k + 1]! * table[r + 1]!
      a2 += buf[k + 2]! * table[r + 2]!
      a3 += buf[k + 3]! * table[r + 3]!
      k += 4
      r += 4
    }
    while (r < end) a0 += buf[k++]! * table[r++]!
    out[n] = a0 + a1 + (a2 + a3)
    // Step the input time by M/L: subtraction instead of a division per output sample.
    p += M
    while (p >= L) {
      p -= L
      j++
    }
  }
}

const wasmKernel: Kernel | undefined =
  simdKernel && ((d, buf, j, p, out) => simdKernel.convolve(d.table, 2 * d.H, d.L, d.M, buf, j, p, out))

export type ResamplerKernelKind = "simd" | "js"
let preferred: ResamplerKernelKind = wasmKernel === undefined ? "js" : "simd"

/** The kernel new streams and one-shot calls use: "simd" unless unavailable or set otherwise. */
export const resamplerKernel = (): ResamplerKernelKind => preferred

/**
 * Forces the kernel for streams created and one-shot calls made from now on (tests and the bench
 * compare the two); "simd" throws where WebAssembly SIMD is unavailable. Returns the previous one.
 */
export const setResamplerKernel = (kind: ResamplerKernelKind): ResamplerKernelKind => {
  if (kind === "simd" && wasmKernel === undefined) throw new Error("Resampler: WebAssembly SIMD is not available here")
  const previous = preferred
  preferred = kind
  return previous
}

const kernelFor = (d: Design): Kernel => (preferred === "simd" && d.simd && wasmKernel !== undefined ? wasmKernel : jsKernel)

/**
 * One-shot conversion; identical, sample for sample, to pushing everything into a `Resampler`
 * and flushing, but with one padded copy of the input instead of the stream's growing buffer,
 * and the output written once.
 */
export const resample = (samples: Float32Array, inRate: number, outRate: number): Float32Array => {
  if (inRate === outRate) {
    checkRate(inRate, "rate")
    return samples.slice()
  }
  checkRate(inRate, "input rate")
  checkRate(outRate, "output rate")
  const d = design(inRate, outRate)
  // H zeros on each side: the stream's implicit leading zeros and its flush padding.
  const padded = new Float32Array(samples.length + 2 * d.H)
  padded.set(samples, d.H)
  const out = new Float32Array(Resampler.outputLength(samples.length, inRate, outRate))
  kernelFor(d)(d, padded, 1, 0, out)
  return out
}
