import t from "tap"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { EspeakRuntime } from "../../../engines/tts/EspeakRuntime.ts"
import { phonemeIds, phonemizeLikePiper, PiperTts } from "../../../engines/tts/PiperTts.ts"
import type { EngineVoice } from "../../../engines/tts/TtsEngine.ts"
import { HOP, phonemeIdMap, SAMPLE_RATE, writeTinyVoice } from "./tinyPiperModel.ts"
import { reasonOf, runTtsConformance } from "./ttsConformance.ts"

const dir = mkdtempSync(path.join(os.tmpdir(), "piper-test-"))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
writeTinyVoice(dir, "en_US-tiny-x_low")
writeTinyVoice(dir, "et_EE-tiny-multi", { speakers: 3, espeakVoice: "et", languageCode: "et_EE" })
writeFileSync(path.join(dir, "orphan.onnx"), "no config next to it")
const engine = await PiperTts.load({ directory: dir })
const english: EngineVoice = { engine: "piper", language: "en", variant: "en_US-tiny-x_low", pitch: 1, rate: 1 }
const estonian: EngineVoice = { engine: "piper", language: "et", variant: "et_EE-tiny-multi:speaker1", pitch: 1, rate: 1 }

t.test("conformance: single-speaker model", async (t) => {
  runTtsConformance(t, { engine, voice: english, text: "Hello world, how are you? I am fine, thank you very much." })
})

t.test("conformance: multi-speaker model with sid", async (t) => {
  runTtsConformance(t, { engine, voice: estonian, text: "Tere hommikust, kallis sõber! Kuidas sul täna läheb?" })
})

t.test("directory scan: models, languages, rates, skipped files", async (t) => {
  t.same(engine.models, ["en_US-tiny-x_low", "et_EE-tiny-multi"])
  t.same(engine.capabilities.languages, ["en", "et"])
  t.same(engine.capabilities.sampleRates, [SAMPLE_RATE])
  t.equal(engine.capabilities.timing, "estimated")
  t.same(engine.skipped.map((s) => s.file), ["orphan.onnx"])
  t.equal(await reasonOf(PiperTts.load({ directory: path.join(dir, "missing") })), "EngineUnavailable")
})

t.test("speakers: by name, by number, unknown", async (t) => {
  const a = await engine.synthesize({ text: "Tere!", voice: { ...estonian, variant: "et_EE-tiny-multi:speaker0" }, speed: 1 })
  const b = await engine.synthesize({ text: "Tere!", voice: { ...estonian, variant: "et_EE-tiny-multi:2" }, speed: 1 })
  t.equal(a.samples.length, b.samples.length)
  t.notOk(Buffer.from(a.samples.buffer).equals(Buffer.from(b.samples.buffer)), "sid reaches the model")
  t.equal(await reasonOf(engine.synthesize({ text: "Tere!", voice: { ...estonian, variant: "et_EE-tiny-multi:speaker9" }, speed: 1 })), "VoiceNotFound")
})

t.test("ids follow Piper's layout and the audio length follows the ids", async (t) => {
  const runtime = await EspeakRuntime.load()
  const phonemes = runtime.withVoice("en-us", { rateWpm: 175, pitch: 50 }, (s) => phonemizeLikePiper(s, "Hello world, how are you?"))
  t.match(phonemes, /^h.*l.*w.*d, h.*\?$/u, phonemes)
  t.notMatch(phonemes, /[_|]/u, "no espeak separators")
  const map = new Map(Object.entries(phonemeIdMap()))
  const ids = phonemeIds({ idMap: map }, "ab")
  const [pad, bos, eos, a, b] = ["_", "^", "$", "a", "b"].map((s) => map.get(s)![0]!)
  t.same(ids, [bos, pad, a, pad, b, pad, eos])
  const r = await engine.synthesize({ text: "Hello world, how are you?", voice: english, speed: 1 })
  const expected = phonemeIds({ idMap: map }, phonemes).length * HOP
  t.ok(Math.abs(r.samples.length - expected) <= HOP, `${r.samples.length} samples ≈ ${expected}`)
})
