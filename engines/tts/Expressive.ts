/**
 * Expressive rendering (worker side): turns parsed expressive parts (ExpressiveTags.ts) into audio
 * with the ordinary engines plus classical DSP. Nothing here is a neural or emotional model; every
 * tag is an approximation by prosody and signal processing:
 *
 *  - Emotions: pitch level, pitch range, rate and level per emotion (EMOTION_PROSODY). Rate goes
 *    through `EngineVoice.rate` (every engine honours it). Pitch level and range: TD-PSOLA on the
 *    engine's output for every engine, scaling F0 by the level factor and log-F0 excursions
 *    around the part's mean by the range factor, duration kept. espeak's own pitch parameter is
 *    not used for this: measured on en-us+m3 its effect is compressed (base pitch 50 → 70, asked
 *    ×1.4, gives ×1.23 in F0) and voice-dependent, while PSOLA gives the factor asked for; Flite
 *    refuses any pitch setting. Level: RMS relative to the neutral rendering of the same text,
 *    then the soft limiter.
 *  - [sosin] whisper: espeak uses its own whisper variant in the same language (`+whisper`, or
 *    `+whisperf` for female `+f…` voices). Flite/Piper: the voice is re-synthesised by
 *    noise-excited LPC (per 25 ms frame: LPC envelope of the pre-emphasised speech, white noise
 *    through it, energy matched, overlap-added), so formants and timing stay and the voicing goes.
 *  - [huue] holler: higher pitch, slightly slower, a pre-emphasis tilt (vocal effort) and +7 dB,
 *    held under full scale by a tanh soft limiter (no sample reaches full scale).
 *  - [laul] singing: slower rate; voiced stretches lengthened 1.4× (sustained vowels); each word
 *    sung on one note of a fixed arpeggio (tonic, 3rd, 5th, octave, 6th, 5th, 3rd, 2nd of a major
 *    scale) around the voice's median F0 snapped to the equal-tempered semitone, with 50 ms
 *    glides between notes and a 5.5 Hz ±30 cent vibrato; all by TD-PSOLA.
 *  - [naer] chuckle: four voiced "ha" bursts made from scratch: a Rosenberg glottal pulse train
 *    (F0 1.3× the voice's median, falling) plus breath noise through an /a/ formant cascade, with
 *    an aspirated onset and a decaying envelope; 800 ms in all (CHUCKLE_MS).
 *  - [ohe] exhale: seeded white noise through two broad resonances (500 and 1500 Hz) under a
 *    rise-and-fade envelope; 500 ms in all (EXHALE_MS).
 *
 * Parts are concatenated with 10 ms raised-cosine crossfades. Speech parts get their edges
 * normalised (30 ms before, 150 ms after the sound) so joined parts and streamed segments keep
 * a phrase pause. Effects keep their designed length and ignore the request's speed. Output is
 * deterministic: the engines are, and all noise comes from a seeded PRNG (seed from the part's
 * offset).
 */
import { mulberry32 } from "../audio/Prng.ts"
import { levinson } from "../audio/Lpc.ts"
import { rms } from "../audio/Pcm.ts"
import type { Effect, Emotion, ExpressivePart, SpeechPart, Style } from "./ExpressiveTags.ts"
import { type EngineVoice, type TtsEngine, TtsError, type TtsResult, type WordTiming } from "./TtsEngine.ts"
import { languageInfo } from "./Voices.ts"

/** How a tag moves the voice. All relative: 1 (or 0 dB) leaves the voice as it is. */
export interface Prosody {
  /** Multiplier of the pitch level. */
  readonly pitch: number
  /** Multiplier of log-F0 excursions around the part's mean (1 = unchanged, < 1 flatter). */
  readonly range: number
  /** Multiplier of the speaking rate (> 1 faster). */
  readonly rate: number
  /** Level relative to the neutral rendering's RMS, dB. */
  readonly gainDb: number
}

