/**
 * Classical analysis of a reference speaker for voice cloning (task `clone.analyze` uses it, and
 * so does the clone planner on base-preset audio, so both sides are measured alike).
 *
 * Input: 16 kHz mono float speech; optional speech segments (ms, from VAD) restrict the frames
 * used. Frames are FrameFeatures.ts's (25 ms, 10 ms hop). Measured:
 *  - F0 (Pitch.ts autocorrelation) over voiced frames, octave errors folded back: median in
 *    Hz, and the 5th / median / 95th percentiles in semitones re 100 Hz (range = p95 − p5).
 *  - Speaking rate: syllable nuclei per second of active speech, nuclei being prominent peaks
 *    (≥ 2 dB above the dips around them, ≥ 100 ms apart, within 25 dB of the loudest, voiced)
 *    of the smoothed 300–3000 Hz energy envelope; also words per second of VAD speech when a
 *    transcript is known. The nuclei rate is what synthesis matches: it is measured the same way
 *    on both voices, whatever the text.
 *  - Long-term average spectrum: 24 mel bands, 80–7000 Hz, of voiced frames, dB, mean removed.
 *  - Vocal-tract length: from the first four formants (peaks of an order-18 LPC envelope of
 *    voiced frames) fitted to a uniform tube closed at the glottis, F_i = (i − ½)·c / (2L):
 *    L = c / (2D), D the least-squares formant spacing, median over frames, c = 35 000 cm/s.
 *    Rough (±10 %) on real speech; a relative measure between two voices is what is used.
 */
import { levinson } from "../audio/Lpc.ts"
import { PowerSpectrum } from "../audio/Fft.ts"
import { frameCount, FRAME_SAMPLES, HOP_SAMPLES } from "../speaker/FrameFeatures.ts"
import { pitchTrack } from "../speaker/Pitch.ts"

export const ANALYSIS_RATE = 16000
export const LTAS24_BANDS = 24
export const LTAS_LOW_HZ = 80
export const LTAS_HIGH_HZ = 7000
const FFT = 512
const SOUND_CM_PER_S = 35000
const LPC_ORDER = 18

export interface VoiceProfile {
  readonly version: 1
  /** Speech measured by VAD (or by energy when no segments were given), ms. */
  readonly speechMs: number
  readonly f0: {
    readonly medianHz: number
    /** Semitones re 100 Hz. */
    readonly p5St: number
    readonly medianSt: number
    readonly p95St: number
    readonly voicedFraction: number
  } | null
  readonly rate: {
    readonly syllablesPerSecond: number
    readonly wordsPerSecond: number | null
  }
  /** dB per band, mean removed; band centres in `ltasCentresHz()`. */
  readonly ltasDb: ReadonlyArray<number>
  readonly vocalTract: {
    readonly lengthCm: number
    readonly formantSpacingHz: number
    /** Median F1..F4, Hz. */
    readonly formantsHz: ReadonlyArray<number>
  } | null
}

const mel = (hz: number) => 2595 * Math.log10(1 + hz / 700)
const hzOfMel = (m: number) => 700 * (10 ** (m / 2595) - 1)

/** Band edges (Hz) of the 24-band LTAS: 26 points, triangles between neighbours. */
const ltasEdgesHz = (): Array<number> => {
  const lo = mel(LTAS_LOW_HZ)
  const hi = mel(LTAS_HIGH_HZ)
  return Array.from({ length: LTAS24_BANDS + 2 }, (_, k) => hzOfMel(lo + ((hi - lo) * k) / (LTAS24_BANDS + 1)))
}

/** Centre frequency of each LTAS band, Hz. */
export const ltasCentresHz = (): Array<number> => ltasEdgesHz().slice(1, -1)

const hann = (n: number) => Float64Array.from({ length: n }, (_, i) => 0.5 - 0.5 * Math.cos((2 * Math.PI * i) / (n - 1)))

const percentile = (sorted: ReadonlyArray<number>, p: number): number => {
  if (sorted.length === 0) return NaN
  const at = (sorted.length - 1) * p
  const lo = Math.floor(at)
  const hi = Math.ceil(at)
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (at - lo)
}

