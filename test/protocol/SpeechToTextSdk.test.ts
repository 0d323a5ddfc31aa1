/**
 * The official ElevenLabs JavaScript SDK's `speechToText.convert` against the running service
 * (baseUrl = site/api). The SDK builds the multipart body itself (file as a Blob or a stream,
 * booleans as "true", additional_formats as a JSON string) and validates the response, throwing
 * on a missing or mistyped field even with status 200 (ARCHITECTURE: SDK facts).
 */
import { ElevenLabsClient, ElevenLabsError, type ElevenLabs } from "@elevenlabs/elevenlabs-js"
import { createReadStream, writeFileSync } from "node:fs"
import * as path from "node:path"
import t, { type Test } from "tap"
import { scratchDir } from "../engines/asr/speechFixtures.ts"
import { normalizeWords } from "../engines/asr/wer.ts"
import { startTestService } from "../support/service.ts"

const service = await startTestService(t, { WORKERS: "2" })
const { apiKey } = await service.newUser(1_000_000)
// No retries: a 5xx must show up as a failure here, not be hidden by the SDK trying again.
const client = new ElevenLabsClient({ apiKey, baseUrl: `${service.siteUrl}/api`, maxRetries: 0 })

const SENTENCE = "Please call me back when you get this message."
const dir = scratchDir(t, "speech-stt-sdk-")

// The server's own Flite voice (emma-en), through the SDK as well.
const collect = async (stream: ReadableStream<Uint8Array>): Promise<Uint8Array> => {
  const chunks: Array<Uint8Array> = []
  for await (const chunk of stream as unknown as AsyncIterable<Uint8Array>) chunks.push(chunk)
  return Buffer.concat(chunks)
}
const wav = await collect(await client.textToSpeech.convert("emma-en", { text: SENTENCE, outputFormat: "wav_16000" }))
const wavFile = path.join(dir, "speech.wav")
writeFileSync(wavFile, wav)

/** The single-channel transcript of the SDK's union, or a failed assertion. */
const chunkOf = (t: Test, r: ElevenLabs.SpeechToTextConvertResponse): ElevenLabs.SpeechToTextChunkResponseModel => {
  t.ok("text" in r && "words" in r, "a single-channel transcript")
  return r as ElevenLabs.SpeechToTextChunkResponseModel
}

t.test("convert with a Blob, diarize and srt: the SDK parses the transcript", async (t) => {
  const result = chunkOf(t, await client.speechToText.convert({
    file: new Blob([wav], { type: "audio/wav" }),
    modelId: "scribe_v1",
    diarize: true,
    additionalFormats: [{ format: "srt" }]
  }))
  t.same(normalizeWords(result.text), normalizeWords(SENTENCE), `text: "${result.text}"`)
  t.equal(result.languageCode, "en")
  t.equal(result.languageProbability, 1)
  t.ok(result.words.length > 0)
  t.ok(result.words.every((w) => typeof w.speakerId === "string"), "every entry has a speakerId")
  t.ok(result.words.filter((w) => w.type === "word").every((w) => typeof w.start === "number" && typeof w.end === "number"), "words have start and end")
  t.type(result.transcriptionId, "string")
  const formats = result.additionalFormats ?? []
  t.equal(formats.length, 1)
  t.match(formats[0], { requestedFormat: "srt", fileExtension: "srt", contentType: "application/x-subrip", isBase64Encoded: false })
  t.match(formats[0]?.content ?? "", /^1\n\d{2}:\d{2}:\d{2},\d{3} --> \d{2}:\d{2}:\d{2},\d{3}\n/, "srt content")
})