export const EMOTION_PROSODY: Readonly<Record<Emotion, Prosody>> = {
  raev: { pitch: 1.12, range: 1.5, rate: 1.15, gainDb: 5 }, // fury: faster, louder, higher, wider
  aukartus: { pitch: 1.1, range: 1.4, rate: 0.88, gainDb: -1 }, // wonder: higher, wide, slower
  rahulolu: { pitch: 0.96, range: 0.7, rate: 0.88, gainDb: -3 }, // serenity: calm, flat, soft
  sihikindlus: { pitch: 0.93, range: 0.8, rate: 0.95, gainDb: 2 }, // resolve: lower, steady, firm
  kurbus: { pitch: 0.88, range: 0.6, rate: 0.78, gainDb: -6 }, // sorrow: slower, lower, softer
  ehmatus: { pitch: 1.22, range: 1.7, rate: 1.1, gainDb: 3 } // astonishment: high, very wide
}

export const STYLE_PROSODY: Readonly<Record<Style, Prosody>> = {
  huue: { pitch: 1.15, range: 1.1, rate: 0.93, gainDb: 7 },
  sosin: { pitch: 1, range: 1, rate: 0.95, gainDb: -5 },
  laul: { pitch: 1, range: 1, rate: 0.85, gainDb: 0 }
}

const NEUTRAL: Prosody = { pitch: 1, range: 1, rate: 1, gainDb: 0 }

/** Emotion and style combined: multipliers multiply, gains add. */
export const prosodyFor = (emotion: Emotion | undefined, style: Style | undefined): Prosody => {
  const e = emotion === undefined ? NEUTRAL : EMOTION_PROSODY[emotion]
  const s = style === undefined ? NEUTRAL : STYLE_PROSODY[style]
  return { pitch: e.pitch * s.pitch, range: e.range * s.range, rate: e.rate * s.rate, gainDb: e.gainDb + s.gainDb }
}

/** Designed lengths of the effects, ms (what the tests hold them to). */
export const CHUCKLE_MS = 800
export const EXHALE_MS = 500
const CROSSFADE_MS = 10
const LEAD_MS = 30
const TAIL_MS = 150
/** Soft limiter: transparent below THRESHOLD, never reaches CEILING (linear, full scale 1). */
const LIMIT_THRESHOLD = 0.8
const LIMIT_CEILING = 0.95

export interface ExpressiveRequest {
  /** Offsets relative to the text the returned word timings should refer to. */
  readonly parts: ReadonlyArray<ExpressivePart>
  readonly voice: EngineVoice
  /** 0.5 to 2; applies to speech parts, not to effects. */
  readonly speed: number
}

/** Renders the parts in order at the engine's rate for the voice. */
export const renderExpressive = async (engine: TtsEngine, request: ExpressiveRequest): Promise<TtsResult> => {
  if (request.parts.length === 0) throw new TtsError("InvalidRequest", "nothing to say: the text holds only tags")
  engine.checkVoice(request.voice)
  const sampleRate = engine.sampleRateFor(request.voice)
  const pieces: Array<{ samples: Float32Array; words: ReadonlyArray<WordTiming> }> = []
  for (const part of request.parts) {
    if (part.kind === "speech") {
      const piece = await renderSpeech(engine, part, request.voice, request.speed)
      if (piece.sampleRate !== sampleRate) throw new TtsError("EngineFailed", `engine returned ${piece.sampleRate} Hz, expected ${sampleRate} Hz`)
      pieces.push(piece)
    } else {
      const f0 = part.effect === "naer" ? await voiceF0(engine, request.voice) : 0
      pieces.push({ samples: renderEffect(part.effect, sampleRate, f0, seedFor(part.charStart)), words: [] })
    }
  }
  const { samples, offsets } = crossfadeConcat(pieces.map((p) => p.samples), Math.round((CROSSFADE_MS * sampleRate) / 1000))
  softLimit(samples)
  const durationMs = (samples.length * 1000) / sampleRate
  const words: Array<WordTiming> = []
  let previousEnd = 0
  pieces.forEach((p, i) => {
    const shift = (offsets[i]! * 1000) / sampleRate
    for (const w of p.words) {
      const startMs = Math.min(durationMs, Math.max(previousEnd, w.startMs + shift))
      const endMs = Math.min(durationMs, Math.max(startMs, w.endMs + shift))
      words.push({ ...w, startMs, endMs })
      previousEnd = endMs
    }
  })
  return { samples, sampleRate, words }
}

