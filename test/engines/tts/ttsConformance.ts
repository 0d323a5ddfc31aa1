/**
 * Shared conformance suite: every TtsEngine implementation runs this with its own voice and text
 * (EspeakTts.test.ts, FliteTts.test.ts, PiperTts.test.ts). It checks the contract of
 * engines/tts/TtsEngine.ts, not the quality of a particular synthesizer.
 */
import type { Test } from "tap"
import { durationMs, rms } from "../../../engines/audio/Pcm.ts"
import { TtsError, type EngineVoice, type TtsEngine, type TtsResult } from "../../../engines/tts/TtsEngine.ts"

export interface ConformanceCase {
  readonly engine: TtsEngine
  readonly voice: EngineVoice
  /** A few sentences in the voice's language. */
  readonly text: string
  /** Plausible speech rate bounds at speed 1, ms of audio per character of text. */
  readonly msPerChar?: readonly [number, number]
  /** Minimum RMS (linear, full scale 1) for "not silent". */
  readonly minRms?: number
}

/** The TtsError reason a promise rejects with ("resolved" / "not a TtsError" otherwise). */
export const reasonOf = (p: Promise<unknown>): Promise<string> =>
  p.then(
    () => "resolved",
    (e: unknown) => (TtsError.is(e) ? e.reason : `not a TtsError: ${String(e)}`)
  )

const sameBytes = (a: Float32Array, b: Float32Array) =>
  a.length === b.length && Buffer.compare(Buffer.from(a.buffer, a.byteOffset, a.byteLength), Buffer.from(b.buffer, b.byteOffset, b.byteLength)) === 0

/** Word-like spans of the text by ICU rules: what "covering the words" is measured against. */
const wordSpans = (text: string, locale: string) =>
  [...new Intl.Segmenter(locale, { granularity: "word" }).segment(text)].filter((s) => s.isWordLike).map((s) => [s.index, s.index + s.segment.length] as const)

export const runTtsConformance = (t: Test, c: ConformanceCase): void => {
  const { engine, voice, text } = c
  const [minMs, maxMs] = c.msPerChar ?? [25, 250]
  const synth = (speed: number, overrides: Partial<{ text: string; voice: EngineVoice }> = {}) =>
    engine.synthesize({ text: overrides.text ?? text, voice: overrides.voice ?? voice, speed })

  let base: TtsResult
  t.before(async () => {
    base = await synth(1)
  })

  t.test("capabilities describe the voice", async (t) => {
    await t.resolves(Promise.resolve().then(() => engine.checkVoice(voice)), "checkVoice accepts the voice")
    t.ok(engine.capabilities.sampleRates.includes(engine.sampleRateFor(voice)), "voice rate is one of the declared rates")
    t.ok(engine.capabilities.languages.length > 0, "declares languages")
    t.ok(["word", "phone", "estimated"].includes(engine.capabilities.timing))
  })

  t.test("audio is non-empty, not silent, at the declared rate", async (t) => {
    t.ok(base.samples instanceof Float32Array, "Float32 samples")
    t.ok(base.samples.length > 0, "non-empty")
    t.equal(base.sampleRate, engine.sampleRateFor(voice), "rate as declared for the voice")
    t.ok(rms(base.samples) > (c.minRms ?? 0.01), `RMS ${rms(base.samples).toFixed(4)} above silence`)
    let finite = true
    for (const s of base.samples) if (!(s >= -1 && s <= 1)) finite = false
    t.ok(finite, "samples within [-1, 1]")
  })

  t.test("duration is plausible for the text length", async (t) => {
    const ms = durationMs(base.samples.length, base.sampleRate)
    const chars = text.length
    t.ok(ms >= chars * minMs && ms <= chars * maxMs, `${ms.toFixed(0)} ms for ${chars} chars within ${minMs}–${maxMs} ms/char`)
  })

  t.test("speed 2 is shorter than speed 0.5", async (t) => {
    const fast = await synth(2)
    const slow = await synth(0.5)
    const ratio = fast.samples.length / slow.samples.length
    t.ok(ratio < 0.6, `fast/slow length ratio ${ratio.toFixed(2)} < 0.6`)
    t.ok(fast.samples.length < base.samples.length && base.samples.length < slow.samples.length, "ordered by speed")
  })

  t.test("same input gives the same bytes, also after other requests", async (t) => {
    await synth(1.5, { text: "Something else entirely, to disturb any state." })
    const again = await synth(1)
    t.ok(sameBytes(base.samples, again.samples), "identical samples")
    t.same(again.words, base.words, "identical word timings")
  })

  t.test("word timings are monotonic, inside the audio and cover the words", async (t) => {
    const ms = durationMs(base.samples.length, base.sampleRate)
    const words = base.words
    t.ok(words.length > 0, "has word timings")
    let previousEnd = 0
    let previousChar = 0
    let ordered = true
    let inside = true
    let textMatches = true
    for (const w of words) {
      if (!(w.startMs >= previousEnd - 1e-9 && w.endMs >= w.startMs && w.charStart >= previousChar && w.charEnd > w.charStart)) ordered = false
      if (!(w.startMs >= 0 && w.endMs <= ms + 1e-6)) inside = false
      if (text.slice(w.charStart, w.charEnd) !== w.text) textMatches = false
      previousEnd = w.endMs
      previousChar = w.charEnd
    }
    t.ok(ordered, "non-overlapping, in text and time order")
    t.ok(inside, `all within [0, ${ms.toFixed(0)}] ms`)
    t.ok(textMatches, "text equals the slice at charStart..charEnd")
    const uncovered = wordSpans(text, voice.language).filter(([a, b]) => !words.some((w) => w.charStart < b && a < w.charEnd))
    t.same(uncovered.map(([a, b]) => text.slice(a, b)), [], "every word of the text has a timing")
    const spoken = words.reduce((sum, w) => sum + (w.endMs - w.startMs), 0)
    t.ok(spoken > 0.3 * ms, `words span ${((100 * spoken) / ms).toFixed(0)}% of the audio`)
  })

  t.test("bad requests are TtsErrors with a reason", async (t) => {
    t.equal(await reasonOf(synth(1, { text: "   " })), "InvalidRequest", "blank text")
    t.equal(await reasonOf(engine.synthesize({ text, voice, speed: 3 })), "InvalidRequest", "speed 3")
    t.equal(await reasonOf(engine.synthesize({ text, voice, speed: 0.25 })), "InvalidRequest", "speed 0.25")
    t.equal(await reasonOf(synth(1, { voice: { ...voice, variant: "no-such-voice-anywhere" } })), "VoiceNotFound", "unknown voice")
    const other = { ...voice, engine: voice.engine === "espeak" ? ("flite" as const) : ("espeak" as const) }
    t.equal(await reasonOf(Promise.resolve().then(() => engine.checkVoice(other))), "VoiceNotFound", "voice of another engine")
  })
}
