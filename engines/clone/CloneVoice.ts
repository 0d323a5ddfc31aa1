/**
 * The classical voice-clone engine: a base preset moved toward a reference speaker.
 *
 * Planning (once, when the clone is made; `planClone`):
 *  1. Base choice: among the catalogue presets of the clone's language, the one nearest the
 *     reference in timbre and pitch: cosine of speaker embeddings (MfccEmbedding) minus
 *     0.03 per semitone between F0 medians. Preset embeddings come from each preset's preview
 *     sentence, computed once per worker thread and cached.
 *  2. The base speaks the reference's transcript (or, without one, the preview sentence) and is
 *     analysed like the reference: rate = base rate × ref/base syllable rate; PSOLA pitch factor
 *     and range scale from the F0 medians and p5–p95 ranges; a frequency warp α = L_base/L_ref
 *     from the vocal-tract lengths (formants move by α).
 *  3. Spectral envelope: the base audio, pitch-shifted and warped, is measured again and per-band
 *     gains = LTAS(ref) − LTAS(base'), smoothed over neighbouring bands and clamped, are added;
 *     one refinement pass measures the equalised audio and adds half the residual.
 *  4. The warp and the spectral correction stay only if they bring the clone closer to the
 *     sample in the embedding (greedy removal); pitch and rate are always matched (espeak by its
 *     own pitch parameter, searched until the median F0 is within a quarter tone).
 * Synthesis (`renderClone`): base engine at the planned rate → TD-PSOLA (Expressive.ts) to the
 * planned F0 level and range → one STFT pass that warps each frame's cepstrally smoothed
 * envelope by α and applies the band gains → the base's loudness, soft-limited. Deterministic.
 *
 * What it is not: it does not copy accent, phonetic detail or voice quality beyond the average
 * spectrum; the result is the base voice with the reference's pitch, tempo, formant scale and
 * spectral balance. A neural zero-shot engine can replace it behind the same task contract
 * (the sample and its transcript stay in the blob store for that).
 */
import { fftInPlace } from "../audio/Fft.ts"
import { resample } from "../audio/Resampler.ts"
import { MfccEmbedding } from "../speaker/MfccEmbedding.ts"
import { cosine } from "../speaker/SpeakerEmbedding.ts"
import { softLimit } from "../tts/Expressive.ts"
import { reshapePitch } from "../tts/Psola.ts"
import type { EngineVoice, TtsEngine, TtsResult } from "../tts/TtsEngine.ts"
import { languageInfo, presetsForLanguage, type PresetVoice } from "../tts/Voices.ts"
import { analyzeVoice, ANALYSIS_RATE, LTAS24_BANDS, ltasCentresHz, type VoiceProfile } from "./VoiceAnalysis.ts"

/** What `clone.synthesize` needs; stored in the clone's profile. */
export interface ClonePlan {
  readonly version: 1
  readonly baseVoiceId: string
  /** The base preset's voice with the matched rate. */
  readonly engineVoice: EngineVoice
  /** PSOLA: multiply F0 by `pitchFactor`, scale log-F0 excursions by `pitchRange`. */
  readonly pitchFactor: number
  readonly pitchRange: number
  /** Frequency warp of the spectral envelope (> 1 raises formants). */
  readonly warp: number
  /** Gains (dB) at the 24 LTAS band centres. */
  readonly eqDb: ReadonlyArray<number>
}

const clamp = (x: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, x))

// ---------------------------------------------------------------------------------------------
// Complex FFT and the STFT correction filter


const mel = (hz: number) => 2595 * Math.log10(1 + hz / 700)

