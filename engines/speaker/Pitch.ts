/**
 * Fundamental frequency per 10 ms frame by normalised autocorrelation, for speaker statistics
 * (F0 level and range), not for prosody editing: no Viterbi smoothing, octave errors are only
 * reduced, never excluded.
 *
 * Input: 16 kHz mono float. It is decimated to 8 kHz (the project's windowed-sinc resampler),
 * which keeps 60–400 Hz F0 and its low harmonics and quarters the cost. Frame i of the caller's
 * framing (25 ms at 10 ms hop) is centred at 16 kHz sample i·160 + 200; its pitch is measured over
 * a 30 ms window around that centre against lags of 2.5–16.7 ms (400–60 Hz). A frame is voiced
 * when the best normalised correlation reaches `VOICING_THRESHOLD`. Among peaks within 10 % of
 * the best, the shortest lag wins (halving errors, F0 reported an octave low, are the common
 * failure of autocorrelation). Cost ≈ 30 k multiply-adds per frame (≈ 3 ms per second of audio).
 */
import { resample } from "../audio/Resampler.ts"

export const PITCH_MIN_HZ = 60
export const PITCH_MAX_HZ = 400
export const VOICING_THRESHOLD = 0.6

const RATE = 8000
/** Correlation window, samples at 8 kHz (30 ms). */
const WINDOW = 240
const MIN_LAG = Math.floor(RATE / PITCH_MAX_HZ)
const MAX_LAG = Math.ceil(RATE / PITCH_MIN_HZ)

export interface PitchTrack {
  /** Hz per frame; 0 where unvoiced. */
  readonly f0: Float32Array
  /** Best normalised autocorrelation per frame, 0..1. */
  readonly strength: Float32Array
}

/** F0 of `frameCount` frames (10 ms hop, 25 ms frames) of `pcm16k`. */
export const pitchTrack = (pcm16k: Float32Array, frameCount: number): PitchTrack => {
  const x = resample(pcm16k, 16000, RATE)
  const f0 = new Float32Array(frameCount)
  const strength = new Float32Array(frameCount)
  const r = new Float64Array(MAX_LAG + 2)
  const span = WINDOW + MAX_LAG
  for (let i = 0; i < frameCount; i++) {
    const centre = i * 80 + 100
    const start = Math.round(centre - span / 2)
    if (start < 0 || start + span + 2 > x.length) continue
    let e0 = 0
    for (let n = 0; n < WINDOW; n++) e0 += x[start + n]! * x[start + n]!
    if (e0 < 1e-9) continue
    // Energy of the lagged window, updated incrementally as the lag grows.
    let eLag = 0
    for (let n = 0; n < WINDOW; n++) eLag += x[start + MIN_LAG - 1 + n]! * x[start + MIN_LAG - 1 + n]!
    let best = 0
    for (let lag = MIN_LAG - 1; lag <= MAX_LAG + 1; lag++) {
      if (lag > MIN_LAG - 1) {
        const out = x[start + lag - 1]!
        const inn = x[start + lag + WINDOW - 1]!
        eLag += inn * inn - out * out
      }
      let acc = 0
      for (let n = 0; n < WINDOW; n++) acc += x[start + n]! * x[start + n + lag]!
      const v = acc / Math.sqrt(e0 * Math.max(eLag, 1e-12))
      r[lag] = v
      if (lag >= MIN_LAG && lag <= MAX_LAG && v > best) best = v
    }
    strength[i] = Math.max(0, best)
    if (best < VOICING_THRESHOLD) continue
    for (let lag = MIN_LAG; lag <= MAX_LAG; lag++) {
      const v = r[lag]!
      if (v >= 0.9 * best && v >= r[lag - 1]! && v >= r[lag + 1]!) {
        // Parabolic interpolation of the peak for sub-sample lag.
        const a = r[lag - 1]!
        const c = r[lag + 1]!
        const denom = a - 2 * v + c
        const shift = denom < 0 ? (0.5 * (a - c)) / denom : 0
        f0[i] = RATE / (lag + Math.max(-0.5, Math.min(0.5, shift)))
        break
      }
    }
  }
  return { f0, strength }
}
