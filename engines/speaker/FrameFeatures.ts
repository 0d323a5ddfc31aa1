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

interface Tables {
  readonly window: Float64Array
  /** MEL_BANDS rows of FFT bins (sparse: first bin and weights). */
  readonly filters: ReadonlyArray<{ readonly first: number; readonly weights: Float64Array }>
  /** CEPSTRA rows × MEL_BANDS, for c1…c19. */
  readonly dct: Float64Array
}

let tables: Tables | undefined

const buildTables = (): Tables => {
  if (tables !== undefined) return tables
  const window = new Float64Array(FRAME_SAMPLES)
  for (let n = 0; n < FRAME_SAMPLES; n++) window[n] = 0.54 - 0.46 * Math.cos((2 * Math.PI * n) / (FRAME_SAMPLES - 1))
  const lo = mel(MEL_LOW_HZ)
  const hi = mel(MEL_HIGH_HZ)
  const edges = Array.from({ length: MEL_BANDS + 2 }, (_, k) => (hzOfMel(lo + ((hi - lo) * k) / (MEL_BANDS + 1)) * FFT_SIZE) / SAMPLE_RATE)
  const filters = []
  for (let b = 0; b < MEL_BANDS; b++) {
    const [l, c, r] = [edges[b]!, edges[b + 1]!, edges[b + 2]!]
    const first = Math.ceil(l)
    const last = Math.floor(r)
    const weights = new Float64Array(Math.max(0, last - first + 1))
    for (let k = first; k <= last; k++) weights[k - first] = k <= c ? (k - l) / (c - l) : (r - k) / (r - c)
    filters.push({ first, weights })
  }
  const dct = new Float64Array(CEPSTRA * MEL_BANDS)
  for (let q = 1; q <= CEPSTRA; q++) {
    for (let b = 0; b < MEL_BANDS; b++) dct[(q - 1) * MEL_BANDS + b] = Math.sqrt(2 / MEL_BANDS) * Math.cos((Math.PI * q * (b + 0.5)) / MEL_BANDS)
  }
  tables = { window, filters, dct }
  return tables
}

/** Features of every whole frame of `pcm` (16 kHz mono float). */
export const frameFeatures = (pcm: Float32Array): FrameFeatures => {
  const { window, filters, dct } = buildTables()
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
    const at = i * HOP_SAMPLES
    let sumSquares = 0
    for (let n = 0; n < FRAME_SAMPLES; n++) {
      const s = pcm[at + n]!
      sumSquares += s * s
      const previous = at + n > 0 ? pcm[at + n - 1]! : 0
      frame[n] = (s - PRE_EMPHASIS * previous) * window[n]!
    }
    energyDb[i] = sumSquares > 0 ? 10 * Math.log10(sumSquares / FRAME_SAMPLES) : -200
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