/** Gain (dB) of each FFT bin at rate `sr`: band gains interpolated in mel, flat beyond the ends. */
const binGainsDb = (eqDb: ReadonlyArray<number>, sr: number, size: number): Float64Array => {
  const centres = ltasCentresHz().map(mel)
  const out = new Float64Array(size / 2 + 1)
  for (let k = 0; k <= size / 2; k++) {
    const m = mel((k * sr) / size)
    if (m <= centres[0]!) out[k] = eqDb[0]!
    else if (m >= centres[centres.length - 1]!) out[k] = eqDb[eqDb.length - 1]!
    else {
      let b = 0
      while (centres[b + 1]! < m) b++
      const f = (m - centres[b]!) / (centres[b + 1]! - centres[b]!)
      out[k] = eqDb[b]! * (1 - f) + eqDb[b + 1]! * f
    }
  }
  return out
}

/**
 * One STFT pass (Hann, 75 % overlap, ~46 ms frames): each frame's spectral envelope (real
 * cepstrum liftered to 1.5 ms quefrency) is replaced by the envelope warped by `warp`, and the
 * band gains are applied; the harmonic fine structure stays. Per-bin gain clamped to ±18 dB.
 */
export const correctSpectrum = (x: Float32Array, sr: number, warp: number, eqDb: ReadonlyArray<number>): Float32Array => {
  let size = 256
  while (size < 0.046 * sr) size <<= 1
  const hop = size / 4
  const half = size / 2
  const window = Float64Array.from({ length: size }, (_, i) => 0.5 - 0.5 * Math.cos((2 * Math.PI * i) / size))
  const eq = binGainsDb(eqDb, sr, size)
  const lifter = Math.max(8, Math.round(0.0015 * sr))
  const doWarp = Math.abs(warp - 1) > 1e-3
  const padded = new Float32Array(x.length + 2 * size)
  padded.set(x, size)
  const out = new Float64Array(padded.length)
  const norm = new Float64Array(padded.length)
  const re = new Float64Array(size)
  const im = new Float64Array(size)
  const cr = new Float64Array(size)
  const ci = new Float64Array(size)
  const env = new Float64Array(half + 1)
  const gain = new Float64Array(half + 1)
  for (let start = 0; start + size <= padded.length; start += hop) {
    for (let i = 0; i < size; i++) {
      re[i] = padded[start + i]! * window[i]!
      im[i] = 0
    }
    fftInPlace(re, im, false)
    if (doWarp) {
      for (let k = 0; k < size; k++) {
        cr[k] = 0.5 * Math.log(re[k]! * re[k]! + im[k]! * im[k]! + 1e-10)
        ci[k] = 0
      }
      fftInPlace(cr, ci, true)
      for (let q = 0; q < size; q++) {
        const d = Math.min(q, size - q)
        if (d > lifter) cr[q] = 0
        else if (d === lifter) cr[q] = cr[q]! * 0.5
        ci[q] = 0
      }
      fftInPlace(cr, ci, false)
      for (let k = 0; k <= half; k++) env[k] = cr[k]!
    }
    for (let k = 0; k <= half; k++) {
      let g = eq[k]! / 20 * Math.LN10
      if (doWarp) {
        const src = k / warp
        const lo = Math.min(half - 1, Math.floor(src))
        const f = Math.min(1, src - lo)
        g += env[lo]! * (1 - f) + env[lo + 1]! * f - env[k]!
      }
      gain[k] = Math.exp(clamp(g, -18 / 20 * Math.LN10, 18 / 20 * Math.LN10))
    }
    for (let k = 0; k < size; k++) {
      const g = gain[k <= half ? k : size - k]!
      re[k] = re[k]! * g
      im[k] = im[k]! * g
    }
    fftInPlace(re, im, true)
    for (let i = 0; i < size; i++) {
      out[start + i] = out[start + i]! + re[i]! * window[i]!
      norm[start + i] = norm[start + i]! + window[i]! * window[i]!
    }
  }
  const y = new Float32Array(x.length)
  for (let i = 0; i < x.length; i++) {
    const n = norm[size + i]!
    y[i] = n > 1e-6 ? out[size + i]! / n : 0
  }
  return y
}

// ---------------------------------------------------------------------------------------------
// Rendering

