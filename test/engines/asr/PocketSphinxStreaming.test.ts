/**
 * The PocketSphinx streaming layer on its own (no pool): decoders are reused across sessions of
 * a thread, and a decoder that has decoded live blocks keeps live CMN for good (sphinxbase's
 * feat_cmn), so a final pass on it gave words that depended on what it had decoded before. The
 * committed words must be the synchronous recognizer's whatever came before; reset and close
 * give the decoder back.
 */
import t from "tap"
import { mulawEncode } from "../../../engines/audio/Mulaw.ts"
import { InputPcm } from "../../../engines/audio/InputPcm.ts"
import { concatInt16, floatToInt16, int16ToFloat } from "../../../engines/audio/Pcm.ts"
import { resample } from "../../../engines/audio/Resampler.ts"
import { PocketSphinxAsr } from "../../../engines/asr/PocketSphinxAsr.ts"
import { pocketSphinxDecoderStats, pocketSphinxStreaming } from "../../../engines/asr/PocketSphinxStreaming.ts"
import type { StreamingDecoder } from "../../../engines/asr/StreamingAsr.ts"
import { pcmOf } from "../../support/librivoxSpeech.ts"

const DIR = "/usr/share/pocketsphinx/test/data/librivox"
const recording = (id: string) => {
  const bytes = pcmOf(`${DIR}/sense_and_sensibility_01_austen_64kb-${id}.wav`)
  return new Int16Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength))
}
const [A, B, C] = [recording("0870"), recording("0880"), recording("0930")]
const phone = (pcm: Int16Array) => new InputPcm("ulaw_8000").push(mulawEncode(floatToInt16(resample(int16ToFloat(pcm), 16000, 8000))))

const sync = await PocketSphinxAsr.load()
t.teardown(() => sync.dispose())
const syncText = async (pcm: Int16Array) => (await sync.recognize(pcm)).words.map((w) => w.text).join(" ")

const engine = pocketSphinxStreaming({ releaseAfterMs: 0 })
const feed = async (d: StreamingDecoder, pcm: Int16Array) => {
  for (let at = 0; at < pcm.length; at += 1600) await d.push(pcm.subarray(at, Math.min(pcm.length, at + 1600)))
}

t.test("committed words are the synchronous ones whatever the decoders decoded before", async (t) => {
  const first = engine.open({ sampleRate: 16000, language: "en" })
  for (const pcm of [B, A, C]) {
    await feed(first, pcm)
    await first.commit()
  }
  first.close()
  // A second session takes the decoder the first gave back, with its CMN history.
  const second = engine.open({ sampleRate: 16000, language: "en" })
  for (const pcm of [phone(A), phone(C), A]) {
    await feed(second, pcm)
    const words = (await second.commit()).words.map((w) => w.text).join(" ")
    t.equal(words, await syncText(pcm), `the synchronous words (${words})`)
  }
  second.close()
})

t.test("reset and close give the decoder back", async (t) => {
  const d = engine.open({ sampleRate: 16000 })
  await feed(d, A.subarray(0, 16000))
  t.equal(pocketSphinxDecoderStats().inUse, 1, "an utterance holds a decoder")
  d.reset()
  t.equal(pocketSphinxDecoderStats().inUse, 0, "reset gives it back")
  await feed(d, B)
  const c = await d.commit()
  t.equal(c.startMs, 1000, "the clock kept running through the reset")
  t.ok(c.words.length > 0 && c.words[0]!.startMs >= 1000, "words on the session clock")
  await feed(d, B.subarray(0, 8000))
  d.close()
  t.equal(pocketSphinxDecoderStats().inUse, 0, "close mid-utterance gives it back")
  await t.rejects(d.push(B.subarray(0, 160)), "a closed decoder refuses audio")
})

const silence = new Int16Array(24000) // 1.5 s: a VAD commit's default silence threshold
const joined = (...parts: Array<Int16Array>) => concatInt16(parts)
const text = (c: { words: ReadonlyArray<{ text: string }> }) => c.words.map((w) => w.text).join(" ")

t.test("a prepared final pass (the VAD's pause) commits the words a plain commit gives", async (t) => {
  for (const [name, pcm] of [["0870", A], ["0930", C], ["0870 µ-law", phone(A)]] as const) {
    const plain = engine.open({ sampleRate: 16000, language: "en" })
    await feed(plain, joined(pcm, silence))
    const expected = await plain.commit()
    plain.close()
    const early = engine.open({ sampleRate: 16000, language: "en" })
    await feed(early, pcm)
    await early.prepare()
    // The silence threshold runs: more audio reaches the live decoder after the prepare.
    await feed(early, silence)
    const got = await early.commit({ prepared: true })
    early.close()
    // The prepared pass decodes the utterance up to its pause: the synchronous recognizer's words of
    // that audio. A plain commit decodes the trailing silence too, which moves whole-utterance CMN:
    // with 1.5 s of digital silence its words differ (printed), which is why they are not the bar.
    t.equal(text(got), await syncText(pcm), `${name}: the synchronous words of the audio up to the pause (${text(got)})`)
    t.comment(`${name}: a plain commit of the same stream (1.5 s of digital silence included): "${text(expected)}"`)
    t.same([got.startMs, got.endMs], [expected.startMs, expected.endMs], "the utterance spans all its audio, the silence included")
  }
})

t.test("speech resumed after a prepare is not lost: the plain commit decodes all of it", async (t) => {
  const d = engine.open({ sampleRate: 16000, language: "en" })
  await feed(d, A)
  await d.prepare()
  await feed(d, B)
  const got = await d.commit()
  d.close()
  t.equal(text(got), await syncText(joined(A, B)), `the words of both parts (${text(got)})`)
  t.ok(got.words.at(-1)!.endMs > (A.length / 16), "its last words are in the resumed speech")
})
