/**
 * Issue 38, item 1: in every catalogue language, every preset's engine voice is distinct from
 * every other preset's, as espeak is given it (voice, pitch parameter, rate in wpm), so no two
 * presets make the same audio for the same text and language. Checked through the function the
 * service revoices with (actors/Synthesizer.ts `revoice`), over the whole catalogue.
 */
import t from "tap"
import { revoice, type ResolvedVoice } from "../../actors/Synthesizer.ts"
import { LANGUAGE_ROWS, PRESET_VOICES } from "../../engines/tts/Voices.ts"
import type { EngineVoice } from "../../engines/tts/TtsEngine.ts"

const key = (v: EngineVoice) =>
  v.engine === "espeak" ? `espeak:${v.variant}:${Math.round(50 * v.pitch)}:${Math.round(175 * v.rate)}` : `${v.engine}:${v.variant}:${v.pitch}:${v.rate}`

const inLanguage = (voiceId: string, language: string): EngineVoice => {
  const preset = PRESET_VOICES.find((v) => v.voiceId === voiceId)!
  const own: ResolvedVoice = { voiceId, kind: "preset", language: preset.engineVoice.language, engineVoice: preset.engineVoice }
  return language === own.language ? own.engineVoice : revoice(own, language, preset.labels.gender).engineVoice
}

t.test("for every language, all presets' engine voices are pairwise distinct", async (t) => {
  let clashes = 0
  for (const { code } of LANGUAGE_ROWS) {
    const owner = new Map<string, string>()
    for (const preset of PRESET_VOICES) {
      const k = key(inLanguage(preset.voiceId, code))
      const other = owner.get(k)
      if (other !== undefined) {
        clashes++
        if (clashes <= 5) t.fail(`${code}: ${preset.voiceId} sounds like ${other} (${k})`)
      }
      owner.set(k, preset.voiceId)
    }
  }
  t.equal(clashes, 0, `no clashes over ${LANGUAGE_ROWS.length} languages × ${PRESET_VOICES.length} presets`)
})

t.test("a preset keeps its timbre: its own voice at home, its variant elsewhere, and the same answer every time", async (t) => {
  t.same(inLanguage("mari", "et"), PRESET_VOICES[0]!.engineVoice, "at home, unchanged")
  const liisDe = inLanguage("liis", "de")
  t.equal(liisDe.variant, "de+f2", "liis keeps her variant on the German voice")
  t.same(inLanguage("liis", "de"), liisDe, "deterministic")
  const emma = inLanguage("emma-en", "et")
  const james = inLanguage("james-en", "et")
  t.match(emma.variant, /^et\+f/, "a female Flite preset becomes a female espeak variant")
  t.match(james.variant, /^et\+m/, "a male one a male variant")
  for (const v of [emma, james, inLanguage("layla-ar", "et"), inLanguage("greta-de", "et")]) {
    t.ok(v.pitch > 0.7 && v.pitch < 1.3 && v.rate > 0.8 && v.rate < 1.2, `${v.variant} ${v.pitch} ${v.rate} stays near its own timbre`)
  }
})