const rmsOf = (x: Float32Array) => {
  let s = 0
  for (let i = 0; i < x.length; i++) s += x[i]! * x[i]!
  return Math.sqrt(s / Math.max(1, x.length))
}

/** Pitch, envelope and loudness corrections of base-engine audio (word timings stay valid). */
export const shapeAudio = (samples: Float32Array, sr: number, plan: Pick<ClonePlan, "pitchFactor" | "pitchRange" | "warp" | "eqDb">): Float32Array => {
  const level = rmsOf(samples)
  const pitched = Math.abs(plan.pitchFactor - 1) > 1e-3 || Math.abs(plan.pitchRange - 1) > 1e-3
    ? reshapePitch(samples, sr, plan.pitchRange, plan.pitchFactor)?.samples.subarray(0, samples.length) ?? samples
    : samples
  // A plan whose corrections were all dropped is the base voice, untouched.
  if (pitched === samples && Math.abs(plan.warp - 1) <= 1e-3 && plan.eqDb.every((g) => g === 0)) return samples
  const shaped = correctSpectrum(pitched instanceof Float32Array ? pitched : Float32Array.from(pitched), sr, plan.warp, plan.eqDb)
  const now = rmsOf(shaped)
  if (now > 1e-9 && level > 0) for (let i = 0; i < shaped.length; i++) shaped[i] = shaped[i]! * (level / now)
  return softLimit(shaped)
}

/** The clone speaking `text`: base engine, then `shapeAudio`. */
export const renderClone = async (engine: TtsEngine, plan: ClonePlan, text: string, speed: number): Promise<TtsResult> => {
  const base = await engine.synthesize({ text, voice: plan.engineVoice, speed })
  return { ...base, samples: shapeAudio(base.samples, base.sampleRate, plan) }
}

// ---------------------------------------------------------------------------------------------
// Planning

const to16k = (r: TtsResult) => (r.sampleRate === ANALYSIS_RATE ? r.samples : resample(r.samples, r.sampleRate, ANALYSIS_RATE))

interface PresetTraits {
  readonly embedding: Float32Array
  readonly medianSt: number | undefined
}

/** Per worker thread: each preset's embedding and F0 from its preview sentence. */
const traitsCache = new Map<string, Promise<PresetTraits>>()

const presetTraits = (engine: TtsEngine, preset: PresetVoice): Promise<PresetTraits> => {
  let cached = traitsCache.get(preset.voiceId)
  if (cached === undefined) {
    const text = languageInfo(preset.engineVoice.language)?.sample ?? "Hello!"
    cached = engine.synthesize({ text, voice: preset.engineVoice, speed: 1 }).then((r) => {
      const pcm = to16k(r)
      return { embedding: MfccEmbedding.embed(pcm), medianSt: analyzeVoice(pcm).f0?.medianSt }
    })
    cached.catch(() => traitsCache.delete(preset.voiceId))
    traitsCache.set(preset.voiceId, cached)
  }
  return cached
}

/** A correction is kept only if it raises the enrollment similarity by this much (cosine). */
const KEEP_MARGIN = 0.003

/** Penalty per semitone between F0 medians, in cosine units. */
const SEMITONE_PENALTY = 0.03

export interface PlanInput {
  /** 16 kHz reference speech (VAD-trimmed or not). */
  readonly reference: Float32Array
  readonly profile: VoiceProfile
  readonly language: string
  /** Transcript of the reference, when known: the base speaks it for a text-matched comparison. */
  readonly refText?: string | undefined
  /** Only presets of these engines are candidates (e.g. without Piper). */
  readonly engineFor: (voice: EngineVoice) => Promise<TtsEngine>
}

export interface PlanResult {
  readonly plan: ClonePlan
  readonly candidates: ReadonlyArray<{ readonly voiceId: string; readonly score: number }>
  /** Corrections left out because they moved the clone away from the reference. */
  readonly dropped: ReadonlyArray<string>
}

