/**
 * The classical clone engine measured on audio with known answers: a synthetic vowel whose F0
 * and formants are set, espeak speech played at another tape speed (F0, formants and tempo
 * move by a known factor), and a clone planned from a reference off the preset catalogue.
 */
import t from "tap"
import { resample } from "../../../engines/audio/Resampler.ts"
import { correctSpectrum, planClone, renderClone, shapeAudio } from "../../../engines/clone/CloneVoice.ts"
import { analyzeVoice, ANALYSIS_RATE, LTAS24_BANDS } from "../../../engines/clone/VoiceAnalysis.ts"
import { MfccEmbedding } from "../../../engines/speaker/MfccEmbedding.ts"
import { cosine } from "../../../engines/speaker/SpeakerEmbedding.ts"
import { EspeakTts } from "../../../engines/tts/EspeakTts.ts"
import type { EngineVoice } from "../../../engines/tts/TtsEngine.ts"
import { findPreset } from "../../../engines/tts/Voices.ts"

const espeak = await EspeakTts.load()
const engineFor = async () => espeak

const say = async (voice: EngineVoice, text: string, tape = 1): Promise<Float32Array> => {
  const r = await espeak.synthesize({ text, voice, speed: 1 })
  return resample(r.samples, r.sampleRate * tape, ANALYSIS_RATE)
}

/** A pulse train at `f0` Hz through two-pole resonators at `formants` Hz, 16 kHz. */
const vowel = (f0: number, formants: ReadonlyArray<number>, seconds: number): Float32Array => {
  const n = Math.round(seconds * ANALYSIS_RATE)
  let x = new Float64Array(n)
  const period = ANALYSIS_RATE / f0
  for (let p = 0; p < n; p += period) x[Math.round(p)] = 1
  for (const f of formants) {
    const r = Math.exp((-Math.PI * 80) / ANALYSIS_RATE)
    const a1 = 2 * r * Math.cos((2 * Math.PI * f) / ANALYSIS_RATE)
    const a2 = -r * r
    const y = new Float64Array(n)
    for (let i = 0; i < n; i++) y[i] = x[i]! + a1 * (y[i - 1] ?? 0) + a2 * (y[i - 2] ?? 0)
    x = y
  }
  let peak = 0
  for (const v of x) peak = Math.max(peak, Math.abs(v))
  return Float32Array.from(x, (v) => (0.5 * v) / peak)
}

const ratio = (a: number, b: number) => a / b

t.test("analysis: F0 and vocal-tract length of a synthetic vowel", async (t) => {
  // A uniform 17.5 cm tube closed at the glottis resonates at (2i − 1) × 500 Hz.
  const profile = analyzeVoice(vowel(150, [500, 1500, 2500, 3500], 2))
  t.ok(profile.f0 !== null, "voiced")
  t.ok(Math.abs(profile.f0!.medianHz - 150) < 4, `median F0 ${profile.f0!.medianHz.toFixed(1)} Hz ≈ 150 Hz`)
  t.ok(profile.f0!.p95St - profile.f0!.p5St < 0.5, "a steady pitch has (almost) no range")
  t.ok(profile.vocalTract !== null, "formants found")
  t.ok(Math.abs(profile.vocalTract!.lengthCm - 17.5) < 1.75, `vocal tract ${profile.vocalTract!.lengthCm.toFixed(1)} cm ≈ 17.5 cm`)
  t.equal(profile.ltasDb.length, LTAS24_BANDS)
})

t.test("analysis: tape speed moves F0, formants and tempo by the same factor", async (t) => {
  const voice: EngineVoice = { engine: "espeak", language: "et", variant: "et+m1", pitch: 1, rate: 1 }
  const text = "Vana majakavaht ronis igal õhtul mööda kitsast treppi üles ja süütas lambi."
  const normal = analyzeVoice(await say(voice, text))
  const slow = analyzeVoice(await say(voice, text, 0.9))
  const f0 = ratio(slow.f0!.medianHz, normal.f0!.medianHz)
  t.ok(Math.abs(f0 - 0.9) < 0.03, `F0 ×${f0.toFixed(3)} ≈ 0.9`)
  const tract = ratio(slow.vocalTract!.lengthCm, normal.vocalTract!.lengthCm)
  t.ok(Math.abs(tract - 1 / 0.9) < 0.08, `vocal tract ×${tract.toFixed(3)} ≈ 1.11`)
  // Semitone ranges do not change with tape speed; octave errors of the tracker (et+m1 has
  // some) would blow one of them up.
  const range = (p: typeof normal) => p.f0!.p95St - p.f0!.p5St
  t.ok(Math.abs(range(slow) - range(normal)) < 1, `F0 range ${range(normal).toFixed(1)} vs ${range(slow).toFixed(1)} semitones`)
  t.ok(range(normal) < 8, "no octave errors in the range")
  const tempo = ratio(slow.rate.syllablesPerSecond, normal.rate.syllablesPerSecond)
  t.ok(Math.abs(tempo - 0.9) < 0.08, `syllable rate ×${tempo.toFixed(3)} ≈ 0.9`)
})

