/**
 * bench/clone: how far the classical clone moves a base preset toward a reference speaker,
 * measured with the project's speaker embedding (MfccEmbedding, cosine).
 *
 * Reference speakers are made with the service's own engines and then moved off the preset
 * catalogue (a voice identical to a preset would make the base trivially perfect): Flite awb and
 * kal16 played at another tape speed (pitch, formants and tempo move together), espeak en+m3
 * with a low engine pitch, espeak et+f2 high and slow, espeak et+m1 slowed tape. For each:
 *  1. the reference speaks an enrollment text of 8–12 s; the clone is planned from it exactly as
 *     POST /voices/add does (analysis, base choice, pitch/rate/envelope plan);
 *  2. the reference, the base preset and the clone speak another (test) text;
 *  3. printed: cosine(reference, base) and cosine(reference, clone) on that test text, and the
 *     median F0 and syllable rate of all three (the embedding barely sees pitch and tempo).
 * The clone must beat its base for every reference. Engines run in this process (no server):
 * the numbers are about the DSP, not the HTTP path. Run: npm run bench:clone
 * `--smoke` (BENCH_SMOKE=1): the first reference only.
 */
import { resample } from "../engines/audio/Resampler.ts"
import { planClone, renderClone } from "../engines/clone/CloneVoice.ts"
import { analyzeVoice, ANALYSIS_RATE } from "../engines/clone/VoiceAnalysis.ts"
import { MfccEmbedding } from "../engines/speaker/MfccEmbedding.ts"
import { cosine } from "../engines/speaker/SpeakerEmbedding.ts"
import { EspeakTts } from "../engines/tts/EspeakTts.ts"
import { FliteTts } from "../engines/tts/FliteTts.ts"
import type { EngineVoice, TtsEngine } from "../engines/tts/TtsEngine.ts"
import { findPreset } from "../engines/tts/Voices.ts"
import { smoke } from "./support.ts"

const espeak = await EspeakTts.load()
const flite = await FliteTts.load()
const engineFor = async (v: EngineVoice): Promise<TtsEngine> => (v.engine === "flite" ? flite : espeak)

const TEXTS = {
  en: {
    enroll: "The old lighthouse keeper climbed the narrow stairs every evening. He lit the lamp, wrote a short note in his logbook, and watched the ships pass slowly along the rocky coast until midnight.",
    test: "Yesterday we walked to the market and bought fresh bread, apples and a little cheese for the picnic by the river."
  },
  et: {
    enroll: "Vana majakavaht ronis igal õhtul mööda kitsast treppi üles. Ta süütas lambi ja vaatas, kuidas laevad mööda rannikut liikusid.",
    test: "Eile läksime turule ja ostsime värsket leiba, õunu ning natuke juustu piknikuks jõe ääres."
  }
} as const

interface Speaker {
  readonly name: string
  readonly language: "en" | "et"
  readonly voice: EngineVoice
  /** Tape speed: > 1 plays faster and higher (formants and F0 together). */
  readonly tape: number
}

const SPEAKERS: ReadonlyArray<Speaker> = [
  { name: "Flite awb, tape ×1.08", language: "en", voice: { engine: "flite", language: "en", variant: "awb", pitch: 1, rate: 1 }, tape: 1.08 },
  { name: "Flite kal16, tape ×0.92", language: "en", voice: { engine: "flite", language: "en", variant: "kal16", pitch: 1, rate: 1 }, tape: 0.92 },
  { name: "espeak en+m3, pitch 0.75", language: "en", voice: { engine: "espeak", language: "en", variant: "en+m3", pitch: 0.75, rate: 1 }, tape: 1 },
  { name: "espeak et+f2, pitch 1.3, rate 0.85", language: "et", voice: { engine: "espeak", language: "et", variant: "et+f2", pitch: 1.3, rate: 0.85 }, tape: 1 },
  { name: "espeak et+m1, tape ×0.9", language: "et", voice: { engine: "espeak", language: "et", variant: "et+m1", pitch: 1, rate: 1 }, tape: 0.9 }
]

/** The speaker saying `text`, at 16 kHz. */
const speak = async (s: Speaker, text: string): Promise<Float32Array> => {
  const r = await (await engineFor(s.voice)).synthesize({ text, voice: s.voice, speed: 1 })
  // Tape speed: the samples are reinterpreted at `tape` × the rate, then brought to 16 kHz.
  return resample(r.samples, r.sampleRate * s.tape, ANALYSIS_RATE)
}

const at16k = (samples: Float32Array, rate: number) => (rate === ANALYSIS_RATE ? samples : resample(samples, rate, ANALYSIS_RATE))

/** The audio numbers a listener hears first: median F0 (Hz) and syllable rate, on the test text. */
const f0Of = (pcm: Float32Array) => analyzeVoice(pcm).f0?.medianHz.toFixed(0) ?? "-"
const rateOf = (pcm: Float32Array) => analyzeVoice(pcm).rate.syllablesPerSecond.toFixed(1)

const rows: Array<Array<string>> = []
let failures = 0
for (const s of smoke ? SPEAKERS.slice(0, 1) : SPEAKERS) {
  const texts = TEXTS[s.language]
  const enroll = await speak(s, texts.enroll)
  const profile = analyzeVoice(enroll)
  const { plan, dropped } = await planClone({ reference: enroll, profile, language: s.language, refText: texts.enroll, engineFor })
  const referencePcm = await speak(s, texts.test)
  const reference = MfccEmbedding.embed(referencePcm)
  const baseVoice = findPreset(plan.baseVoiceId)!.engineVoice
  const base = await (await engineFor(baseVoice)).synthesize({ text: texts.test, voice: baseVoice, speed: 1 })
  const clone = await renderClone(await engineFor(plan.engineVoice), plan, texts.test, 1)
  const basePcm = at16k(base.samples, base.sampleRate)
  const clonePcm = at16k(clone.samples, clone.sampleRate)
  const simBase = cosine(reference, MfccEmbedding.embed(basePcm))
  const simClone = cosine(reference, MfccEmbedding.embed(clonePcm))
  if (!(simClone > simBase)) failures++
  rows.push([
    s.name,
    `${(enroll.length / ANALYSIS_RATE).toFixed(1)} s`,
    plan.baseVoiceId,
    simBase.toFixed(4),
    simClone.toFixed(4),
    (simClone - simBase >= 0 ? "+" : "") + (simClone - simBase).toFixed(4),
    [referencePcm, basePcm, clonePcm].map(f0Of).join(" / "),
    [referencePcm, basePcm, clonePcm].map(rateOf).join(" / "),
    `F0 ×${plan.pitchFactor.toFixed(2)} range ×${plan.pitchRange.toFixed(2)} rate ${plan.engineVoice.rate.toFixed(2)} warp ${plan.warp.toFixed(3)}${dropped.length > 0 ? ` (dropped: ${dropped.join(", ")})` : ""}`
  ])
}

const header = ["reference speaker", "sample", "base preset", "cos(ref, base)", "cos(ref, clone)", "gain", "F0 Hz ref/base/clone", "syll/s ref/base/clone", "plan"]
const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)))
const line = (cells: ReadonlyArray<string>) => cells.map((c, i) => c.padEnd(widths[i]!)).join("  ")
console.log(`speaker similarity (${MfccEmbedding.name}, cosine) on a test text not in the sample`)
console.log(line(header))
console.log(line(widths.map((w) => "-".repeat(w))))
for (const r of rows) console.log(line(r))
console.log(failures === 0 ? "the clone beats its base preset for every reference" : `the clone does NOT beat its base for ${failures} reference(s)`)
process.exitCode = failures === 0 ? 0 : 1
