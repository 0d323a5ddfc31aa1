/**
 * Short-time features of 16 kHz speech for the classical speaker embedding: one row per 10 ms.
 *
 * Frame i covers samples [i·160, i·160 + 400) (25 ms, Hamming window, pre-emphasis 0.97, FFT 512).
 * Per frame:
 *  - `mfcc`: cepstra c1…c19 (orthonormal DCT-II of 40 log mel-band powers, 50–7000 Hz; c0 is
 *    left out so the vector does not depend on loudness). The band edge stays under 7.3 kHz,
 *    where 22.05 → 16 kHz resampled audio (espeak) starts to roll off, so engines that made
 *    their audio at different rates are measured alike.
 *  - `delta`: regression deltas of the cepstra over ±2 frames (edges repeat the end frame).
 *  - `energyDb`: frame power in dB relative to full scale (mean square; digital silence −200).
 *  - `bands`: linear power in `LTAS_BANDS` groups of adjacent mel bands, for the long-term
 *    average spectrum.
 *  - `f0`: Hz, 0 when unvoiced (Pitch.ts).
 * Arrays are frame-major: row i starts at i·width.
 */
import { PowerSpectrum } from "../audio/Fft.ts"
import { pitchTrack } from "./Pitch.ts"

export const SAMPLE_RATE = 16000
export const FRAME_SAMPLES = 400
export const HOP_SAMPLES = 160
export const HOP_MS = 10
export const CEPSTRA = 19
export const MEL_BANDS = 40
export const LTAS_BANDS = 10
const FFT_SIZE = 512
const MEL_LOW_HZ = 50
const MEL_HIGH_HZ = 7000
const PRE_EMPHASIS = 0.97
const DELTA_SPAN = 2
/** Floor added to band powers before the log, so digital silence stays finite. */
const POWER_FLOOR = 1e-10

export interface FrameFeatures {
  readonly frames: number
  readonly mfcc: Float32Array
  readonly delta: Float32Array
  readonly energyDb: Float32Array
  readonly bands: Float32Array
  readonly f0: Float32Array
}

/** Frames that fit entirely inside `samples` samples. */
export const frameCount = (samples: number): number => (samples < FRAME_SAMPLES ? 0 : Math.floor((samples - FRAME_SAMPLES) / HOP_SAMPLES) + 1)

const mel = (hz: number) => 2595 * Math.log10(1 + hz / 700)
const hzOfMel = (m: number) => 700 * (10 ** (m / 2595) - 1)

/** A mel filterbank and its cepstra: bands over [lowHz, highHz], c1…c`cepstra`. */
export interface MelSpec {
  readonly lowHz: number
  readonly highHz: number
  readonly bands: number
  readonly cepstra: number
}

const EMBEDDING_MEL: MelSpec = { lowHz: MEL_LOW_HZ, highHz: MEL_HIGH_HZ, bands: MEL_BANDS, cepstra: CEPSTRA }

interface Tables {
  readonly window: Float64Array
  /** `bands` rows of FFT bins (sparse: first bin and weights). */
  readonly filters: ReadonlyArray<{ readonly first: number; readonly weights: Float64Array }>
  /** `cepstra` rows × `bands`, for c1…c`cepstra`. */
  readonly dct: Float64Array
}

const tablesBySpec = new Map<string, Tables>()

const buildTables = (spec: MelSpec): Tables => {
  const key = `${spec.lowHz}/${spec.highHz}/${spec.bands}/${spec.cepstra}`
  const cached = tablesBySpec.get(key)
  if (cached !== undefined) return cached
  const window = new Float64Array(FRAME_SAMPLES)
  for (let n = 0; n < FRAME_SAMPLES; n++) window[n] = 0.54 - 0.46 * Math.cos((2 * Math.PI * n) / (FRAME_SAMPLES - 1))
  const lo = mel(spec.lowHz)
  const hi = mel(spec.highHz)
  const edges = Array.from({ length: spec.bands + 2 }, (_, k) => (hzOfMel(lo + ((hi - lo) * k) / (spec.bands + 1)) * FFT_SIZE) / SAMPLE_RATE)
  const filters = []
  for (let b = 0; b < spec.bands; b++) {
    const [l, c, r] = [edges[b]!, edges[b + 1]!, edges[b + 2]!]
    const first = Math.ceil(l)
    const last = Math.floor(r)
    const weights = new Float64Array(Math.max(0, last - first + 1))
    for (let k = first; k <= last; k++) weights[k - first] = k <= c ? (k - l) / (c - l) : (r - k) / (r - c)
    filters.push({ first, weights })
  }
  const dct = new Float64Array(spec.cepstra * spec.bands)
  for (let q = 1; q <= spec.cepstra; q++) {
    for (let b = 0; b < spec.bands; b++) dct[(q - 1) * spec.bands + b] = Math.sqrt(2 / spec.bands) * Math.cos((Math.PI * q * (b + 0.5)) / spec.bands)
  }
  const tables = { window, filters, dct }
  tablesBySpec.set(key, tables)
  return tables
}

