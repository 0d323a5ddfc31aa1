/**
 * Pitch analysis and TD-PSOLA for the expressive renderer and the classical clone (worker side):
 * an F0 track (normalised autocorrelation per 10 ms frame, parabolic peak, median-smoothed),
 * pitch marks on the glottal pulses, and time-domain pitch-synchronous overlap-add that moves F0
 * by any per-sample function while keeping duration. `sing` builds on it (see Expressive.ts).
 */
import type { WordTiming } from "./TtsEngine.ts"

const clamp = (x: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, x))

// ---------------------------------------------------------------------------------------------
// Pitch analysis

export interface PitchTrack {
  /** Samples (at the analysed rate) between frames; frame i is centred on sample i·hop. */
  readonly hop: number
  /** Hz per frame; 0 = unvoiced or silent. */
  readonly f0: Float64Array
  /** Peak normalised autocorrelation per frame (0 for silent frames): a harmonicity measure. */
  readonly clarity: Float64Array
}

/**
 * F0 by normalised cross-correlation (NCCF) over 30 ms windows every 10 ms, on a copy decimated
 * to ~8–11 kHz (box filter) to keep it cheap. Voiced when the NCCF peak is ≥ 0.5 and the frame is
 * within 40 dB of the loudest; the shortest lag whose peak reaches 85 % of the best is taken
 * (octave-down errors), refined by parabolic interpolation; then a 3-frame median and removal of
 * single voiced frames.
 */
export const estimateF0 = (x: Float32Array, sr: number, minHz = 60, maxHz = 500): PitchTrack => {
  const d = sr >= 16000 ? Math.floor(sr / 8000) : 1
  const n = Math.floor(x.length / d)
  const y = new Float64Array(n)
  for (let i = 0; i < n; i++) {
    let s = 0
    for (let k = 0; k < d; k++) s += x[i * d + k]!
    y[i] = s / d
  }
  const rs = sr / d
  const hop = Math.round(0.01 * sr)
  const frames = Math.max(0, Math.floor(x.length / hop) + 1)
  const w = Math.round(0.03 * rs)
  const minLag = Math.max(2, Math.floor(rs / maxHz))
  const maxLag = Math.ceil(rs / minHz)
  const energy = new Float64Array(frames)
  const starts = new Int32Array(frames)
  let loudest = 0
  for (let i = 0; i < frames; i++) {
    const s = Math.round((i * hop) / d - w / 2)
    starts[i] = s
    if (s < 0 || s + w + maxLag + 1 > n) continue
    let e = 0
    for (let k = 0; k < w; k++) e += y[s + k]! * y[s + k]!
    energy[i] = e
    if (e > loudest) loudest = e
  }
  const f0 = new Float64Array(frames)
  const clarity = new Float64Array(frames)
  const r = new Float64Array(maxLag + 2)
  for (let i = 0; i < frames; i++) {
    const e0 = energy[i]!
    if (e0 <= 0 || e0 < loudest * 1e-4 || e0 / w < 1e-8) continue
    const s = starts[i]!
    let eL = 0
    for (let k = 0; k < w; k++) eL += y[s + minLag + k]! * y[s + minLag + k]!
    let best = 0
    for (let lag = minLag; lag <= maxLag + 1; lag++) {
      let num = 0
      for (let k = 0; k < w; k++) num += y[s + k]! * y[s + lag + k]!
      r[lag] = eL > 0 ? num / Math.sqrt(e0 * eL) : 0
      if (lag <= maxLag && r[lag]! > best) best = r[lag]!
      eL += y[s + lag + w]! * y[s + lag + w]! - y[s + lag]! * y[s + lag]!
    }
    clarity[i] = Math.max(0, best)
    if (best < 0.5) continue
    let pick = -1
    for (let lag = minLag + 1; lag <= maxLag; lag++) {
      if (r[lag]! >= 0.85 * best && r[lag]! >= r[lag - 1]! && r[lag]! >= r[lag + 1]!) {
        pick = lag
        break
      }
    }
    if (pick < 0) continue
    const a = r[pick - 1]!
    const b = r[pick]!
    const c = r[pick + 1]!
    const den = a - 2 * b + c
    const delta = den < 0 ? clamp((0.5 * (a - c)) / den, -0.5, 0.5) : 0
    f0[i] = rs / (pick + delta)
  }
  // 3-frame median over voiced neighbours, then drop isolated voiced frames.
  const smooth = new Float64Array(frames)
  for (let i = 0; i < frames; i++) {
    if (f0[i] === 0) continue
    const v = [f0[i - 1] ?? 0, f0[i]!, f0[i + 1] ?? 0].filter((z) => z > 0).sort((p, q) => p - q)
    const isolated = (f0[i - 1] ?? 0) === 0 && (f0[i + 1] ?? 0) === 0
    smooth[i] = isolated ? 0 : v[Math.floor(v.length / 2)]!
  }
  return { hop, f0: smooth, clarity }
}