const median = (values: ReadonlyArray<number>) => percentile([...values].sort((a, b) => a - b), 0.5)


export interface AnalysisOptions {
  /** Speech segments, ms; frames outside them are ignored. */
  readonly segments?: ReadonlyArray<{ readonly startMs: number; readonly endMs: number }>
  /** Words in the transcript, for words per second. */
  readonly wordCount?: number
}

/** Per-frame quantities shared by the measures (exported for the planner and tests). */
export interface FrameTrack {
  readonly frames: number
  readonly energyDb: Float64Array
  /** 300–3000 Hz energy, dB. */
  readonly midDb: Float64Array
  readonly f0: Float32Array
  /** Linear band powers, frame-major, LTAS24_BANDS wide. */
  readonly bands: Float64Array
  readonly inSpeech: Uint8Array
}

export const frameTrack = (pcm: Float32Array, options: AnalysisOptions = {}): FrameTrack => {
  const frames = frameCount(pcm.length)
  const window = hann(FRAME_SAMPLES)
  const fft = new PowerSpectrum(FFT)
  const frame = new Float64Array(FRAME_SAMPLES)
  const power = new Float64Array(fft.bins)
  const energyDb = new Float64Array(frames)
  const midDb = new Float64Array(frames)
  const bands = new Float64Array(frames * LTAS24_BANDS)
  const edges = ltasEdgesHz().map((hz) => (hz * FFT) / ANALYSIS_RATE)
  const binHz = ANALYSIS_RATE / FFT
  for (let i = 0; i < frames; i++) {
    const at = i * HOP_SAMPLES
    let sq = 0
    for (let n = 0; n < FRAME_SAMPLES; n++) {
      const s = pcm[at + n]!
      sq += s * s
      frame[n] = s * window[n]!
    }
    energyDb[i] = 10 * Math.log10(sq / FRAME_SAMPLES + 1e-12)
    fft.compute(frame, power)
    let mid = 0
    for (let k = Math.round(300 / binHz); k <= Math.round(3000 / binHz); k++) mid += power[k]!
    midDb[i] = 10 * Math.log10(mid + 1e-12)
    for (let b = 0; b < LTAS24_BANDS; b++) {
      const [l, c, r] = [edges[b]!, edges[b + 1]!, edges[b + 2]!]
      let acc = 0
      for (let k = Math.ceil(l); k <= Math.floor(r); k++) acc += power[k]! * (k <= c ? (k - l) / (c - l) : (r - k) / (r - c))
      bands[i * LTAS24_BANDS + b] = acc
    }
  }
  const inSpeech = new Uint8Array(frames)
  if (options.segments !== undefined) {
    for (const s of options.segments) {
      const from = Math.max(0, Math.floor(s.startMs / 10))
      const to = Math.min(frames, Math.ceil(s.endMs / 10))
      for (let i = from; i < to; i++) inSpeech[i] = 1
    }
  } else {
    let loudest = -Infinity
    for (let i = 0; i < frames; i++) loudest = Math.max(loudest, energyDb[i]!)
    for (let i = 0; i < frames; i++) inSpeech[i] = energyDb[i]! > Math.max(-70, loudest - 40) ? 1 : 0
  }
  return { frames, energyDb, midDb, f0: pitchTrack(pcm, frames).f0, bands, inSpeech }
}

/** Frames within 35 dB of the loudest speech frame, with gaps under 300 ms bridged, ms. */
const activeMs = (t: FrameTrack): number => {
  let loudest = -Infinity
  for (let i = 0; i < t.frames; i++) if (t.inSpeech[i]) loudest = Math.max(loudest, t.energyDb[i]!)
  let count = 0
  let lastActive = -Infinity
  for (let i = 0; i < t.frames; i++) {
    if (t.inSpeech[i] && t.energyDb[i]! > loudest - 35) {
      count += i - lastActive <= 30 ? i - lastActive : 1
      lastActive = i
    }
  }
  return count * 10
}