t.test("the correction filter is transparent when it has nothing to correct", async (t) => {
  const x = await say({ engine: "espeak", language: "en", variant: "en+m3", pitch: 1, rate: 1 }, "A short test.")
  const flat = new Array<number>(LTAS24_BANDS).fill(0)
  let worst = 0
  const y = correctSpectrum(x, ANALYSIS_RATE, 1, flat)
  for (let i = 0; i < x.length; i++) worst = Math.max(worst, Math.abs(y[i]! - x[i]!))
  t.ok(worst < 1e-4, `STFT analysis and overlap-add resynthesis reconstruct the input (max error ${worst.toExponential(1)})`)
  t.equal(shapeAudio(x, ANALYSIS_RATE, { pitchFactor: 1, pitchRange: 1, warp: 1, eqDb: flat }), x, "an empty plan returns the base audio untouched")
})

t.test("a clone of a higher, slower Estonian speaker matches pitch and tempo and sounds closer than its base", async (t) => {
  const reference: EngineVoice = { engine: "espeak", language: "et", variant: "et+f2", pitch: 1.3, rate: 0.85 }
  const enroll = "Vana majakavaht ronis igal õhtul mööda kitsast treppi üles. Ta süütas lambi ja vaatas, kuidas laevad mööda rannikut liikusid."
  const test = "Eile läksime turule ja ostsime värsket leiba, õunu ning natuke juustu piknikuks jõe ääres."
  const sample = await say(reference, enroll)
  const { plan, candidates } = await planClone({ reference: sample, profile: analyzeVoice(sample), language: "et", refText: enroll, engineFor })
  t.equal(findPreset(plan.baseVoiceId)?.engineVoice.language, "et", `the base (${plan.baseVoiceId}) speaks the clone's language`)
  t.equal(candidates[0]?.voiceId, plan.baseVoiceId, "the base is the best-scored candidate")

  const ref = await say(reference, test)
  const baseVoice = findPreset(plan.baseVoiceId)!.engineVoice
  const base = await say(baseVoice, test)
  const cloned = await renderClone(espeak, plan, test, 1)
  const clone = resample(cloned.samples, cloned.sampleRate, ANALYSIS_RATE)
  const [r, b, c] = [ref, base, clone].map((pcm) => analyzeVoice(pcm))
  const semitones = (x: typeof r) => x!.f0!.medianSt
  t.ok(Math.abs(semitones(c) - semitones(r)) < 1, `clone F0 ${c!.f0!.medianHz.toFixed(0)} Hz vs reference ${r!.f0!.medianHz.toFixed(0)} Hz (base ${b!.f0!.medianHz.toFixed(0)} Hz)`)
  const tempoGap = (x: typeof r) => Math.abs(Math.log(x!.rate.syllablesPerSecond / r!.rate.syllablesPerSecond))
  t.ok(tempoGap(c) < tempoGap(b), `clone tempo ${c!.rate.syllablesPerSecond.toFixed(2)}/s is nearer the reference's ${r!.rate.syllablesPerSecond.toFixed(2)}/s than the base's ${b!.rate.syllablesPerSecond.toFixed(2)}/s`)
  const embed = MfccEmbedding.embed
  const toRef = (pcm: Float32Array) => cosine(embed(ref), embed(pcm))
  t.ok(toRef(clone) > toRef(base), `speaker similarity: clone ${toRef(clone).toFixed(3)} > base ${toRef(base).toFixed(3)}`)
  const baseWords = (await espeak.synthesize({ text: test, voice: baseVoice, speed: 1 })).words
  t.equal(cloned.words.length, baseWords.length, `the clone keeps the base engine's word timings (${baseWords.length} words)`)
  const last = cloned.words.at(-1)!
  t.ok(last.endMs <= (1000 * cloned.samples.length) / cloned.sampleRate + 1, "the last word ends inside the audio")
})