/** espeak variant with whisper phonation in the same language; female variants keep female formants. */
export const whisperVariant = (variant: string): string => {
  const [language, v] = variant.split("+")
  return `${language}+${v !== undefined && /^f\d*$/.test(v) ? "whisperf" : "whisper"}`
}

const clamp = (x: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, x))

const renderSpeech = async (engine: TtsEngine, part: SpeechPart, voice: EngineVoice, speed: number) => {
  const p = prosodyFor(part.emotion, part.style)
  const native = voice.engine === "espeak"
  const whisper = part.style === "sosin"
  const engineVoice: EngineVoice = {
    ...voice,
    rate: clamp(voice.rate * p.rate, 0.25, 2),
    variant: native && whisper ? whisperVariant(voice.variant) : voice.variant
  }
  const result = await engine.synthesize({ text: part.text, voice: engineVoice, speed })
  const sr = result.sampleRate
  let x = result.samples
  let words: Array<WordTiming> = result.words.map((w) => ({ ...w, charStart: w.charStart + part.charStart, charEnd: w.charEnd + part.charStart }))
  const reference = rms(x)
  if (!whisper) {
    let shaped: PsolaResult | undefined
    if (part.style === "laul") shaped = sing(x, sr, result.words, p.pitch)
    else if (Math.abs(p.range - 1) > 0.02 || Math.abs(p.pitch - 1) > 0.005) shaped = reshapePitch(x, sr, p.range, p.pitch)
    if (shaped !== undefined) {
      const map = shaped.timeMap
      x = shaped.samples
      words = words.map((w) => ({ ...w, startMs: (map(((w.startMs * sr) / 1000)) * 1000) / sr, endMs: (map((w.endMs * sr) / 1000) * 1000) / sr }))
    }
  } else if (!native) {
    x = lpcWhisper(x, sr, seedFor(part.charStart))
  }
  if (part.style === "huue") x = effortTilt(x)
  const level = rms(x)
  if (level > 0) scaleInPlace(x, (reference * 10 ** (p.gainDb / 20)) / level)
  const edged = normaliseEdges(x, sr)
  const shiftMs = (edged.shift * 1000) / sr
  const durationMs = (edged.samples.length * 1000) / sr
  words = words.map((w) => ({ ...w, startMs: clamp(w.startMs + shiftMs, 0, durationMs), endMs: clamp(w.endMs + shiftMs, 0, durationMs) }))
  return { samples: edged.samples, sampleRate: sr, words }
}

// ---------------------------------------------------------------------------------------------
// Small signal helpers

const scaleInPlace = (x: Float32Array, g: number) => {
  for (let i = 0; i < x.length; i++) x[i]! *= g
}

/**
 * tanh soft limiter, in place: |x| ≤ threshold passes unchanged; above it the excess is bent so
 * that |y| stays strictly below `ceiling`. Memoryless, so it adds a little distortion on peaks
 * rather than pumping.
 */
export const softLimit = (x: Float32Array, threshold = LIMIT_THRESHOLD, ceiling = LIMIT_CEILING): Float32Array => {
  const room = ceiling - threshold
  for (let i = 0; i < x.length; i++) {
    const v = x[i]!
    const a = Math.abs(v)
    if (a > threshold) x[i] = Math.sign(v) * (threshold + room * Math.tanh((a - threshold) / room))
  }
  return x
}

/** First-order pre-emphasis mixed in (more high-frequency energy, as with vocal effort). */
const effortTilt = (x: Float32Array): Float32Array => {
  const y = new Float32Array(x.length)
  let prev = 0
  for (let i = 0; i < x.length; i++) {
    y[i] = x[i]! + 0.8 * (x[i]! - 0.9 * prev)
    prev = x[i]!
  }
  return y
}