/** Syllable nuclei (frame indices) of the track. */
export const syllableNuclei = (t: FrameTrack): Array<number> => {
  const n = t.frames
  const smooth = new Float64Array(n)
  for (let i = 0; i < n; i++) {
    let s = 0
    let c = 0
    for (let j = Math.max(0, i - 2); j <= Math.min(n - 1, i + 2); j++) {
      s += t.midDb[j]!
      c++
    }
    smooth[i] = s / c
  }
  let loudest = -Infinity
  for (let i = 0; i < n; i++) if (t.inSpeech[i]) loudest = Math.max(loudest, smooth[i]!)
  const peaks: Array<number> = []
  for (let i = 1; i < n - 1; i++) {
    if (!t.inSpeech[i] || smooth[i]! < loudest - 25) continue
    if (!(smooth[i]! >= smooth[i - 1]! && smooth[i]! > smooth[i + 1]!)) continue
    let voiced = false
    for (let j = Math.max(0, i - 3); j <= Math.min(n - 1, i + 3); j++) if (t.f0[j]! > 0) voiced = true
    if (voiced) peaks.push(i)
  }
  // Prominence: the dip to the neighbouring peak must be ≥ 2 dB on the lower side; else keep
  // the higher of the two. Then at least 100 ms between nuclei.
  const kept: Array<number> = []
  for (const p of peaks) {
    const last = kept[kept.length - 1]
    if (last === undefined) {
      kept.push(p)
      continue
    }
    let dip = Infinity
    for (let j = last; j <= p; j++) dip = Math.min(dip, smooth[j]!)
    const lower = Math.min(smooth[last]!, smooth[p]!)
    if (lower - dip >= 2 && p - last >= 10) kept.push(p)
    else if (smooth[p]! > smooth[last]!) kept[kept.length - 1] = p
  }
  return kept
}

/** Formant estimates F1..F4 (Hz) of one frame, or undefined when four are not found. */
const frameFormants = (pcm: Float32Array, at: number, window: Float64Array, fft: PowerSpectrum, power: Float64Array): Array<number> | undefined => {
  const x = new Float64Array(FRAME_SAMPLES)
  for (let n = 0; n < FRAME_SAMPLES; n++) x[n] = (pcm[at + n]! - 0.97 * (at + n > 0 ? pcm[at + n - 1]! : 0)) * window[n]!
  const r = new Float64Array(LPC_ORDER + 1)
  for (let k = 0; k <= LPC_ORDER; k++) {
    let acc = 0
    for (let n = k; n < FRAME_SAMPLES; n++) acc += x[n]! * x[n - k]!
    r[k] = acc
  }
  if (!(r[0]! > 1e-9)) return undefined
  r[0] = r[0]! * 1.0001 // white-noise correction keeps the recursion stable
  const a = levinson(r, LPC_ORDER)
  fft.compute(a, power)
  const binHz = ANALYSIS_RATE / FFT
  const out: Array<number> = []
  // Peaks of 1/|A|² are minima of |A|².
  for (let k = Math.ceil(200 / binHz); k < Math.floor(5000 / binHz) && out.length < 4; k++) {
    if (power[k]! < power[k - 1]! && power[k]! <= power[k + 1]!) {
      const [l, c, rr] = [Math.log(power[k - 1]!), Math.log(power[k]!), Math.log(power[k + 1]!)]
      const d = l - 2 * c + rr
      const shift = d > 0 ? (0.5 * (l - rr)) / d : 0
      out.push((k + Math.max(-0.5, Math.min(0.5, shift))) * binHz)
    }
  }
  return out.length === 4 ? out : undefined
}

/**
 * Autocorrelation pitch sometimes locks onto half the period: on espeak et+m1, 5–8 % of frames
 * read an octave high, which pushed the 95th percentile from −1 to +13 semitones and the range
 * ×3. A frame 9 or more semitones from the median is moved by whole octaves toward it and kept
 * if it lands within 5 semitones; otherwise it is dropped.
 */
