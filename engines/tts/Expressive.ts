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
import { rms } from "../audio/Pcm.ts"
import type { Emotion, ExpressivePart, SpeechPart, Style } from "./ExpressiveTags.ts"
import { type EngineVoice, type TtsEngine, TtsError, type TtsResult, type WordTiming } from "./TtsEngine.ts"
import { languageInfo } from "./Voices.ts"
import { estimateF0, median, type PsolaResult, reshapePitch, sing, voicedValues } from "./Psola.ts"
import { lpcWhisper, renderEffect } from "./VocalEffects.ts"

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
  await engine.checkVoice(request.voice)
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

/** The noise seed of a part: from its offset in the text, so a rendering repeats exactly. */
const seedFor = (charStart: number) => (Math.imul(charStart + 1, 0x9e3779b1) ^ 0x5eed) >>> 0

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