/** Trims the sound to LEAD_MS before and TAIL_MS after it; `shift` = samples added at the start (may be negative). */
const normaliseEdges = (x: Float32Array, sr: number): { samples: Float32Array; shift: number } => {
  const floor = 0.004 // ≈ -48 dBFS
  let first = 0
  while (first < x.length && Math.abs(x[first]!) < floor) first++
  if (first === x.length) return { samples: x, shift: 0 }
  let last = x.length - 1
  while (last > first && Math.abs(x[last]!) < floor) last--
  const lead = Math.round((LEAD_MS * sr) / 1000)
  const tail = Math.round((TAIL_MS * sr) / 1000)
  const out = new Float32Array(lead + (last + 1 - first) + tail)
  out.set(x.subarray(first, last + 1), lead)
  return { samples: out, shift: lead - first }
}

/** Joins pieces, overlapping each join by up to `fade` samples with raised-cosine fades. */
export const crossfadeConcat = (pieces: ReadonlyArray<Float32Array>, fade: number): { samples: Float32Array; offsets: Array<number> } => {
  const offsets: Array<number> = []
  const overlaps: Array<number> = []
  let length = 0
  pieces.forEach((p, i) => {
    const prev = pieces[i - 1]
    const overlap = prev === undefined ? 0 : Math.max(0, Math.min(fade, Math.floor(prev.length / 2), Math.floor(p.length / 2)))
    overlaps.push(overlap)
    offsets.push(length - overlap)
    length += p.length - overlap
  })
  const out = new Float32Array(length)
  pieces.forEach((p, i) => {
    const o = offsets[i]!
    const fadeIn = overlaps[i]!
    const fadeOut = overlaps[i + 1] ?? 0
    for (let j = 0; j < p.length; j++) {
      let g = 1
      if (j < fadeIn) g *= 0.5 - 0.5 * Math.cos((Math.PI * (j + 0.5)) / fadeIn)
      const k = p.length - 1 - j
      if (k < fadeOut) g *= 0.5 - 0.5 * Math.cos((Math.PI * (k + 0.5)) / fadeOut)
      out[o + j]! += p[j]! * g
    }
  })
  return { samples: out, offsets }
}


const seedFor = (charStart: number) => (Math.imul(charStart + 1, 0x9e3779b1) ^ 0x5eed) >>> 0

/** Roughly Gaussian noise (sum of three uniforms), unit variance. */
const gaussian = (rand: () => number) => (rand() + rand() + rand() - 1.5) * 2

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

const median = (values: ReadonlyArray<number>): number => {
  if (values.length === 0) return 0
  const s = [...values].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)]!
}

const voicedValues = (track: PitchTrack) => Array.from(track.f0).filter((f) => f > 0)

// The voice's own median F0 (Hz), measured once per thread from its language's sample sentence.
const voiceF0Cache = new Map<string, Promise<number>>()