t.test("convert with a ReadStream, timestamps none and every format", async (t) => {
  const result = chunkOf(t, await client.speechToText.convert({
    file: createReadStream(wavFile),
    modelId: "scribe_v2",
    languageCode: "en",
    tagAudioEvents: true,
    numSpeakers: 1,
    timestampsGranularity: "none",
    additionalFormats: [{ format: "srt" }, { format: "txt" }, { format: "segmented_json" }, { format: "docx" }, { format: "pdf" }, { format: "html" }],
    temperature: 0,
    seed: 7,
    keyterms: ["message"]
  }))
  t.same(normalizeWords(result.text), normalizeWords(SENTENCE))
  t.ok(result.words.every((w) => w.start === undefined && w.end === undefined), "no times with timestampsGranularity none")
  t.same((result.additionalFormats ?? []).map((f) => f?.requestedFormat), ["srt", "txt", "segmented_json"], "docx, pdf and html skipped")
})

t.test("errors reach the SDK as ElevenLabsError with the status", async (t) => {
  const notMedia = await client.speechToText.convert({ file: new Blob(["just some text\n".repeat(50)]), modelId: "scribe_v1" }).then(
    () => undefined,
    (e: unknown) => e
  )
  t.ok(notMedia instanceof ElevenLabsError, "an ElevenLabsError")
  t.equal((notMedia as ElevenLabsError).statusCode, 415)
  t.match((notMedia as ElevenLabsError).body, { detail: { status: "unsupported_media_type" } })
  const webhook = await client.speechToText.convert({ file: new Blob([wav]), modelId: "scribe_v1", webhook: true }).then(() => undefined, (e: unknown) => e)
  t.equal((webhook as ElevenLabsError).statusCode, 400, "webhook=true without a webhookId: subscriptions are made with POST /webhooks")
})

t.test("webhook=true through the SDK, then transcripts.get and .delete by its transcription id", async (t) => {
  // A subscription whose receiver is nobody: the delivery is not what this test is about
  // (test/protocol/Webhooks.test.ts is); the transcript by id is.
  const hooks = await startTestService(t, { WORKERS: "1", URL_FETCH_ALLOW_PRIVATE: "true" })
  const user = await hooks.newUser(1_000_000)
  const sdk = new ElevenLabsClient({ apiKey: user.apiKey, baseUrl: `${hooks.siteUrl}/api`, maxRetries: 0 })
  const created = await fetch(`${hooks.base}/webhooks`, {
    method: "POST",
    headers: { "xi-api-key": user.apiKey, "content-type": "application/json" },
    body: JSON.stringify({ url: "https://127.0.0.1:9/hook" })
  })
  const { webhook_id } = await created.json() as { webhook_id: string }
  const accepted = await sdk.speechToText.convert({ file: new Blob([wav]), modelId: "scribe_v1", webhook: true, webhookId: webhook_id, webhookMetadata: { ticket: 42 } as never }) as ElevenLabs.SpeechToTextWebhookResponseModel
  t.match(accepted, { message: /accepted/i, requestId: /\S/, transcriptionId: /\S/ }, "the SDK parses the early answer")
  const id = accepted.transcriptionId!
  let transcript: ElevenLabs.speechToText.TranscriptsGetResponse | undefined
  for (let i = 0; i < 600 && transcript === undefined; i++) {
    transcript = await sdk.speechToText.transcripts.get(id).catch((e: unknown) => {
      if (e instanceof ElevenLabsError && e.statusCode === 404) return undefined
      throw e
    })
    if (transcript === undefined) await new Promise((r) => setTimeout(r, 100))
  }
  t.same(normalizeWords((transcript as ElevenLabs.SpeechToTextChunkResponseModel).text), normalizeWords(SENTENCE), "transcripts.get returns the finished transcript")
  const stranger = new ElevenLabsClient({ apiKey: (await hooks.newUser(10)).apiKey, baseUrl: `${hooks.siteUrl}/api`, maxRetries: 0 })
  const other = await stranger.speechToText.transcripts.get(id).then(() => undefined, (e: unknown) => e)
  t.equal((other as ElevenLabsError).statusCode, 404, "another user's key does not see it")
  await sdk.speechToText.transcripts.delete(id)
  const gone = await sdk.speechToText.transcripts.get(id).then(() => undefined, (e: unknown) => e)
  t.equal((gone as ElevenLabsError).statusCode, 404, "deleted")
})
