import t from "tap"
import { durationMs, rms } from "../../../engines/audio/Pcm.ts"
import { EspeakRuntime } from "../../../engines/tts/EspeakRuntime.ts"
import { EspeakTts } from "../../../engines/tts/EspeakTts.ts"
import { FliteTts } from "../../../engines/tts/FliteTts.ts"
import type { TtsEngine } from "../../../engines/tts/TtsEngine.ts"
import { catalogueProblems, DEFAULT_VOICE_ID, findPreset, getPreset, languageInfo, LANGUAGE_ROWS, PRESET_VOICES, presetsForLanguage, resolveLanguage } from "../../../engines/tts/Voices.ts"
import { PRESETS } from "../../../engines/tts/VoiceCatalogue.ts"
import { reasonOf } from "./ttsConformance.ts"

t.test("catalogue shape", async (t) => {
  t.same(catalogueProblems(), [])
  t.ok(PRESET_VOICES.length >= 140 && PRESET_VOICES.length <= 170, `${PRESET_VOICES.length} presets`)
  t.equal(DEFAULT_VOICE_ID, PRESET_VOICES[0]!.voiceId)
  t.equal(PRESET_VOICES[0]!.engineVoice.language, "et", "default is Estonian")
  for (const v of PRESET_VOICES) {
    t.match(v.voiceId, v.engineVoice.language === "et" ? /^[a-z]+$/ : new RegExp(`^[a-z]+-${v.engineVoice.language}$`), v.voiceId)
    t.ok(v.name.length > 0 && v.description.includes(languageInfo(v.engineVoice.language)!.name), `${v.voiceId} has name and description`)
    t.ok(["female", "male"].includes(v.labels.gender) && v.labels.accent.length > 0 && v.labels.language === v.engineVoice.language)
  }
  t.ok(presetsForLanguage("et").length >= 8, "several Estonian presets")
  t.ok(new Set(PRESET_VOICES.map((v) => v.engineVoice.language)).size >= 90, "many languages")
  t.ok(PRESET_VOICES.filter((v) => v.engineVoice.language === "en").some((v) => v.engineVoice.engine === "flite"), "English uses Flite")
})

t.test("validation catches bad data", async (t) => {
  const [first, second] = PRESETS as [(typeof PRESETS)[0], (typeof PRESETS)[0]]
  const english = PRESETS.find((p) => p.language === "en")!
  t.match(catalogueProblems([english, first]).join("\n"), /first preset/)
  t.match(catalogueProblems([first, first]).join("\n"), /duplicate id mari/)
  t.match(catalogueProblems([first, { ...second, id: "hans-en", language: "de" }]).join("\n"), /does not match/)
  t.match(catalogueProblems([first, { ...second, id: "x-zz", language: "zz" }]).join("\n"), /unknown language zz/)
})

t.test("lookups", async (t) => {
  t.equal(findPreset("mari")?.engineVoice.variant, "et+f3")
  t.equal(findPreset("nobody"), undefined)
  t.equal(await reasonOf(Promise.resolve().then(() => getPreset("nobody"))), "VoiceNotFound")
  t.equal(getPreset("emma-en").engineVoice.engine, "flite")
  t.equal(resolveLanguage("Estonian"), "et")
  t.equal(resolveLanguage("ET"), "et")
  t.equal(resolveLanguage("en-US"), "en")
  t.equal(resolveLanguage("Klingon"), undefined)
})

t.test("every espeak voice id and language exists in this build", async (t) => {
  const runtime = await EspeakRuntime.load()
  for (const l of LANGUAGE_ROWS) t.doesNotThrow(() => runtime.checkVoiceId(l.espeak), `language ${l.code} → ${l.espeak}`)
  for (const v of PRESET_VOICES.filter((v) => v.engineVoice.engine === "espeak")) t.doesNotThrow(() => runtime.checkVoiceId(v.engineVoice.variant), v.voiceId)
})

t.test("every preset speaks its language's sample: non-silent, sensible length", async (t) => {
  const espeak = await EspeakTts.load()
  const flite = await FliteTts.load()
  t.teardown(() => flite.dispose())
  const engines: Record<string, TtsEngine> = { espeak, flite }
  for (const v of PRESET_VOICES) {
    const sample = languageInfo(v.engineVoice.language)!.sample
    const engine = engines[v.engineVoice.engine]!
    const r = await engine.synthesize({ text: sample, voice: v.engineVoice, speed: 1 })
    const ms = durationMs(r.samples.length, r.sampleRate)
    const level = rms(r.samples)
    t.ok(ms > 400 && ms < 10_000 && level > 0.01 && r.sampleRate === engine.sampleRateFor(v.engineVoice), `${v.voiceId}: ${ms.toFixed(0)} ms, RMS ${level.toFixed(3)}, ${r.sampleRate} Hz`)
  }
})