/**
 * One frame's windowed, pre-emphasised samples into `frame`; returns its energy in dBFS (mean
 * square; digital silence −200).
 */
const prepareFrame = (pcm: Float32Array, at: number, window: Float64Array, frame: Float64Array): number => {
  let sumSquares = 0
  for (let n = 0; n < FRAME_SAMPLES; n++) {
    const s = pcm[at + n]!
    sumSquares += s * s
    const previous = at + n > 0 ? pcm[at + n - 1]! : 0
    frame[n] = (s - PRE_EMPHASIS * previous) * window[n]!
  }
  return sumSquares > 0 ? 10 * Math.log10(sumSquares / FRAME_SAMPLES) : -200
}

/**
 * Cepstra of another filterbank (the diarizer's band-limited one) and frame energy, without the
 * embedding's pitch and spectrum extras: frame-major `cepstra` rows of `spec.cepstra`.
 */
export const melCepstra = (pcm: Float32Array, spec: MelSpec): { readonly frames: number; readonly cepstra: Float32Array; readonly energyDb: Float32Array } => {
  const { window, filters, dct } = buildTables(spec)
  const frames = frameCount(pcm.length)
  const cepstra = new Float32Array(frames * spec.cepstra)
  const energyDb = new Float32Array(frames)
  const fft = new PowerSpectrum(FFT_SIZE)
  const frame = new Float64Array(FRAME_SAMPLES)
  const power = new Float64Array(fft.bins)
  const logMel = new Float64Array(spec.bands)
  for (let i = 0; i < frames; i++) {
    energyDb[i] = prepareFrame(pcm, i * HOP_SAMPLES, window, frame)
    fft.compute(frame, power)
    for (let b = 0; b < spec.bands; b++) {
      const { first, weights } = filters[b]!
      let acc = 0
      for (let k = 0; k < weights.length; k++) acc += power[first + k]! * weights[k]!
      logMel[b] = Math.log(acc + POWER_FLOOR)
    }
    for (let q = 0; q < spec.cepstra; q++) {
      let acc = 0
      for (let b = 0; b < spec.bands; b++) acc += dct[q * spec.bands + b]! * logMel[b]!
      cepstra[i * spec.cepstra + q] = acc
    }
  }
  return { frames, cepstra, energyDb }
}

/** Features of every whole frame of `pcm` (16 kHz mono float). */
export const frameFeatures = (pcm: Float32Array): FrameFeatures => {
  const { window, filters, dct } = buildTables(EMBEDDING_MEL)
  const frames = frameCount(pcm.length)
  const mfcc = new Float32Array(frames * CEPSTRA)
  const energyDb = new Float32Array(frames)
  const bands = new Float32Array(frames * LTAS_BANDS)
  const fft = new PowerSpectrum(FFT_SIZE)
  const frame = new Float64Array(FRAME_SAMPLES)
  const power = new Float64Array(fft.bins)
  const logMel = new Float64Array(MEL_BANDS)
  const perGroup = MEL_BANDS / LTAS_BANDS
  for (let i = 0; i < frames; i++) {
    energyDb[i] = prepareFrame(pcm, i * HOP_SAMPLES, window, frame)
    fft.compute(frame, power)
    for (let b = 0; b < MEL_BANDS; b++) {
      const { first, weights } = filters[b]!
      let acc = 0
      for (let k = 0; k < weights.length; k++) acc += power[first + k]! * weights[k]!
      logMel[b] = Math.log(acc + POWER_FLOOR)
      const g = i * LTAS_BANDS + Math.floor(b / perGroup)
      bands[g] = bands[g]! + acc
    }
    for (let q = 0; q < CEPSTRA; q++) {
      let acc = 0
      for (let b = 0; b < MEL_BANDS; b++) acc += dct[q * MEL_BANDS + b]! * logMel[b]!
      mfcc[i * CEPSTRA + q] = acc
    }
  }
  return { frames, mfcc, delta: deltas(mfcc, frames, CEPSTRA), energyDb, bands, f0: pitchTrack(pcm, frames).f0 }
}

/** Regression deltas over ±DELTA_SPAN rows of a frame-major matrix. */
export const deltas = (values: Float32Array, rows: number, width: number): Float32Array => {
  const out = new Float32Array(rows * width)
  let norm = 0
  for (let k = 1; k <= DELTA_SPAN; k++) norm += 2 * k * k
  for (let i = 0; i < rows; i++) {
    for (let d = 0; d < width; d++) {
      let acc = 0
      for (let k = 1; k <= DELTA_SPAN; k++) {
        const ahead = Math.min(rows - 1, i + k)
        const behind = Math.max(0, i - k)
        acc += k * (values[ahead * width + d]! - values[behind * width + d]!)
      }
      out[i * width + d] = acc / norm
    }
  }
  return out
}
