/**
 * Default speaker embedding: statistics of classical short-time features, standardised with
 * fixed constants and L2-normalised. Honest about what it is: it tells apart voices that differ
 * in pitch, vocal-tract length and timbre, and was measured on synthetic voices only (cosine
 * between sentences of one voice 0.86–0.97; between two Flite men 0.60–0.73, between a man and a
 * woman below 0.3). It does not tell apart two similar speakers, and it moves with the channel
 * (microphone, codec, noise) as much as with the voice: calibrate again before trusting its
 * numbers on real recordings.
 *
 * From 16 kHz audio (FrameFeatures.ts: 25 ms frames, 10 ms hop):
 *  1. Frame selection: frames within `SELECT_RANGE_DB` of the loudest frame of the range and above
 *     `FLOOR_DBFS` are kept; pauses and breath noise are dropped. Relative, so gain-independent.
 *  2. Statistics over the kept frames (`RAW_LAYOUT`): mean and standard deviation of MFCC c1…c19,
 *     standard deviation of their deltas (the mean of a delta telescopes to ≈ 0 over an utterance
 *     and carries nothing but noise, so it is left out), log-energy relative to the loudest frame
 *     (mean, std) and its delta's std, F0 over voiced kept frames (mean and std of ln Hz, voiced
 *     fraction), and the long-term average spectrum's shape over voiced kept frames (ln of mean
 *     power in 10 mel-band groups, minus their mean).
 *  3. Per-dimension standardisation (x − mean) / std, times a weight, with constants from
 *     MfccCalibration.ts (derived from synthetic voices by calibrateMfcc.ts): the scale of a
 *     statistic (dB, ln Hz, cepstral units) no longer matters, and the weight (Fisher ratio of
 *     the calibration voices, clipped to [0.5, 2] × the median) favours what differs between
 *     voices over what follows the text, without letting one dimension decide; a statistic
 *     that cannot be measured (no voiced frame, one frame only) becomes 0, the average voice.
 *  4. L2 normalisation (SpeakerEmbedding.ts).
 *
 * Windows shorter than ~1 s give noisy statistics; 1.5 s is the diarization window. Cost: about
 * 7 ms of one core per second of audio (FFT and mel ≈ 2, pitch ≈ 5), computed once however many
 * overlapping windows cover it.
 */
import {
  CEPSTRA,
  FRAME_SAMPLES,
  frameCount,
  frameFeatures,
  HOP_SAMPLES,
  LTAS_BANDS,
  type FrameFeatures
} from "./FrameFeatures.ts"
import { MFCC_CALIBRATION } from "./MfccCalibration.ts"
import { EMBEDDING_SAMPLE_RATE, makeSpeakerEmbedding, type EmbeddingWindow, type SpeakerEmbedding } from "./SpeakerEmbedding.ts"

export const SELECT_RANGE_DB = 30
export const FLOOR_DBFS = -90
/** Fewer voiced frames than this (30 ms) and the spectrum is taken over all kept frames. */
const MIN_VOICED_FOR_LTAS = 3

/** Offsets of each group of statistics in the raw vector. */
export const RAW_LAYOUT = {
  mfccMean: { at: 0, size: CEPSTRA },
  mfccStd: { at: CEPSTRA, size: CEPSTRA },
  deltaStd: { at: 2 * CEPSTRA, size: CEPSTRA },
  energy: { at: 3 * CEPSTRA, size: 3 },
  pitch: { at: 3 * CEPSTRA + 3, size: 3 },
  ltas: { at: 3 * CEPSTRA + 6, size: LTAS_BANDS }
} as const
export type StatGroup = keyof typeof RAW_LAYOUT
export const RAW_DIMENSION = 3 * CEPSTRA + 6 + LTAS_BANDS

/**
 * Raw (unstandardised) statistics of frames [from, to) of `f`; NaN marks a statistic that cannot
 * be measured. Returns undefined when no frame is kept (silence or nothing in range).
 */
