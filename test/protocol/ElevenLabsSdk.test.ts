/**
 * The official ElevenLabs JavaScript SDK against the running service (baseUrl = site/api): the
 * text-to-speech calls and the v1 voice calls must parse, since the SDK validates responses and
 * throws on a missing required field even with status 200 (ARCHITECTURE: SDK facts).
 */
import { ElevenLabsClient, ElevenLabsError } from "@elevenlabs/elevenlabs-js"
import t, { type Test } from "tap"
import { bytesLEToInt16, int16ToFloat, rms } from "../../engines/audio/Pcm.ts"
import { parseWav } from "../../engines/audio/Wav.ts"
import { startTestService } from "../support/service.ts"

const service = await startTestService(t, { WORKERS: "2" })
const { apiKey } = await service.newUser(1_000_000)
// No retries: a 5xx must show up as a failure here, not be hidden by the SDK trying again.
const client = new ElevenLabsClient({ apiKey, baseUrl: `${service.siteUrl}/api`, maxRetries: 0 })

const VOICE = "mari"
const TEXT = "Tere hommikust, kallis sõber. Täna on ilus ja päikeseline ilm."
const SPEECH_RMS = 0.01

const collect = async (stream: ReadableStream<Uint8Array>): Promise<Uint8Array> => {
  const chunks: Array<Uint8Array> = []
  for await (const chunk of stream as unknown as AsyncIterable<Uint8Array>) chunks.push(chunk)
  return Buffer.concat(chunks)
}

const pcmLevel = (bytes: Uint8Array) => rms(int16ToFloat(bytesLEToInt16(bytes)))

/** The SDK's error for a call that must fail, or a failed assertion if it did not. */
const sdkError = async (t: Test, call: () => Promise<unknown>): Promise<ElevenLabsError | undefined> => {
  try {
    await call()
    t.fail("the call should have failed")
  } catch (e) {
    t.ok(e instanceof ElevenLabsError, `an ElevenLabsError (${(e as Error).message.split("\n")[0]})`)
    return e as ElevenLabsError
  }
  return undefined
}

t.test("textToSpeech.convert with pcm_24000: raw s16le speech", async (t) => {
  const bytes = await collect(await client.textToSpeech.convert(VOICE, { text: TEXT, outputFormat: "pcm_24000" }))
  t.equal(bytes.length % 2, 0, "whole 16-bit samples")
  t.ok(bytes.length / 2 / 24000 > 1, `${(bytes.length / 2 / 24000).toFixed(2)} s of audio`)
  t.ok(pcmLevel(bytes) > SPEECH_RMS, `not silent (rms ${pcmLevel(bytes).toFixed(3)})`)
  t.notMatch(Buffer.from(bytes.subarray(0, 4)).toString("latin1"), "RIFF", "no WAV header")
})

t.test("textToSpeech.convert with wav_16000 and ulaw_8000, and the raw response headers", async (t) => {
  const { data, rawResponse } = await client.textToSpeech.convert(VOICE, { text: TEXT, outputFormat: "wav_16000" }).withRawResponse()
  const wav = parseWav(await collect(data))
  t.equal(wav.sampleRate, 16000)
  t.ok(rms(wav.channelData[0]!) > SPEECH_RMS)
  t.equal(rawResponse.headers.get("x-audio-sample-rate"), "16000")
  t.ok(Number(rawResponse.headers.get("x-audio-duration-ms")) > 1000, "x-audio-duration-ms reaches the caller")
  const ulaw = await collect(await client.textToSpeech.convert(VOICE, { text: TEXT, outputFormat: "ulaw_8000" }))
  t.ok(Math.abs(ulaw.length - (wav.channelData[0]!.length / 2)) <= 8, "µ-law: one byte per 8 kHz sample, same duration")
})

t.test("textToSpeech.stream: sentence-streamed audio equals convert's", async (t) => {
  const streamed = await collect(await client.textToSpeech.stream(VOICE, { text: TEXT, outputFormat: "pcm_24000" }))
  const whole = await collect(await client.textToSpeech.convert(VOICE, { text: TEXT, outputFormat: "pcm_24000" }))
  t.ok(pcmLevel(streamed) > SPEECH_RMS, "streamed audio is speech")
  t.equal(streamed.length, whole.length, "same length as the synchronous call")
  t.ok(Buffer.from(streamed).equals(whole), "same bytes")
})

t.test("textToSpeech.convertWithTimestamps parses; alignment spells the text", async (t) => {
  const res = await client.textToSpeech.convertWithTimestamps(VOICE, { text: TEXT, outputFormat: "pcm_24000" })
  const audio = Buffer.from(res.audioBase64, "base64")
  t.ok(pcmLevel(audio) > SPEECH_RMS, "audio_base64 decodes to speech")
  const a = res.alignment
  if (a === undefined || a === null) return t.fail("alignment missing")
  t.equal(a.characters.join(""), TEXT, "characters spell the text")
  t.equal(a.characterStartTimesSeconds.length, TEXT.length)
  t.equal(a.characterEndTimesSeconds.length, TEXT.length)
  t.ok(a.characterEndTimesSeconds.at(-1)! <= audio.length / 2 / 24000 + 0.001, "times inside the audio")
  t.same(res.normalizedAlignment, a, "normalizedAlignment parsed too")
})