export const median = (values: ReadonlyArray<number>): number => {
  if (values.length === 0) return 0
  const s = [...values].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)]!
}

export const voicedValues = (track: PitchTrack) => Array.from(track.f0).filter((f) => f > 0)

// ---------------------------------------------------------------------------------------------
// TD-PSOLA

interface Mark {
  readonly pos: number
  readonly voiced: boolean
}

export interface PsolaResult {
  readonly samples: Float32Array
  /** Input sample position → output sample position (piecewise linear, monotonic). */
  readonly timeMap: (inputSample: number) => number
}

const f0AtSample = (track: PitchTrack, t: number) => track.f0[clamp(Math.round(t / track.hop), 0, track.f0.length - 1)] ?? 0

/**
 * Pitch marks: in voiced stretches one mark per period at the largest (low-passed) sample near
 * where the previous period predicts it; elsewhere a mark every 8 ms.
 */
const pitchMarks = (x: Float32Array, sr: number, track: PitchTrack): Array<Mark> => {
  const n = x.length
  // One-pole low-pass (~900 Hz) so marks follow the glottal pulses, not formant ripple.
  const xl = new Float32Array(n)
  const k = 1 - Math.exp((-2 * Math.PI * 900) / sr)
  let acc = 0
  for (let i = 0; i < n; i++) xl[i] = acc += k * (x[i]! - acc)
  const unvoicedStep = Math.max(1, Math.round(0.008 * sr))
  const marks: Array<Mark> = []
  let t = 0
  let last: number | undefined
  while (t < n) {
    const f = f0AtSample(track, t)
    if (f > 0) {
      const period = sr / f
      const lo = Math.max(marks.length > 0 ? marks[marks.length - 1]!.pos + 1 : 0, Math.round(last !== undefined ? Math.max(last + 0.7 * period, t - 0.3 * period) : t))
      if (lo > n - 1) break
      let hi = Math.min(n - 1, Math.round(last !== undefined ? t + 0.3 * period : t + period))
      // A jump of more than ~2.5× in F0 (an octave error of the tracker) leaves no window: search
      // the next period as at a voicing onset.
      if (hi < lo) hi = Math.min(n - 1, lo + Math.round(period))
      let m = lo
      for (let i = lo + 1; i <= hi; i++) if (xl[i]! > xl[m]!) m = i
      marks.push({ pos: m, voiced: true })
      last = m
      t = m + period
    } else {
      const pos = Math.round(t)
      if (marks.length === 0 || pos > marks[marks.length - 1]!.pos) marks.push({ pos, voiced: false })
      last = undefined
      t += unvoicedStep
    }
  }
  return marks
}

/**
 * Time-domain pitch-synchronous overlap-add. Grains are two-sided Hann windows spanning from the
 * previous to the next analysis mark (so an unmodified run reconstructs the input exactly),
 * capped at two periods. For each synthesis mark the nearest analysis mark's grain is placed;
 * synthesis marks are spaced by the analysis spacing × (source F0 / target F0) in voiced
 * stretches, and the analysis clock advances by that spacing / stretch, so `stretch` > 1
 * lengthens (grains repeat) and target F0 ≠ source F0 moves the pitch.
 *
 * @param target Hz wanted at analysis sample `ta` / output sample `ts`, given the source F0 there.
 * @param stretch time-scale factor at analysis sample `ta` (1 = unchanged).
 */
