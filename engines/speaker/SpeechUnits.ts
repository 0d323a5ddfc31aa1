/**
 * The diarizer's units: stretches of one speech segment between pauses, each with the Gaussian
 * statistics of its cepstra, for BIC clustering (BicClustering.ts). Worker side, pure.
 *
 * Why units and not fixed windows: people change turns at pauses, and the recogniser's VAD
 * segments (300 ms of silence to end, 250 ms of padding) run across the 150-700 ms gaps of a
 * conversation, so a fixed 1.5 s window often holds two speakers. A unit ends at a pause of
 * `PAUSE_FRAMES` (120 ms) or more, where a pause is a frame more than 35 dB below the segment's
 * loudest or less than 8 dB above its quietest 5 % (whichever is higher, so background noise
 * is not taken for speech; but at least 16 dB below the loudest); units are cut into equal parts of at most `MAX_UNIT_FRAMES` (3 s)
 * so that a turn change with no pause at all still falls near a unit edge.
 *
 * Features: 16 cepstra of 24 mel bands over 300-3400 Hz, the telephone band, whatever the input:
 * the same features for wideband and telephone audio, and nothing from bands a phone line never
 * carried (measured on bench/diarization: wideband cepstra merged two speakers on telephone
 * audio and split one on wideband). Only frames within 30 dB of a unit's loudest count.
 */
import { HOP_MS, melCepstra, type MelSpec } from "./FrameFeatures.ts"

export const UNIT_MEL: MelSpec = { lowHz: 300, highHz: 3400, bands: 24, cepstra: 16 }
export const UNIT_DIMENSION = UNIT_MEL.cepstra
/** Per unit: count, sum (d), upper triangle of the sum of outer products (d(d+1)/2). */
export const STATS_WIDTH = 1 + UNIT_DIMENSION + (UNIT_DIMENSION * (UNIT_DIMENSION + 1)) / 2

const PAUSE_FRAMES = 12
const MIN_UNIT_FRAMES = 30
const MAX_UNIT_FRAMES = 300
const PAD_FRAMES = 3
const RANGE_DB = 35
const NOISE_MARGIN_DB = 8
const KEEP_DB = 30

export interface SpeechUnit {
  /** ms from the start of the buffer. */
  readonly startMs: number
  readonly endMs: number
}

/** Units of frames [from, to) of one segment, by its frame energies; frame indexes. */
const splitAtPauses = (energyDb: Float32Array, from: number, to: number): Array<[number, number]> => {
  if (to - from < MIN_UNIT_FRAMES) return to > from ? [[from, to]] : []
  const sorted = Array.from(energyDb.subarray(from, to)).sort((a, b) => a - b)
  const loudest = sorted[sorted.length - 1]!
  // Over the noise floor, but never so close to the loudest that steady speech reads as pause
  // (a segment with no pause has its quietest 5 % at speech level).
  const threshold = Math.max(loudest - RANGE_DB, Math.min(sorted[Math.floor(0.05 * (sorted.length - 1))]! + NOISE_MARGIN_DB, loudest - 2 * NOISE_MARGIN_DB))
  const runs: Array<[number, number]> = []
  let start = -1
  let quiet = 0
  for (let i = from; i <= to; i++) {
    const loud = i < to && energyDb[i]! >= threshold
    if (loud) {
      if (start < 0) start = i
      quiet = 0
    } else if (start >= 0) {
      quiet++
      if (quiet >= PAUSE_FRAMES || i === to) {
        runs.push([Math.max(from, start - PAD_FRAMES), Math.min(to, i - quiet + 1 + PAD_FRAMES)])
        start = -1
        quiet = 0
      }
    }
  }
  const long = runs.filter(([a, b]) => b - a >= MIN_UNIT_FRAMES)
  // All pauses and clicks: the segment as one unit rather than nothing.
  return (long.length > 0 ? long : [[from, to] as [number, number]]).flatMap(([a, b]) => {
    const parts = Math.ceil((b - a) / MAX_UNIT_FRAMES)
    return Array.from({ length: parts }, (_, k): [number, number] => [a + Math.round(((b - a) * k) / parts), a + Math.round(((b - a) * (k + 1)) / parts)])
  })
}

/**
 * Units of the speech `segments` (ms from the buffer's start) of 16 kHz `pcm`, and their
 * statistics (units × STATS_WIDTH, row-major). A unit with fewer kept frames than the dimension
 * cannot have a covariance; it still gets its row (count and all), BicClustering sets it aside.
 */
export const speechUnits = (pcm: Float32Array, segments: ReadonlyArray<SpeechUnit>): { readonly units: Array<SpeechUnit>; readonly stats: Float64Array } => {
  const { frames, cepstra, energyDb } = melCepstra(pcm, UNIT_MEL)
  const d = UNIT_DIMENSION
  const ranges: Array<[number, number]> = []
  for (const s of segments) {
    const from = Math.max(0, Math.floor(s.startMs / HOP_MS))
    const to = Math.min(frames, Math.ceil(s.endMs / HOP_MS))
    ranges.push(...splitAtPauses(energyDb, from, to))
  }
  const stats = new Float64Array(ranges.length * STATS_WIDTH)
  ranges.forEach(([from, to], u) => {
    let loudest = -Infinity
    for (let i = from; i < to; i++) loudest = Math.max(loudest, energyDb[i]!)
    const row = u * STATS_WIDTH
    for (let i = from; i < to; i++) {
      if (energyDb[i]! < loudest - KEEP_DB) continue
      stats[row]! += 1
      const x = i * d
      let k = row + 1 + d
      for (let p = 0; p < d; p++) {
        const xp = cepstra[x + p]!
        stats[row + 1 + p]! += xp
        for (let q = p; q < d; q++) stats[k++]! += xp * cepstra[x + q]!
      }
    }
  })
  return { units: ranges.map(([from, to]) => ({ startMs: from * HOP_MS, endMs: to * HOP_MS })), stats }
}