t.test("textToSpeech.streamWithTimestamps parses every chunk", async (t) => {
  const stream = await client.textToSpeech.streamWithTimestamps(VOICE, { text: TEXT, outputFormat: "pcm_24000" })
  const chunks: Array<{ audioBase64: string; characters: Array<string> }> = []
  for await (const chunk of stream) chunks.push({ audioBase64: chunk.audioBase64, characters: chunk.alignment?.characters ?? [] })
  t.equal(chunks.length, 2, "one chunk per sentence")
  t.equal(chunks.flatMap((c) => c.characters).join(""), TEXT, "chunk alignments spell the text")
  t.ok(pcmLevel(Buffer.concat(chunks.map((c) => Buffer.from(c.audioBase64, "base64")))) > SPEECH_RMS)
})

t.test("voices.getAll and voices.get parse", async (t) => {
  const { voices } = await client.voices.getAll()
  t.ok(voices.length >= 130, `${voices.length} voices`)
  const first = voices[0]!
  t.match(first, { voiceId: /^[a-z]+$/, name: String, category: "premade", previewUrl: /^http/ }, "first voice, camelCased by the SDK")
  t.equal(first.labels?.language, "et", "labels parsed")
  const one = await client.voices.get("emma-en")
  t.match(one, { voiceId: "emma-en", category: "premade", labels: { language: "en" } })
})

t.test("voices.search (GET /v2/voices) filters and pages the way the SDK expects", async (t) => {
  const first = await client.voices.search({ pageSize: 5, voiceType: "default", language: "en" })
  t.equal(first.voices.length, 5)
  t.ok(first.voices.every((v) => v.category === "premade" && v.labels?.language === "en"), "English presets only")
  t.equal(first.hasMore, true)
  t.ok(first.totalCount > 5, `${first.totalCount} English presets`)
  const second = await client.voices.search({ pageSize: 5, voiceType: "default", language: "en", nextPageToken: first.nextPageToken! })
  t.notOk(second.voices.some((v) => first.voices.some((f) => f.voiceId === v.voiceId)), "the next page does not repeat the first")
  const named = await client.voices.search({ search: "emma" })
  t.ok(named.voices.some((v) => v.voiceId === "emma-en"), "search finds emma-en")
  t.equal((await sdkError(t, () => client.voices.search({ pageSize: 500 })))?.statusCode, 400)
})

t.test("user.get and user.subscription.get parse; the limit is the balance and falls as credits are spent", async (t) => {
  const { apiKey: ownKey, userId } = await service.newUser(5_000)
  const own = new ElevenLabsClient({ apiKey: ownKey, baseUrl: `${service.siteUrl}/api`, maxRetries: 0 })
  const user = await own.user.get()
  t.equal(user.userId, userId)
  t.equal(user.subscription.characterLimit - user.subscription.characterCount, 5_000, "remaining = limit − count = the balance")
  t.equal(user.subscription.status, "active")
  t.type(user.createdAt, "number")
  await collect(await own.textToSpeech.convert(VOICE, { text: "Tere!", outputFormat: "pcm_16000" }))
  const after = await own.user.subscription.get()
  t.equal(after.characterLimit - after.characterCount, 5_000 - "Tere!".length, "5 characters spent")
  t.equal(after.voiceSlotsUsed, 0, "no clones")
  const anonymous = new ElevenLabsClient({ apiKey: "", baseUrl: `${service.siteUrl}/api`, maxRetries: 0 })
  t.equal((await sdkError(t, () => anonymous.user.get()))?.statusCode, 401)
})

t.test("voices.settings.getDefault and voices.settings.get parse", async (t) => {
  const defaults = await client.voices.settings.getDefault()
  t.equal(defaults.speed, 1)
  t.same(await client.voices.settings.get("emma-en"), defaults, "every voice reports the defaults")
  t.equal((await sdkError(t, () => client.voices.settings.get("no-such-voice")))?.statusCode, 404)
})

t.test("errors surface as the SDK's error types with the status", async (t) => {
  const unknown = await sdkError(t, () => client.voices.get("no-such-voice"))
  t.equal(unknown?.statusCode, 404)
  const mp3 = await sdkError(t, () => client.textToSpeech.convert(VOICE, { text: TEXT, outputFormat: "mp3_44100_128" }))
  t.equal(mp3?.statusCode, 415, "MP3 is refused with 415")
  t.match(mp3?.body, { detail: { status: "unsupported_output_format" } }, "the error body reaches the caller")
  const tooLong = await sdkError(t, () => client.textToSpeech.convert(VOICE, { text: "a".repeat(8001) }))
  t.equal(tooLong?.statusCode, 400)
  t.match(tooLong?.body, { detail: { status: "text_too_long" } })
  const anonymous = new ElevenLabsClient({ apiKey: "sk_svc_wrong", baseUrl: `${service.siteUrl}/api`, maxRetries: 0 })
  t.equal((await sdkError(t, () => anonymous.voices.getAll()))?.statusCode, 401)
})
