/**
 * Derives the standardisation constants of MfccEmbedding (writes MfccCalibration.ts). Run with
 * `npx tsx engines/speaker/calibrateMfcc.ts`; deterministic (the engines are), ≈ 20 s.
 *
 * Corpus: `CALIBRATION_VOICES` read `CALIBRATION_TEXT` in their language: espeak-ng in ten
 * languages with a spread of its variants (formant synthesis, pitch 70–250 Hz), and every Flite
 * voice (kal at 8 kHz upsampled, the others at 16 kHz). The sentences are not those of the tests;
 * the espeak voices of the tests (en+m3, en+f3, et+f2) are not in it, the Flite voices are (there
 * are only five). espeak variants f2, f3 and f5 are left out because their audio differs from
 * one process to the next (random breath noise), and the constants must regenerate identically.
 *
 * Each utterance is cut into the diarization windows (1.5 s at 0.75 s hop) plus the whole
 * utterance. For every raw statistic, over all those vectors (`calibrationConstants`):
 *  - the mean centres the population, so the cosine compares where a voice lies relative to the
 *    average synthetic voice rather than the direction every voice shares;
 *  - the standard deviation puts every statistic on one scale;
 *  - the weight favours statistics that tell voices apart over those that follow the text.
 * The two engine families weigh equally, and voices equally within a family: neither do the 29
 * espeak voices outvote the 5 Flite ones, nor does a slow voice with more windows pull the mean.
 * Family balance matters: centred on espeak alone, every Flite voice shares one direction and
 * two different Flite men come out at cosine 0.75. Unmeasurable statistics (NaN) are skipped.
 */
import { writeFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { resample } from "../audio/Resampler.ts"
import { EspeakTts } from "../tts/EspeakTts.ts"
import { FliteTts } from "../tts/FliteTts.ts"
import type { EngineVoice, TtsEngine } from "../tts/TtsEngine.ts"
import { frameCount, frameFeatures } from "./FrameFeatures.ts"
import { framesOf, RAW_DIMENSION, rawStatistics } from "./MfccEmbedding.ts"

export const CALIBRATION_TEXT: Record<string, ReadonlyArray<string>> = {
  en: [
    "A large size in stockings is hard to sell, so the clerk kept them in the back room.",
    "The boy was there when the sun rose over the quiet harbour.",
    "Please bring your own paper and a pencil to the meeting on Friday."
  ],
  et: ["Vanaema küpsetas pühapäeval suure leiva ja kutsus kõik lapsed sööma.", "Sügisel lähevad linnud lõunasse ja metsad muutuvad kollaseks."],
  de: ["Der alte Mann ging jeden Morgen mit seinem Hund am Fluss spazieren."],
  fr: ["Le petit garçon regardait les bateaux qui rentraient au port ce soir."],
  es: ["La niña compró pan y leche en la tienda de la esquina esta mañana."],
  fi: ["Kesällä järven rannalla on mukava istua ja katsella auringonlaskua."],
  it: ["Il treno per Roma parte alle otto dal binario numero tre."],
  nl: ["Het regende de hele dag, dus we bleven binnen en lazen een boek."],
  pl: ["W sobotę pojechaliśmy nad jezioro i pływaliśmy łódką do wieczora."],
  pt: ["O vento forte derrubou a velha árvore do jardim durante a noite."]
}

const espeakVoices: ReadonlyArray<string> = [
  "en-us+m1", "en-us+f1", "en-gb-x-rp+m2", "en-gb-x-rp+f4", "en+m7", "en+anika", "en+klatt", "en+Annie", "en+david", "en+linda",
  "et+m1", "et+f4", "et+m5", "de+m2", "de+f1", "fr+m4", "fr+f1", "es+m1", "es+f4", "fi+m2", "fi+f1", "it+m5", "it+f4",
  "nl+m1", "nl+f4", "pl+m4", "pl+f1", "pt+m2", "pt+f1"
]
const fliteVoices: ReadonlyArray<string> = ["slt", "rms", "awb", "kal16", "kal"]

export const CALIBRATION_VOICES: ReadonlyArray<EngineVoice> = [
  ...espeakVoices.map((variant): EngineVoice => ({ engine: "espeak", language: variant.split(/[+-]/)[0]!, variant, pitch: 1, rate: 1 })),
  ...fliteVoices.map((variant): EngineVoice => ({ engine: "flite", language: "en", variant, pitch: 1, rate: 1 }))
]

/** Largest ratio between the weights of two dimensions is WEIGHT_CAP². */
const WEIGHT_CAP = 2
const WINDOW_MS = 1500
const HOP_MS = 750

/** Raw statistic vectors of one voice: windows of every utterance plus each whole utterance. */
const voiceVectors = async (engine: TtsEngine, voice: EngineVoice): Promise<Array<Float64Array>> => {
  const out: Array<Float64Array> = []
  for (const text of CALIBRATION_TEXT[voice.language] ?? CALIBRATION_TEXT.en!) {
    const r = await engine.synthesize({ text, voice, speed: 1 })
    const pcm = r.sampleRate === 16000 ? r.samples : resample(r.samples, r.sampleRate, 16000)
    const f = frameFeatures(pcm)
    const whole = rawStatistics(f, 0, frameCount(pcm.length))
    if (whole !== undefined) out.push(whole)
    const ms = (pcm.length * 1000) / 16000
    for (let start = 0; start + WINDOW_MS <= ms; start += HOP_MS) {
      const { from, to } = framesOf({ startMs: start, endMs: start + WINDOW_MS })
      const v = rawStatistics(f, from, to)
      if (v !== undefined) out.push(v)
    }
  }
  return out
}

export interface CalibrationVoice {
  /** Engine family ("espeak", "flite"): families weigh equally, whatever their voice count. */
  readonly family: string
  /** Raw statistic vectors of this voice (windows and whole utterances). */
  readonly vectors: ReadonlyArray<Float64Array>
}

const average = (xs: ReadonlyArray<number>) => xs.reduce((a, b) => a + b, 0) / xs.length

/**
 * Per dimension, over voices weighted so that each engine family counts equally and each voice
 * equally within its family (NaNs skipped):
 *  - mean: weighted average of the voices' means;
 *  - std: weighted root mean square deviation of all vectors from that mean;
 *  - weight: Fisher ratio F = (weighted variance of the voice means) / (weighted average
 *    within-voice variance), divided by the median F over dimensions and clipped to
 *    [1/WEIGHT_CAP, WEIGHT_CAP]. A statistic that differs between voices more than it follows
 *    the text counts up to twice as much, one that mostly follows the text (energy contour, F0
 *    range) down to half; the cap keeps any one dimension (mean F0 has F ≈ 50) from deciding
 *    the cosine alone.
 */
export const calibrationConstants = (voices: ReadonlyArray<CalibrationVoice>, dimension: number) => {
  const families = [...new Set(voices.map((v) => v.family))]
  const voiceWeight = voices.map((v) => 1 / (families.length * voices.filter((u) => u.family === v.family).length))
  const mean = new Array<number>(dimension).fill(0)
  const std = new Array<number>(dimension).fill(1)
  const fisher = new Array<number>(dimension).fill(0)
  for (let d = 0; d < dimension; d++) {
    const values = voices.map((v) => v.vectors.map((x) => x[d]!).filter(Number.isFinite))
    const present = values.flatMap((xs, k) => (xs.length > 0 ? [k] : []))
    if (present.length === 0) continue
    const totalWeight = present.reduce((a, k) => a + voiceWeight[k]!, 0)
    const weighted = (f: (k: number) => number) => present.reduce((a, k) => a + voiceWeight[k]! * f(k), 0) / totalWeight
    const voiceMean = values.map((xs) => (xs.length > 0 ? average(xs) : NaN))
    const m = weighted((k) => voiceMean[k]!)
    mean[d] = m
    // Guard: a statistic constant over the corpus would divide by zero.
    std[d] = Math.max(Math.sqrt(weighted((k) => average(values[k]!.map((x) => (x - m) ** 2)))), 1e-6)
    const between = weighted((k) => (voiceMean[k]! - m) ** 2)
    const within = weighted((k) => average(values[k]!.map((x) => (x - voiceMean[k]!) ** 2)))
    fisher[d] = between / Math.max(within, 1e-12)
  }
  const median = [...fisher].sort((a, b) => a - b)[Math.floor(dimension / 2)]!
  const weight = fisher.map((f) => Math.min(WEIGHT_CAP, Math.max(1 / WEIGHT_CAP, f / median)))
  return { mean, std, weight }
}

const round = (x: number) => Number(x.toPrecision(6))

const main = async () => {
  const espeak = await EspeakTts.load()
  const flite = await FliteTts.load()
  const voices: Array<CalibrationVoice> = []
  for (const voice of CALIBRATION_VOICES) {
    voices.push({ family: voice.engine, vectors: await voiceVectors(voice.engine === "flite" ? flite : espeak, voice) })
  }
  flite.dispose()
  const { mean, std, weight } = calibrationConstants(voices, RAW_DIMENSION)
  const vectors = voices.reduce((n, v) => n + v.vectors.length, 0)
  const target = fileURLToPath(new URL("./MfccCalibration.ts", import.meta.url))
  writeFileSync(
    target,
    `/**
 * Standardisation constants of MfccEmbedding: mean, standard deviation and weight of each raw
 * statistic (RAW_LAYOUT order) over ${CALIBRATION_VOICES.length} synthetic voices, ${vectors} vectors.
 * Generated by calibrateMfcc.ts (which documents the corpus and method); do not edit by hand.
 * Changing features or corpus changes \`version\`, and with it the embedding's name.
 */
export const MFCC_CALIBRATION = {
  version: "cal1-${CALIBRATION_VOICES.length}v${vectors}",
  mean: ${JSON.stringify(mean.map(round))} as ReadonlyArray<number>,
  std: ${JSON.stringify(std.map(round))} as ReadonlyArray<number>,
  weight: ${JSON.stringify(weight.map(round))} as ReadonlyArray<number>
}
`
  )
  console.log(`wrote ${target}: ${CALIBRATION_VOICES.length} voices, ${vectors} vectors`)
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) await main()