export const planClone = async (input: PlanInput): Promise<PlanResult> => {
  const presets = presetsForLanguage(input.language)
  if (presets.length === 0) throw new Error(`no preset voice speaks ${input.language}`)
  const refEmbedding = MfccEmbedding.embed(input.reference)
  const refSt = input.profile.f0?.medianSt
  const candidates: Array<{ voiceId: string; score: number; preset: PresetVoice }> = []
  for (const preset of presets) {
    const traits = await presetTraits(await input.engineFor(preset.engineVoice), preset)
    const distance = refSt !== undefined && traits.medianSt !== undefined ? Math.abs(refSt - traits.medianSt) : 0
    candidates.push({ voiceId: preset.voiceId, score: cosine(refEmbedding, traits.embedding) - SEMITONE_PENALTY * distance, preset })
  }
  candidates.sort((a, b) => b.score - a.score || a.voiceId.localeCompare(b.voiceId))
  const best = candidates[0]!.preset
  const engine = await input.engineFor(best.engineVoice)
  const text = input.refText !== undefined && input.refText.trim() !== "" ? input.refText : languageInfo(input.language)?.sample ?? "Hello!"

  // The base as it is, measured like the reference.
  const plain = await engine.synthesize({ text, voice: best.engineVoice, speed: 1 })
  const baseProfile = analyzeVoice(to16k(plain))
  const ref = input.profile
  const rateRatio = ref.rate.syllablesPerSecond > 0 && baseProfile.rate.syllablesPerSecond > 0
    ? ref.rate.syllablesPerSecond / baseProfile.rate.syllablesPerSecond
    : 1
  const wantedFactor = ref.f0 !== null && baseProfile.f0 !== null ? clamp(2 ** ((ref.f0.medianSt - baseProfile.f0.medianSt) / 12), 0.5, 2) : 1
  // espeak moves its own pitch cleanly (no PSOLA artefacts); its pitch scale is not linear in
  // Hz, so the result is measured and PSOLA corrects what is left. Flite has no pitch control.
  // The nuclei rate varies by about ±5 % between texts of one voice: smaller differences are noise.
  const rate = Math.abs(rateRatio - 1) < 0.05 ? best.engineVoice.rate : clamp(best.engineVoice.rate * rateRatio, 0.5, 2)
  let engineVoice: EngineVoice = { ...best.engineVoice, rate }
  let pitchFactor = wantedFactor
  if (best.engineVoice.engine === "espeak" && ref.f0 !== null && baseProfile.f0 !== null) {
    // A few secant steps on log(engine pitch) against the measured median; what is left after
    // them goes to PSOLA.
    let points: Array<{ logPitch: number; st: number }> = [{ logPitch: Math.log(best.engineVoice.pitch), st: baseProfile.f0.medianSt }]
    let logPitch = Math.log(clamp(best.engineVoice.pitch * wantedFactor, 0.05, 2))
    for (let step = 0; step < 4; step++) {
      const moved = analyzeVoice(to16k(await engine.synthesize({ text, voice: { ...engineVoice, pitch: Math.exp(logPitch) }, speed: 1 }))).f0
      if (moved === null) break
      points = [...points, { logPitch, st: moved.medianSt }].slice(-2)
      const [a, b] = points as [{ logPitch: number; st: number }, { logPitch: number; st: number }]
      const bestPoint = Math.abs(a.st - ref.f0.medianSt) < Math.abs(b.st - ref.f0.medianSt) ? a : b
      engineVoice = { ...engineVoice, pitch: Math.exp(bestPoint.logPitch) }
      pitchFactor = clamp(2 ** ((ref.f0.medianSt - bestPoint.st) / 12), 0.5, 2)
      if (Math.abs(ref.f0.medianSt - bestPoint.st) < 0.25 || Math.abs(b.st - a.st) < 0.05) break
      logPitch = clamp(b.logPitch + (ref.f0.medianSt - b.st) * (b.logPitch - a.logPitch) / (b.st - a.st), Math.log(0.05), Math.log(2))
    }
  }
  // Residues under a quarter tone are left alone: PSOLA costs some quality.
  if (Math.abs(12 * Math.log2(pitchFactor)) < 0.5) pitchFactor = 1
  const refRange = ref.f0 !== null ? ref.f0.p95St - ref.f0.p5St : 0
  const baseRange = baseProfile.f0 !== null ? baseProfile.f0.p95St - baseProfile.f0.p5St : 0
  let pitchRange = refRange > 0.5 && baseRange > 0.5 ? clamp(refRange / baseRange, 0.5, 2) : 1
  // The p5–p95 range of one voice varies by 10–15 % between texts and with its pitch level, and
  // reshaping the contour is PSOLA (costs quality): differences under 20 % are left alone.
  if (Math.abs(pitchRange - 1) < 0.2) pitchRange = 1
  const warp = ref.vocalTract !== null && baseProfile.vocalTract !== null
    ? clamp(baseProfile.vocalTract.lengthCm / ref.vocalTract.lengthCm, 0.85, 1.18)
    : 1

  // Spectral envelope: measure the rate-matched, pitched and warped base, equalise, refine once.
  const rated = await engine.synthesize({ text, voice: engineVoice, speed: 1 })
  const flat = new Array<number>(LTAS24_BANDS).fill(0)
  const measure = (eqDb: ReadonlyArray<number>) =>
    analyzeVoice(to16k({ ...rated, samples: shapeAudio(rated.samples, rated.sampleRate, { pitchFactor, pitchRange, warp, eqDb }) })).ltasDb
  const residual = (ltas: ReadonlyArray<number>) => smooth(ref.ltasDb.map((v, b) => v - ltas[b]!))
  let eqDb = residual(measure(flat)).map((g) => clamp(g, -12, 12))
  const again = residual(measure(eqDb))
  eqDb = eqDb.map((g, b) => clamp(g + 0.5 * again[b]!, -12, 12))

  // The envelope corrections must earn their place: on the reference's own text, one whose
  // removal brings the clone closer to the reference (speaker embedding) is removed, greedily.
  // This guards against measurement noise when the base is already close to the reference.
  // Pitch and rate are not put to that test: they are measured directly, a listener hears them
  // first, and the MFCC embedding barely sees them (it would drop them as noise).
  const full: ClonePlan = { version: 1, baseVoiceId: best.voiceId, engineVoice, pitchFactor, pitchRange, warp, eqDb: eqDb.map((g) => Math.round(g * 100) / 100) }
  const without: Record<string, (p: ClonePlan) => ClonePlan> = {
    warp: (p) => ({ ...p, warp: 1 }),
    spectrum: (p) => ({ ...p, eqDb: p.eqDb.map(() => 0) })
  }
  const similarity = async (p: ClonePlan) => cosine(refEmbedding, MfccEmbedding.embed(to16k(await renderClone(engine, p, text, 1))))
  let plan = full
  let score = await similarity(plan)
  const dropped: Array<string> = []
  for (let round = 0; round < Object.keys(without).length; round++) {
    let bestDrop: { name: string; plan: ClonePlan; score: number } | undefined
    for (const [name, drop] of Object.entries(without)) {
      if (dropped.includes(name)) continue
      const candidate = drop(plan)
      const s = await similarity(candidate)
      if (s > score - KEEP_MARGIN && (bestDrop === undefined || s > bestDrop.score)) bestDrop = { name, plan: candidate, score: s }
    }
    if (bestDrop === undefined) break
    dropped.push(bestDrop.name)
    plan = bestDrop.plan
    score = Math.max(score, bestDrop.score)
  }

  return {
    plan,
    dropped,
    candidates: candidates.map(({ voiceId, score }) => ({ voiceId, score: Math.round(score * 1000) / 1000 }))
  }
}

/** [1 2 1]/4 across neighbouring bands. */
const smooth = (v: ReadonlyArray<number>): Array<number> =>
  v.map((x, b) => (2 * x + (v[b - 1] ?? x) + (v[b + 1] ?? x)) / 4)