export const rawStatistics = (f: FrameFeatures, from: number, to: number): Float64Array | undefined => {
  from = Math.max(0, from)
  to = Math.min(f.frames, to)
  let loudest = -Infinity
  for (let i = from; i < to; i++) loudest = Math.max(loudest, f.energyDb[i]!)
  const threshold = Math.max(FLOOR_DBFS, loudest - SELECT_RANGE_DB)
  const kept: Array<number> = []
  for (let i = from; i < to; i++) if (f.energyDb[i]! >= threshold) kept.push(i)
  if (kept.length === 0) return undefined
  const out = new Float64Array(RAW_DIMENSION)
  const meanStd = (value: (i: number) => number, frames: ReadonlyArray<number>, meanAt: number | undefined, stdAt: number | undefined) => {
    let sum = 0
    for (const i of frames) sum += value(i)
    const mean = frames.length > 0 ? sum / frames.length : NaN
    let sq = 0
    for (const i of frames) sq += (value(i) - mean) ** 2
    if (meanAt !== undefined) out[meanAt] = mean
    if (stdAt !== undefined) out[stdAt] = frames.length > 1 ? Math.sqrt(sq / (frames.length - 1)) : NaN
  }
  const L = RAW_LAYOUT
  for (let q = 0; q < CEPSTRA; q++) {
    meanStd((i) => f.mfcc[i * CEPSTRA + q]!, kept, L.mfccMean.at + q, L.mfccStd.at + q)
    meanStd((i) => f.delta[i * CEPSTRA + q]!, kept, undefined, L.deltaStd.at + q)
  }
  meanStd((i) => f.energyDb[i]! - loudest, kept, L.energy.at, L.energy.at + 1)
  meanStd((i) => energyDelta(f, i), kept, undefined, L.energy.at + 2)
  const voiced = kept.filter((i) => f.f0[i]! > 0)
  meanStd((i) => Math.log(f.f0[i]!), voiced, L.pitch.at, L.pitch.at + 1)
  out[L.pitch.at + 2] = voiced.length / kept.length
  // Spectrum of voiced frames only: vowels carry the timbre, fricatives mostly the text.
  const ltasFrames = voiced.length >= MIN_VOICED_FOR_LTAS ? voiced : kept
  const ltas = new Float64Array(LTAS_BANDS)
  for (const i of ltasFrames) for (let b = 0; b < LTAS_BANDS; b++) ltas[b] = ltas[b]! + f.bands[i * LTAS_BANDS + b]!
  let ltasMean = 0
  for (let b = 0; b < LTAS_BANDS; b++) {
    ltas[b] = Math.log(ltas[b]! / ltasFrames.length + 1e-10)
    ltasMean += ltas[b]! / LTAS_BANDS
  }
  for (let b = 0; b < LTAS_BANDS; b++) out[L.ltas.at + b] = ltas[b]! - ltasMean
  return out
}

/** Regression delta of frame energy (dB per frame), same ±2 span as the cepstral deltas. */
const energyDelta = (f: FrameFeatures, i: number): number => {
  const e = (k: number) => f.energyDb[Math.max(0, Math.min(f.frames - 1, k))]!
  return (e(i + 1) - e(i - 1) + 2 * (e(i + 2) - e(i - 2))) / 10
}

/** Standardised, weighted, not yet normalised. */
export const standardise = (raw: Float64Array): Float32Array => {
  const { mean, std, weight } = MFCC_CALIBRATION
  const out = new Float32Array(RAW_DIMENSION)
  for (let d = 0; d < RAW_DIMENSION; d++) {
    const z = (raw[d]! - mean[d]!) / std[d]!
    out[d] = Number.isFinite(z) ? z * weight[d]! : 0
  }
  return out
}

/** Frames lying wholly inside [startMs, endMs) of a buffer analysed from sample 0. */
export const framesOf = (w: EmbeddingWindow): { from: number; to: number } => {
  const start = Math.round((w.startMs * EMBEDDING_SAMPLE_RATE) / 1000)
  const end = Math.round((w.endMs * EMBEDDING_SAMPLE_RATE) / 1000)
  return { from: Math.ceil(start / HOP_SAMPLES), to: end < FRAME_SAMPLES ? 0 : Math.floor((end - FRAME_SAMPLES) / HOP_SAMPLES) + 1 }
}

const fromStatistics = (raw: Float64Array | undefined): Float32Array => (raw === undefined ? new Float32Array(RAW_DIMENSION) : standardise(raw))

export const MfccEmbedding: SpeakerEmbedding = makeSpeakerEmbedding({
  name: `mfcc-stats-v1/${MFCC_CALIBRATION.version}`,
  dimension: RAW_DIMENSION,
  embed: (pcm) => {
    const f = frameFeatures(pcm)
    return fromStatistics(rawStatistics(f, 0, frameCount(pcm.length)))
  },
  embedWindows: (pcm, windows) => {
    if (windows.length === 0) return []
    // Analyse only the span the windows cover, once.
    let first = Infinity
    let last = 0
    for (const w of windows) {
      const { from, to } = framesOf(w)
      if (to > from) {
        first = Math.min(first, from)
        last = Math.max(last, to)
      }
    }
    if (!(last > first)) return windows.map(() => new Float32Array(RAW_DIMENSION))
    const offset = first * HOP_SAMPLES
    const f = frameFeatures(pcm.subarray(offset, Math.min(pcm.length, (last - 1) * HOP_SAMPLES + FRAME_SAMPLES)))
    return windows.map((w) => {
      const { from, to } = framesOf(w)
      return fromStatistics(rawStatistics(f, from - first, to - first))
    })
  }
})
