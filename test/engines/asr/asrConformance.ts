/**
 * Shared conformance suite: every AsrEngine implementation runs this (PocketSphinxAsr.test.ts
 * now; a neural engine later). The text-to-speech → speech-to-text round trip with Flite's
 * English voices is the speech test: corpus word error rate under `maxWer` (20 %) over a fixed
 * set of sentences, per voice and overall; plus the contract of engines/asr/AsrEngine.ts (word
 * order, times inside the audio, confidences, languages, silence, Int16 = Float32 input).
 */
import type { Test } from "tap"
import { concatInt16, int16ToFloat } from "../../../engines/audio/Pcm.ts"
import { ASR_SAMPLE_RATE, AsrError, type AsrEngine, type AsrResult } from "../../../engines/asr/AsrEngine.ts"
import { SENTENCES, speak, VOICES, type Utterance } from "./speechFixtures.ts"
import { normalizeWords, tally, wer, type WerTally } from "./wer.ts"

export interface AsrConformanceCase {
  readonly engine: AsrEngine
  /** Default 0.2. */
  readonly maxWer?: number
}

export interface AsrMeasurements {
  /** Recognition wall time / audio duration over the round trip. */
  rtf: number
  werByVoice: Record<string, number>
  wer: number
}

/** The AsrError reason a promise rejects with ("resolved" / "not an AsrError" otherwise). */
export const asrReasonOf = (p: Promise<unknown>): Promise<string> =>
  p.then(
    () => "resolved",
    (e: unknown) => (AsrError.is(e) ? e.reason : `not an AsrError: ${String(e)}`)
  )

const durationMs = (pcm: Int16Array) => (pcm.length * 1000) / ASR_SAMPLE_RATE

/** Times in order, inside the audio; confidences in range and consistent with logprob. */
export const checkWords = (t: Test, result: AsrResult, audioMs: number, label: string): void => {
  let previousEnd = 0
  let ok = true
  for (const w of result.words) {
    const fine = w.text.length > 0 && w.startMs >= previousEnd && w.endMs >= w.startMs && w.endMs <= audioMs &&
      w.confidence >= 0 && w.confidence <= 1 && w.logprob <= 0 && Number.isFinite(w.logprob) &&
      Math.abs(Math.exp(w.logprob) - w.confidence) < 1e-6
    if (!fine) {
      ok = false
      t.fail(`${label}: bad word ${JSON.stringify(w)} after end ${previousEnd} in ${audioMs} ms of audio`)
    }
    previousEnd = w.endMs
  }
  if (ok) t.pass(`${label}: ${result.words.length} words monotonic, inside ${audioMs.toFixed(0)} ms, confidences consistent`)
}