const voiceF0 = (engine: TtsEngine, voice: EngineVoice): Promise<number> => {
  const key = `${voice.engine}:${voice.variant}:${voice.pitch}`
  let cached = voiceF0Cache.get(key)
  if (cached === undefined) {
    const text = voice.engine === "espeak" ? languageInfo(voice.language)?.sample ?? "Hello!" : "Hello! How are you today?"
    cached = engine.synthesize({ text, voice, speed: 1 }).then(
      (r) => median(voicedValues(estimateF0(r.samples, r.sampleRate))) || 150,
      () => 150
    )
    voiceF0Cache.set(key, cached)
  }
  return cached
}

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
const sing = (x: Float32Array, sr: number, words: ReadonlyArray<WordTiming>, pitch: number): PsolaResult | undefined => {
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

// ---------------------------------------------------------------------------------------------
// Whisper by noise-excited LPC


/**
 * Whisper: every 25 ms frame (50 % overlap, Hann) is replaced by seeded white noise filtered by
 * the all-pole envelope 1/A(z) of the pre-emphasised frame (so the glottal tilt is not put back:
 * whispers are brighter; bandwidths widened so no pole sits on one harmonic), scaled to the
 * frame's RMS, overlap-added, then high-passed at 300 Hz.
 */
export const lpcWhisper = (x: Float32Array, sr: number, seed: number): Float32Array => {
  const size = 2 * Math.round(0.0125 * sr)
  const hop = size / 2
  const order = Math.min(28, Math.round(sr / 1000) + 4)
  const win = new Float64Array(size)
  for (let i = 0; i < size; i++) win[i] = 0.5 - 0.5 * Math.cos((2 * Math.PI * i) / size)
  const pre = new Float64Array(x.length)
  for (let i = 0; i < x.length; i++) pre[i] = x[i]! - 0.9 * (x[i - 1] ?? 0)
  const out = new Float32Array(x.length)
  const rand = mulberry32(seed)
  const frame = new Float64Array(size)
  const r = new Float64Array(order + 1)
  const y = new Float64Array(size)
  for (let start = -hop; start < x.length; start += hop) {
    let wx2 = 0
    let wsum = 0
    for (let i = 0; i < size; i++) {
      const t = start + i
      const inside = t >= 0 && t < x.length
      frame[i] = inside ? pre[t]! * win[i]! : 0
      if (inside) {
        wx2 += win[i]! * x[t]! * x[t]!
        wsum += win[i]!
      }
    }
    const level = wsum > 0 ? Math.sqrt(wx2 / wsum) : 0
    // Draw the noise even for silent frames so later frames do not depend on earlier levels.
    for (let i = 0; i < size; i++) y[i] = gaussian(rand)
    if (level < 1e-5) continue
    for (let lag = 0; lag <= order; lag++) {
      let s = 0
      for (let i = lag; i < size; i++) s += frame[i]! * frame[i - lag]!
      r[lag] = s
    }
    r[0] = r[0]! * (1 + 1e-4) + 1e-12 // white-noise correction keeps the filter stable
    const a = levinson(r, order)
    // Bandwidth expansion (poles pulled in by 0.98^i): no sharp peaks on single harmonics.
    for (let j = 1, g = BANDWIDTH_GAMMA; j <= order; j++, g *= BANDWIDTH_GAMMA) a[j] = a[j]! * g
    let ey = 0
    for (let i = 0; i < size; i++) {
      let v = y[i]!
      for (let j = 1; j <= order && j <= i; j++) v -= a[j]! * y[i - j]!
      y[i] = v
      ey += win[i]! * v * v
    }
    const g = ey > 0 ? level / Math.sqrt(ey / wsum) : 0
    for (let i = 0; i < size; i++) {
      const t = start + i
      if (t >= 0 && t < x.length) out[t]! += y[i]! * g * win[i]!
    }
  }
  // Whispers carry almost nothing below a few hundred Hz (no glottal source).
  return highPass(out, sr, WHISPER_HIGHPASS_HZ)
}

const BANDWIDTH_GAMMA = 0.98
const WHISPER_HIGHPASS_HZ = 300

/** Second-order Butterworth high-pass (RBJ biquad), returns a new array. */
const highPass = (x: Float32Array, sr: number, hz: number): Float32Array => {
  const w = (2 * Math.PI * hz) / sr
  const alpha = Math.sin(w) / Math.SQRT2
  const cw = Math.cos(w)
  const a0 = 1 + alpha
  const b0 = (1 + cw) / 2 / a0
  const b1 = -(1 + cw) / a0
  const a1 = (-2 * cw) / a0
  const a2 = (1 - alpha) / a0
  const out = new Float32Array(x.length)
  let x1 = 0
  let x2 = 0
  let y1 = 0
  let y2 = 0
  for (let i = 0; i < x.length; i++) {
    const v = x[i]!
    const y = b0 * v + b1 * x1 + b0 * x2 - a1 * y1 - a2 * y2
    x2 = x1
    x1 = v
    y2 = y1
    y1 = y
    out[i] = y
  }
  return out
}

// ---------------------------------------------------------------------------------------------
// Effects

/** Two-pole resonator (Klatt): unity gain at DC, centre `hz`, bandwidth `bw` Hz. In place. */
const resonate = (x: Float64Array, sr: number, hz: number, bw: number) => {
  if (hz >= 0.45 * sr) return
  const c = -Math.exp((-2 * Math.PI * bw) / sr)
  const b = 2 * Math.exp((-Math.PI * bw) / sr) * Math.cos((2 * Math.PI * hz) / sr)
  const a = 1 - b - c
  let y1 = 0
  let y2 = 0
  for (let i = 0; i < x.length; i++) {
    const y = a * x[i]! + b * y1 + c * y2
    y2 = y1
    y1 = y
    x[i] = y
  }
}

const toFloat32Peak = (x: Float64Array, peakLevel: number): Float32Array => {
  let p = 0
  for (const v of x) p = Math.max(p, Math.abs(v))
  const out = new Float32Array(x.length)
  const g = p > 0 ? peakLevel / p : 0
  for (let i = 0; i < x.length; i++) out[i] = x[i]! * g
  return out
}

export const renderEffect = (effect: Effect, sr: number, voiceF0: number, seed: number): Float32Array =>
  effect === "naer" ? chuckle(sr, voiceF0, seed) : exhale(sr, seed)

const ms = (v: number, sr: number) => Math.round((v * sr) / 1000)

/**
 * Four "ha" bursts: 35 ms aspirated onset + 90 ms voiced vowel each, 70 ms apart, 30 ms lead and
 * 60 ms tail (CHUCKLE_MS = 800). Each burst is 20 % softer and 6 % lower than the one before.
 */
const chuckle = (sr: number, voiceF0: number, seed: number): Float32Array => {
  const rand = mulberry32(seed)
  const total = ms(CHUCKLE_MS, sr)
  const source = new Float64Array(total)
  const bursts = 4
  const onset = ms(35, sr)
  const vowel = ms(90, sr)
  const gap = ms(70, sr)
  let at = ms(30, sr)
  let phase = 0
  let prevPulse = 0
  for (let b = 0; b < bursts; b++) {
    const amp = 0.8 ** b
    const f0Start = voiceF0 * 1.3 * (1 - 0.06 * b)
    for (let i = 0; i < onset; i++) {
      // Aspiration: noise rising into the vowel.
      const env = Math.sin((0.5 * Math.PI * i) / onset)
      source[at + i] = 0.35 * amp * env * gaussian(rand)
    }
    at += onset
    const attack = ms(10, sr)
    const release = ms(45, sr)
    for (let i = 0; i < vowel; i++) {
      const f0 = f0Start * (1 - (0.1 * i) / vowel)
      phase = (phase + f0 / sr) % 1
      // Rosenberg pulse (open 40 %, closing 16 % of the period), differentiated for lip radiation.
      const pulse = phase < 0.4 ? 0.5 - 0.5 * Math.cos((Math.PI * phase) / 0.4) : phase < 0.56 ? Math.cos((Math.PI * (phase - 0.4)) / 0.32) : 0
      const voiced = (pulse - prevPulse) * 8
      prevPulse = pulse
      const env = i < attack ? i / attack : i > vowel - release ? Math.cos((0.5 * Math.PI * (i - (vowel - release))) / release) ** 2 : 1
      source[at + i] = amp * env * (voiced + 0.12 * gaussian(rand))
    }
    at += vowel + (b + 1 < bursts ? gap : 0)
  }
  // /a/ formants, raised a little for higher voices.
  const scale = voiceF0 > 165 ? 1.12 : 1
  for (const [hz, bw] of [[750, 90], [1150, 110], [2500, 160], [3500, 250]] as const) resonate(source, sr, hz * scale, bw)
  return toFloat32Peak(source, 0.5)
}

/** 90 ms rise, 370 ms fade, 40 ms silence (EXHALE_MS = 500); breath noise shaped at 500/1500 Hz. */
const exhale = (sr: number, seed: number): Float32Array => {
  const rand = mulberry32(seed)
  const total = ms(EXHALE_MS, sr)
  const rise = ms(90, sr)
  const fade = ms(370, sr)
  const x = new Float64Array(total)
  for (let i = 0; i < rise + fade && i < total; i++) {
    const env = i < rise ? 0.5 - 0.5 * Math.cos((Math.PI * i) / rise) : Math.cos((0.5 * Math.PI * (i - rise)) / fade) ** 2
    x[i] = env * gaussian(rand)
  }
  const low = Float64Array.from(x)
  resonate(low, sr, 500, 350)
  resonate(x, sr, 1500, 700)
  // Sum of the two broad bands, DC removed (breath has no DC).
  let prev = 0
  for (let i = 0; i < total; i++) {
    const v = x[i]! + 0.7 * low[i]!
    x[i] = v - prev
    prev = v
  }
  return toFloat32Peak(x, 0.22)
}