const foldOctaveErrors = (semitones: ReadonlyArray<number>): Array<number> => {
  if (semitones.length === 0) return []
  const mid = median(semitones)
  const out: Array<number> = []
  for (const s of semitones) {
    if (Math.abs(s - mid) < 9) {
      out.push(s)
      continue
    }
    const folded = s - 12 * Math.round((s - mid) / 12)
    if (Math.abs(folded - mid) <= 5) out.push(folded)
  }
  return out
}

export const analyzeVoice = (pcm: Float32Array, options: AnalysisOptions = {}): VoiceProfile => {
  const t = frameTrack(pcm, options)
  const speechMs = options.segments !== undefined
    ? options.segments.reduce((ms, s) => ms + Math.max(0, s.endMs - s.startMs), 0)
    : activeMs(t)
  let loudest = -Infinity
  for (let i = 0; i < t.frames; i++) if (t.inSpeech[i]) loudest = Math.max(loudest, t.energyDb[i]!)
  const voiced: Array<number> = []
  for (let i = 0; i < t.frames; i++) if (t.inSpeech[i] && t.f0[i]! > 0 && t.energyDb[i]! > loudest - 35) voiced.push(i)
  let speechFrames = 0
  for (let i = 0; i < t.frames; i++) speechFrames += t.inSpeech[i]!

  const st = foldOctaveErrors(voiced.map((i) => 12 * Math.log2(t.f0[i]! / 100))).sort((a, b) => a - b)
  const f0 = st.length >= 10
    ? {
      medianHz: 100 * 2 ** (percentile(st, 0.5) / 12),
      p5St: percentile(st, 0.05),
      medianSt: percentile(st, 0.5),
      p95St: percentile(st, 0.95),
      voicedFraction: voiced.length / Math.max(1, speechFrames)
    }
    : null

  const nuclei = syllableNuclei(t)
  const active = activeMs(t)
  const rate = {
    syllablesPerSecond: active > 0 ? nuclei.length / (active / 1000) : 0,
    wordsPerSecond: options.wordCount !== undefined && speechMs > 0 ? options.wordCount / (speechMs / 1000) : null
  }

  // LTAS of voiced frames (all speech frames when too few are voiced).
  const ltasFrames = voiced.length >= 10 ? voiced : Array.from({ length: t.frames }, (_, i) => i).filter((i) => t.inSpeech[i])
  const ltas = new Float64Array(LTAS24_BANDS)
  for (const i of ltasFrames) for (let b = 0; b < LTAS24_BANDS; b++) ltas[b] = ltas[b]! + t.bands[i * LTAS24_BANDS + b]!
  const ltasDb = Array.from(ltas, (p) => 10 * Math.log10(p / Math.max(1, ltasFrames.length) + 1e-12))
  const mean = ltasDb.reduce((s, v) => s + v, 0) / LTAS24_BANDS
  for (let b = 0; b < LTAS24_BANDS; b++) ltasDb[b] = ltasDb[b]! - mean

  // Vocal tract from the louder voiced frames (vowels).
  const window = hann(FRAME_SAMPLES)
  const fft = new PowerSpectrum(FFT)
  const power = new Float64Array(fft.bins)
  const spacing: Array<number> = []
  const perFormant: Array<Array<number>> = [[], [], [], []]
  for (const i of voiced) {
    if (t.energyDb[i]! < loudest - 20) continue
    const f = frameFormants(pcm, i * HOP_SAMPLES, window, fft, power)
    if (f === undefined) continue
    let num = 0
    let den = 0
    f.forEach((hz, k) => {
      num += hz * (k + 0.5)
      den += (k + 0.5) ** 2
      perFormant[k]!.push(hz)
    })
    spacing.push(num / den)
  }
  const d = spacing.length >= 10 ? median(spacing) : NaN
  const vocalTract = Number.isFinite(d)
    ? { lengthCm: SOUND_CM_PER_S / (2 * d), formantSpacingHz: d, formantsHz: perFormant.map(median) }
    : null

  return { version: 1, speechMs, f0, rate, ltasDb, vocalTract }
}
