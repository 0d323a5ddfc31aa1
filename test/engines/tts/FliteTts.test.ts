import t from "tap"
import { asciiFold, FliteTts, parsePsdur } from "../../../engines/tts/FliteTts.ts"
import type { EngineVoice } from "../../../engines/tts/TtsEngine.ts"
import { reasonOf, runTtsConformance } from "./ttsConformance.ts"

const engine = await FliteTts.load()
t.teardown(() => engine.dispose())
const slt: EngineVoice = { engine: "flite", language: "en", variant: "slt", pitch: 1, rate: 1 }
const text = "Hello there, Dr. Smith! It's 12 o'clock, and the train to Boston leaves at 3:45. Please don't be late."

t.test("conformance: slt (16 kHz)", async (t) => {
  runTtsConformance(t, { engine, voice: slt, text })
})

t.test("conformance: kal (8 kHz diphone)", async (t) => {
  runTtsConformance(t, { engine, voice: { ...slt, variant: "kal" }, text: "The quick brown fox jumps over the lazy dog. Then it sleeps." })
})

t.test("voices come from the binary; rates per voice", async (t) => {
  for (const v of ["kal16", "slt", "rms", "awb", "kal"]) t.ok(engine.voices.includes(v), v)
  t.equal(engine.sampleRateFor({ ...slt, variant: "kal" }), 8000)
  for (const v of ["kal16", "slt", "rms", "awb"]) t.equal(engine.sampleRateFor({ ...slt, variant: v }), 16000, v)
  t.equal(await reasonOf(engine.synthesize({ text: "hi", voice: { ...slt, variant: "nosuch" }, speed: 1 })), "VoiceNotFound", "no silent fallback to kal")
  t.equal(await reasonOf(engine.synthesize({ text: "hi", voice: { ...slt, pitch: 1.2 }, speed: 1 }), ), "UnsupportedSetting")
  t.equal(await reasonOf(engine.synthesize({ text: "日本語", voice: slt, speed: 1 })), "InvalidRequest", "nothing speakable")
})

t.test("word timings follow Flite's own normalisation", async (t) => {
  const r = await engine.synthesize({ text: "It costs $5.50 on 3/4/2020, said Dr. Who.", voice: slt, speed: 1 })
  t.same(r.words.map((w) => w.text), ["It", "costs", "$5.50", "on", "3/4/2020", "said", "Dr", "Who"])
  const price = r.words[2]!
  const it = r.words[0]!
  t.ok(price.endMs - price.startMs > 2 * (it.endMs - it.startMs), "\"$5.50\" (five dollars fifty cents) lasts much longer than \"It\"")
})

t.test("long texts in one thread do not crash node:wasi (fast-call hazard)", async (t) => {
  const long = "Hello there, Dr. Smith! It's 12 o'clock. A whole joy was reaping. ".repeat(12)
  for (let i = 0; i < 3; i++) {
    const r = await engine.synthesize({ text: long, voice: { ...slt, variant: i % 2 ? "kal16" : "kal" }, speed: 2 })
    t.ok(r.samples.length > 0 && r.words.length > 100, `run ${i + 1}: ${r.words.length} words`)
  }
})

t.test("helpers", async (t) => {
  t.equal(asciiFold("Café “naïve” — ok…"), 'Cafe "naive" - ok...')
  t.equal(asciiFold("日本 x"), "   x")
  t.same(parsePsdur("pau:0.100 hh:0.150 ax:0.300 \npau:0.050 k:0.100\n"), [
    { name: "pau", startMs: 0, endMs: 100 },
    { name: "hh", startMs: 100, endMs: 150 },
    { name: "ax", startMs: 150, endMs: 300 },
    { name: "pau", startMs: 300, endMs: 350 },
    { name: "k", startMs: 350, endMs: 400 }
  ])
})

t.test("a disposed engine refuses calls (scratch directories live only for a call: FliteTtsReuse.test.ts)", async (t) => {
  const other = await FliteTts.load()
  other.dispose()
  t.equal(await reasonOf(other.synthesize({ text: "hi", voice: slt, speed: 1 })), "EngineUnavailable")
})
