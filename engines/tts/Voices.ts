/**
 * Lookups over the preset voice catalogue (data in VoiceCatalogue.ts).
 *
 * The catalogue is validated when this module loads (unique ids, id shape per language, first
 * preset Estonian, every language known), so a bad edit fails at start-up, not on a request.
 * Whether each espeak voice/variant exists in the installed build is checked by the test suite
 * (it needs the WASM module, which this data module must not load).
 */
import type { EngineVoice } from "./TtsEngine.ts"
import { TtsError } from "./TtsEngine.ts"
import { LANGUAGES, PRESETS, type LanguageRow, type PresetRow } from "./VoiceCatalogue.ts"

export type { LanguageRow } from "./VoiceCatalogue.ts"

export interface PresetVoice {
  readonly voiceId: string
  readonly name: string
  readonly category: "premade"
  readonly description: string
  readonly labels: { readonly gender: string; readonly accent: string; readonly language: string; readonly engine: string }
  readonly engineVoice: EngineVoice
}

const ENGINE_LABEL = { espeak: "espeak-ng", flite: "flite" } as const
const ENGINE_KIND = { espeak: "formant synthesis", flite: "statistical parametric / diphone synthesis" } as const

const languageByCode = new Map(LANGUAGES.map((l) => [l.code, l]))

const toPreset = (row: PresetRow): PresetVoice => {
  const language = languageByCode.get(row.language)
  if (language === undefined) throw new Error(`voice catalogue: ${row.id} uses unknown language ${row.language}`)
  return {
    voiceId: row.id,
    name: row.name,
    category: "premade",
    description: `${row.name}: ${language.name} ${row.gender} voice, ${row.accent} accent; ${ENGINE_LABEL[row.engine]} ${ENGINE_KIND[row.engine]} (${row.voice}).`,
    labels: { gender: row.gender, accent: row.accent, language: row.language, engine: ENGINE_LABEL[row.engine] },
    engineVoice: { engine: row.engine, language: row.language, variant: row.voice, pitch: row.pitch, rate: row.rate }
  }
}

/** Problems with the catalogue data; empty when it is valid. */
export const catalogueProblems = (presets: ReadonlyArray<PresetRow> = PRESETS): Array<string> => {
  const problems: Array<string> = []
  const seen = new Set<string>()
  for (const row of presets) {
    if (seen.has(row.id)) problems.push(`duplicate id ${row.id}`)
    seen.add(row.id)
    const shape = row.language === "et" ? /^[a-z]+$/ : new RegExp(`^[a-z]+-${row.language}$`)
    if (!shape.test(row.id)) problems.push(`id ${row.id} does not match ${shape} for language ${row.language}`)
    if (!languageByCode.has(row.language)) problems.push(`${row.id}: unknown language ${row.language}`)
    if (!(row.pitch > 0 && row.pitch <= 2 && row.rate > 0 && row.rate <= 2)) problems.push(`${row.id}: pitch/rate out of (0, 2]`)
  }
  if (presets[0]?.language !== "et") problems.push("the first preset (the default) must be Estonian")
  return problems
}

const problems = catalogueProblems()
if (problems.length > 0) throw new Error(`voice catalogue is invalid:\n  ${problems.join("\n  ")}`)

/** Every preset, in catalogue order (the order GET /voices lists them). */
export const PRESET_VOICES: ReadonlyArray<PresetVoice> = PRESETS.map(toPreset)
const byId = new Map(PRESET_VOICES.map((v) => [v.voiceId, v]))

/** The default voice_id: the first preset (Estonian). */
export const DEFAULT_VOICE_ID: string = PRESET_VOICES[0]!.voiceId

export const findPreset = (voiceId: string): PresetVoice | undefined => byId.get(voiceId)

/** Like `findPreset`, but an unknown id is a TtsError VoiceNotFound (404 at the edge). */
export const getPreset = (voiceId: string): PresetVoice => {
  const v = byId.get(voiceId)
  if (v === undefined) throw new TtsError("VoiceNotFound", `no preset voice "${voiceId}"`)
  return v
}

export const presetsForLanguage = (code: string): ReadonlyArray<PresetVoice> => PRESET_VOICES.filter((v) => v.engineVoice.language === code)

export const LANGUAGE_ROWS: ReadonlyArray<LanguageRow> = LANGUAGES

export const languageInfo = (code: string): LanguageRow | undefined => languageByCode.get(code)

/**
 * Resolves a language given as an ISO 639-1 code or an English name, case-insensitively
 * ("et", "ET", "Estonian"), as the WebSocket `language` parameter allows. Undefined if unknown.
 */
export const resolveLanguage = (value: string): string | undefined => {
  const v = value.trim().toLowerCase()
  if (languageByCode.has(v)) return v
  const primary = v.split(/[-_]/)[0]!
  if (languageByCode.has(primary)) return primary
  return LANGUAGES.find((l) => l.name.toLowerCase() === v)?.code
}