export const runAsrConformance = async (t: Test, c: AsrConformanceCase): Promise<AsrMeasurements> => {
  const { engine } = c
  const maxWer = c.maxWer ?? 0.2
  const measured: AsrMeasurements = { rtf: NaN, werByVoice: {}, wer: NaN }
  const utterances: Array<Utterance> = []
  for (const voice of VOICES) for (const text of SENTENCES) utterances.push(await speak(text, voice))
  const results: Array<AsrResult> = []

  await t.test("round trip: Flite English voices → recognizer, WER under the bound", async (t) => {
    const all: Array<WerTally> = []
    let engineMs = 0
    let audioMs = 0
    for (const voice of VOICES) {
      const tallies: Array<WerTally> = []
      for (const u of utterances.filter((u) => u.voice === voice)) {
        const started = performance.now()
        const result = await engine.recognize(u.pcm)
        engineMs += performance.now() - started
        results[utterances.indexOf(u)] = result
        audioMs += durationMs(u.pcm)
        const hypothesis = result.words.map((w) => w.text).join(" ")
        const one = tally(u.text, hypothesis)
        if (one.errors > 0) t.comment(`${voice}: "${u.text}" → "${hypothesis}"`)
        tallies.push(one)
        checkWords(t, result, durationMs(u.pcm), `${voice} "${u.text.slice(0, 24)}…"`)
        t.ok(engine.capabilities.languages.includes(result.language), `language ${result.language} is one the engine has`)
      }
      measured.werByVoice[voice] = wer(tallies)
      t.ok(wer(tallies) < maxWer, `${voice}: WER ${(wer(tallies) * 100).toFixed(1)} % < ${maxWer * 100} %`)
      all.push(...tallies)
    }
    measured.wer = wer(all)
    measured.rtf = engineMs / audioMs
    t.ok(measured.wer < maxWer, `all voices: WER ${(measured.wer * 100).toFixed(1)} % over ${all.reduce((n, x) => n + x.words, 0)} words`)
  })

  await t.test("recognised words sit where the synthesizer put them", async (t) => {
    // Words recognised correctly are matched in order to Flite's own word timings.
    const errors: Array<number> = []
    for (const [i, u] of utterances.entries()) {
      const result = results[i] ?? (await engine.recognize(u.pcm)) // when run alone (--grep)
      const reference = u.words.map((w) => ({ ...w, norm: normalizeWords(w.text).join(" ") }))
      let k = 0
      for (const w of result.words) {
        const at = reference.findIndex((r, i) => i >= k && r.norm === w.text)
        if (at < 0) continue
        errors.push(Math.abs(w.startMs - reference[at]!.startMs))
        k = at + 1
      }
    }
    errors.sort((a, b) => a - b)
    const median = errors[errors.length >> 1]!
    const within = errors.filter((e) => e <= 100).length / errors.length
    t.comment(`start-time error vs Flite: median ${median} ms, ${(within * 100).toFixed(0)} % within 100 ms, max ${errors.at(-1)} ms over ${errors.length} words`)
    t.ok(within >= 0.9, "at least 90 % of matched words start within 100 ms of the synthesizer's word")
  })

  await t.test("leading silence shifts word times by its length", async (t) => {
    const u = utterances[0]!
    const lead = 1.5 * ASR_SAMPLE_RATE
    const plain = await engine.recognize(u.pcm)
    const padded = await engine.recognize(concatInt16([new Int16Array(lead), u.pcm]))
    t.same(padded.words.map((w) => w.text), plain.words.map((w) => w.text), "same words")
    const shifts = padded.words.map((w, i) => w.startMs - plain.words[i]!.startMs)
    t.ok(shifts.every((s) => Math.abs(s - 1500) <= 50), `every word moved by 1500 ± 50 ms (${shifts.join(", ")})`)
  })

  await t.test("Int16 and Float32 input give the same result, whatever ran before", async (t) => {
    const u = utterances[1]!
    const a = await engine.recognize(u.pcm)
    t.same(await engine.recognize(int16ToFloat(u.pcm)), a, "Float32 in [-1, 1]")
    await engine.recognize(utterances[utterances.length - 1]!.pcm) // another voice and sentence
    await engine.recognize(new Int16Array(ASR_SAMPLE_RATE))
    t.same(await engine.recognize(u.pcm), a, "the same audio after other audio: no state carried between calls")
  })

  await t.test("silence and empty input give no words", async (t) => {
    const empty = await engine.recognize(new Int16Array(0))
    t.same(empty.words, [])
    t.ok(engine.capabilities.languages.includes(empty.language))
    for (let i = 0; i < 2; i++) {
      const quiet = await engine.recognize(new Int16Array(2 * ASR_SAMPLE_RATE))
      t.same(quiet.words, [], "two seconds of digital silence")
      await engine.recognize(utterances[i]!.pcm)
    }
  })

  await t.test("languages: its own accepted with or without region, others refused", async (t) => {
    const u = utterances[2]!
    const language = engine.capabilities.languages[0]!
    t.equal((await engine.recognize(u.pcm, { language })).language, language)
    t.equal((await engine.recognize(u.pcm, { language: `${language.toUpperCase()}-XX` })).language, language)
    t.equal(await asrReasonOf(engine.recognize(u.pcm, { language: "zz" })), "UnsupportedLanguage")
  })

  return measured
}
