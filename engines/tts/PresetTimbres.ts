/**
 * A catalogue preset's engine voice in any catalogue language, distinct from every other preset's
 * in that language: the same text in the same language never sounds the same on two presets.
 *
 * Why: the WebSocket defaults every session to Estonian (SPEC 4.2), and the old rule (espeak
 * presets keep their variant, pitch and rate on the language's espeak voice; Flite presets become
 * `+f3`/`+m3` of their gender) made ~50 presets byte-identical in each language (emma-en, layla-ar,
 * greta-de... all became et+f3 at pitch 1, rate 1, i.e. mari). Now, per language:
 *   1. the language's own presets keep their voice unchanged;
 *   2. every other preset, in catalogue order, takes its own timbre (espeak: its variant, pitch and
 *      rate; Flite: the espeak variant of its gender, pitch 1, rate 1) on the language's espeak
 *      voice if no earlier preset sounds like that; otherwise the nearest free one: pitch moved
 *      in steps of 3 espeak pitch units (6 %) up to ±12 units, then rate in steps of 6 %, then
 *      the other variants of the same gender.
 * Deterministic (catalogue order), so the same preset, language and text give the same bytes.
 * "Sounds like" compares what espeak is given: the voice name, the pitch parameter
 * round(50 × pitch) and the rate round(175 × rate) wpm, so two voices distinct here are distinct
 * to espeak at speed 1 (pitch, the first thing moved, does not depend on the speed).
 * Hazard: a preset inserted into the middle of the catalogue can move later presets' timbres in
 * other languages; append new presets.
 */
import { languageInfo, PRESET_VOICES, type PresetVoice } from "./Voices.ts"
import type { EngineVoice } from "./TtsEngine.ts"

/** espeak's base-pitch parameter is 50 × pitch, an integer 0–100 (EspeakTts.params). */
const PITCH_UNITS = 50
/** espeak's default rate, wpm (EspeakTts: 175 × rate × speed). */
const RATE_WPM = 175
const PITCH_STEPS = [0, 3, -3, 6, -6, 9, -9, 12, -12]
const RATE_STEPS = [0, 0.06, -0.06, 0.12, -0.12]
const VARIANTS = { female: ["f3", "f1", "f2", "f4", "f5"], male: ["m3", "m1", "m2", "m4", "m5", "m6", "m7"] } as const

/** What the engine is given, as a comparable key (see the module comment). */
export const soundKey = (v: EngineVoice): string =>
  v.engine === "espeak"
    ? `espeak:${v.variant}:${Math.round(PITCH_UNITS * v.pitch)}:${Math.round(RATE_WPM * v.rate)}`
    : `${v.engine}:${v.variant}:${v.pitch}:${v.rate}`

const genderOf = (preset: PresetVoice): "female" | "male" => (preset.labels.gender === "female" ? "female" : "male")

/** The preset's own timbre: espeak variant suffix, pitch and rate. */
const ownTimbre = (preset: PresetVoice) => {
  const ev = preset.engineVoice
  const suffix = ev.engine === "espeak" ? ev.variant.split("+")[1] : undefined
  return ev.engine === "espeak"
    ? { suffix: suffix ?? VARIANTS[genderOf(preset)][0], pitch: ev.pitch, rate: ev.rate }
    : { suffix: VARIANTS[genderOf(preset)][0], pitch: 1, rate: 1 }
}

/** Candidate voices for `preset` on `espeak` (a language's espeak voice), nearest first. */
function* candidates(preset: PresetVoice, language: string, espeak: string): Generator<EngineVoice> {
  const own = ownTimbre(preset)
  const suffixes = [own.suffix, ...VARIANTS[genderOf(preset)].filter((s) => s !== own.suffix)]
  const units = Math.round(PITCH_UNITS * own.pitch)
  for (const suffix of suffixes) {
    for (const dr of RATE_STEPS) {
      for (const dp of PITCH_STEPS) {
        const pitch = (units + dp) / PITCH_UNITS
        const rate = Math.round((own.rate + dr) * 100) / 100
        if (pitch > 0 && pitch <= 2 && rate > 0 && rate <= 2) yield { engine: "espeak", language, variant: `${espeak}+${suffix}`, pitch, rate }
      }
    }
  }
}

const tables = new Map<string, ReadonlyMap<string, EngineVoice>>()

/** Every catalogue preset's engine voice in `language` (a catalogue code), built once per language. */
export const presetVoicesIn = (language: string): ReadonlyMap<string, EngineVoice> => {
  const cached = tables.get(language)
  if (cached !== undefined) return cached
  const row = languageInfo(language)
  if (row === undefined) throw new Error(`presetVoicesIn: unknown language ${language}`)
  const table = new Map<string, EngineVoice>()
  const taken = new Set<string>()
  for (const preset of PRESET_VOICES) {
    if (preset.engineVoice.language !== language) continue
    table.set(preset.voiceId, preset.engineVoice)
    taken.add(soundKey(preset.engineVoice))
  }
  for (const preset of PRESET_VOICES) {
    if (table.has(preset.voiceId)) continue
    let chosen: EngineVoice | undefined
    for (const candidate of candidates(preset, language, row.espeak)) {
      if (!taken.has(soundKey(candidate))) {
        chosen = candidate
        break
      }
    }
    // 5 (female) or 7 (male) variants × 45 pitch/rate steps each: far more than any language needs.
    if (chosen === undefined) throw new Error(`presetVoicesIn: no free timbre for ${preset.voiceId} in ${language}`)
    table.set(preset.voiceId, chosen)
    taken.add(soundKey(chosen))
  }
  tables.set(language, table)
  return table
}

/** `voiceId`'s engine voice in `language`; undefined when it is not a catalogue preset (Piper, clones). */
export const presetVoiceIn = (voiceId: string, language: string): EngineVoice | undefined => presetVoicesIn(language).get(voiceId)