const psola = (
  x: Float32Array,
  sr: number,
  track: PitchTrack,
  target: (f0: number, ta: number, ts: number) => number,
  stretch: (ta: number) => number
): PsolaResult => {
  const n = x.length
  const marks = pitchMarks(x, sr, track)
  if (marks.length < 2) return { samples: x.slice(), timeMap: (t) => t }
  const unvoicedStep = Math.max(1, Math.round(0.008 * sr))
  const halfLeft = new Int32Array(marks.length)
  const halfRight = new Int32Array(marks.length)
  marks.forEach((m, i) => {
    const f = f0AtSample(track, m.pos)
    const cap = m.voiced && f > 0 ? Math.round((2 * sr) / f) : 2 * unvoicedStep
    const left = i > 0 ? m.pos - marks[i - 1]!.pos : (marks[1]!.pos - m.pos)
    const right = i + 1 < marks.length ? marks[i + 1]!.pos - m.pos : left
    halfLeft[i] = Math.max(1, Math.min(cap, left))
    halfRight[i] = Math.max(1, Math.min(cap, right))
  })
  let out = new Float32Array(Math.ceil(n * 1.6) + 1024)
  const ensure = (size: number) => {
    if (size <= out.length) return
    const bigger = new Float32Array(Math.max(size, out.length * 2))
    bigger.set(out)
    out = bigger
  }
  const mapIn: Array<number> = [0]
  const mapOut: Array<number> = [0]
  let ta = marks[0]!.pos
  let ts = marks[0]!.pos
  let k = 0
  // Samples before the first mark are copied as they are (the first grain's left half fades in).
  ensure(ts + 1)
  out.set(x.subarray(0, Math.max(0, ts - halfLeft[0]!)))
  let end = 0
  while (ta < n) {
    while (k + 1 < marks.length && Math.abs(marks[k + 1]!.pos - ta) <= Math.abs(marks[k]!.pos - ta)) k++
    const m = marks[k]!
    const spacing = k + 1 < marks.length ? marks[k + 1]!.pos - m.pos : halfLeft[k]!
    let step = spacing
    if (m.voiced) {
      const f = f0AtSample(track, m.pos)
      if (f > 0) step = spacing * (f / target(f, ta, ts))
    }
    step = Math.max(1, step)
    const centre = Math.round(ts)
    const L = halfLeft[k]!
    const R = halfRight[k]!
    ensure(centre + R + 1)
    for (let j = -L; j <= R; j++) {
      const src = m.pos + j
      const dst = centre + j
      if (src < 0 || src >= n || dst < 0) continue
      const w = j < 0 ? 0.5 + 0.5 * Math.cos((Math.PI * j) / L) : 0.5 + 0.5 * Math.cos((Math.PI * j) / R)
      out[dst]! += x[src]! * w
    }
    end = Math.max(end, centre + R + 1)
    mapIn.push(ta)
    mapOut.push(ts)
    ts += step
    ta += step / Math.max(0.1, stretch(ta))
  }
  mapIn.push(n)
  mapOut.push(Math.max(ts, mapOut[mapOut.length - 1]!))
  const samples = out.slice(0, Math.max(end, Math.round(ts)))
  const timeMap = (t: number): number => {
    if (t <= 0) return 0
    let lo = 0
    let hi = mapIn.length - 1
    if (t >= mapIn[hi]!) return mapOut[hi]! + (t - mapIn[hi]!)
    while (hi - lo > 1) {
      const mid = (lo + hi) >> 1
      if (mapIn[mid]! <= t) lo = mid
      else hi = mid
    }
    const span = mapIn[hi]! - mapIn[lo]!
    return span > 0 ? mapOut[lo]! + ((t - mapIn[lo]!) * (mapOut[hi]! - mapOut[lo]!)) / span : mapOut[lo]!
  }
  return { samples, timeMap }
}

/**
 * Scales pitch level by `factor` and log-F0 excursions around the mean by `range` (TD-PSOLA,
 * duration kept). Undefined when the input has too few voiced frames to act on.
 */
export const reshapePitch = (x: Float32Array, sr: number, range: number, factor: number): PsolaResult | undefined => {
  const track = estimateF0(x, sr)
  const voiced = voicedValues(track)
  if (voiced.length < 3) return undefined
  const mu = voiced.reduce((a, f) => a + Math.log(f), 0) / voiced.length
  return psola(x, sr, track, (f) => Math.exp(mu + range * (Math.log(f) - mu)) * factor, () => 1)
}

/** Arpeggio in semitones above the tonic: 1 3 5 8 6 5 3 2 of a major scale. */
const MELODY = [0, 4, 7, 12, 9, 7, 4, 2]
const SUSTAIN = 1.4
const VIBRATO_HZ = 5.5
const VIBRATO_CENTS = 30

/** Sings the part: see the module header. `pitch` moves the key (an emotion's pitch level). */
export const sing = (x: Float32Array, sr: number, words: ReadonlyArray<WordTiming>, pitch: number): PsolaResult | undefined => {
  const track = estimateF0(x, sr)
  const voiced = voicedValues(track)
  if (voiced.length < 3) return undefined
  // Tonic 5 semitones below the median, on the equal-tempered grid (A4 = 440 Hz).
  const semitone = Math.round(12 * Math.log2((median(voiced) * pitch) / 440)) - 5
  const tonic = 440 * 2 ** (semitone / 12)
  // Note per frame: the word sounding (or the last one begun), then 50 ms glides in log-F0.
  const frames = track.f0.length
  const note = new Float64Array(frames)
  let w = 0
  for (let i = 0; i < frames; i++) {
    const ms = (i * track.hop * 1000) / sr
    while (w + 1 < words.length && words[w + 1]!.startMs <= ms) w++
    note[i] = Math.log(tonic) + (Math.log(2) * MELODY[w % MELODY.length]!) / 12
  }
  const glide = new Float64Array(frames)
  for (let i = 0; i < frames; i++) {
    let s = 0
    let c = 0
    for (let j = i - 2; j <= i + 2; j++) {
      if (j >= 0 && j < frames) {
        s += note[j]!
        c++
      }
    }
    glide[i] = s / c
  }
  const vibrato = (VIBRATO_CENTS / 1200) * Math.log(2)
  return psola(
    x,
    sr,
    track,
    (_f, ta, ts) => Math.exp(glide[clamp(Math.round(ta / track.hop), 0, frames - 1)]! + vibrato * Math.sin((2 * Math.PI * VIBRATO_HZ * ts) / sr)),
    (ta) => (f0AtSample(track, ta) > 0 ? SUSTAIN : 1)
  )
}

