/**
 * Saved speakers end to end on real human speech (pocketsphinx-testdata: the LibriVox reader and
 * the `cards` speaker), through the real server on PGlite or PostgreSQL: a job with diarize and
 * speaker_recognition shows raw labels (and keeps no voiceprint:
 * VoiceprintsOnEnroll.test.ts); enroll one speaker; a later job
 * names that speaker (and not the other); rename shows in the next job; delete is a hard delete
 * and the match disappears. Another user never sees, changes or is matched against them; the
 * 400/404/409 cases of enrollment.
 */
import { ElevenLabsClient } from "@elevenlabs/elevenlabs-js"
import t from "tap"
import { SPEAKER_MATCH_THRESHOLD } from "../../actors/SpeakerRecognition.ts"
import { conversationWav, LIBRIVOX_WAV, pcmOf } from "../support/librivoxSpeech.ts"
import { expectApiError, type Json, jsonApi } from "../support/jsonApi.ts"
import { startTestService } from "../support/service.ts"

const CARDS = "/usr/share/pocketsphinx/test/data/cards"
const reader = pcmOf(LIBRIVOX_WAV)
const cards = [1, 2, 3, 4, 5].map((n) => pcmOf(`${CARDS}/00${n}.wav`))
/** Reader first, then the cards speaker; later, other utterances of both the other way round. */
const readerThenCards = conversationWav([reader, ...cards], 500)
const cardsThenReader = conversationWav([...cards.slice(2), reader.subarray(Math.floor(reader.length / 4) * 2)], 500)
/** Where the reader starts in `cardsThenReader`, s. */
const readerStartsAt = cards.slice(2).reduce((s, c) => s + c.length / 32000, 0) + 3 * 0.5

const service = await startTestService(t, { WORKERS: "1" })
const owner = await service.newUser()
const other = await service.newUser()

const { call, runJob } = jsonApi(service.base)
const expectError = expectApiError
/** Runs a job to its end; its final status. */
const job = async (apiKey: string, audio: Buffer, options: Json) => (await runJob(apiKey, audio, options)).status
const recognise = { diarize: true, num_speakers: 2, speaker_recognition: true }
/** The result's speaker entry of the words spoken in [fromS, toS). */
const speakerAt = (result: Json, fromS: number, toS: number): Json => {
  const words = (result.words as Array<Json>).filter((w) => w.type === "word" && w.start >= fromS && w.end <= toS)
  const counts = new Map<string, number>()
  for (const w of words) counts.set(w.speaker_id, (counts.get(w.speaker_id) ?? 0) + 1)
  const id = [...counts].sort((a, b) => b[1] - a[1])[0]![0]
  return (result.speakers as Array<Json>).find((s) => s.speaker_id === id)!
}

const first = await job(owner.apiKey, readerThenCards, recognise)
const readerLabel = speakerAt(first.result, 0, 7.1).speaker_label as string

t.test("a job with speaker recognition shows raw labels beside speaker_id", async (t) => {
  t.equal(first.state, "succeeded", JSON.stringify(first.error ?? {}))
  t.equal(first.result.speakers.length, 2)
  for (const s of first.result.speakers as Array<Json>) {
    t.match(s, { speaker_id: /^speaker_\d+$/, speaker_label: /^SPEAKER_\d{2}$/ })
    t.ok(s.speech_seconds > 1, `${s.speaker_label}: ${s.speech_seconds} s of speech`)
    t.notOk("speaker_name" in s, "nobody is saved yet")
  }
  const words = (first.result.words as Array<Json>).filter((w) => w.type === "word")
  t.ok(words.every((w) => w.speaker_label === `SPEAKER_${w.speaker_id.slice(8).padStart(2, "0")}`), "every word carries its raw label")
  t.not(speakerAt(first.result, 0, 7.1).speaker_id, speakerAt(first.result, 7.6, 30).speaker_id, "the reader and the cards speaker are told apart")
  // The official SDK still parses a transcript carrying the extra fields.
  const sdk = new ElevenLabsClient({ apiKey: owner.apiKey, baseUrl: `${service.siteUrl}/api`, maxRetries: 0 })
  const viaSdk = await sdk.speechToText.transcripts.get(first.transcription_id) as { text: string; words: Array<{ speakerId?: string }> }
  t.equal(viaSdk.text, first.result.text, "transcripts.get parses it")
  t.ok(viaSdk.words.some((w) => w.speakerId === "speaker_1"))
})

t.test("enrollment refuses what it must", async (t) => {
  // Refused on the job's options alone (no speaker_recognition), whatever its audio: one short card is enough.
  const plain = await job(owner.apiKey, conversationWav([cards[0]!]), { diarize: true })
  t.equal(plain.state, "succeeded", "the job without speaker_recognition ran")
  const reserved = await call("POST", "/recognition/uploads", owner.apiKey, {})
  const cases: Array<[unknown, string | null, number, string?]> = [
    [{ jobId: first.job_id, speakerLabel: "speaker_0", name: "x" }, owner.apiKey, 400],
    [{ jobId: first.job_id, speakerLabel: readerLabel, name: "" }, owner.apiKey, 400],
    [{ jobId: first.job_id, speakerLabel: readerLabel, name: "n".repeat(201) }, owner.apiKey, 400],
    [{ speakerLabel: readerLabel, name: "x" }, owner.apiKey, 400],
    ["{not json", owner.apiKey, 400],
    [{ jobId: "job_00000000000000000000000000000000", speakerLabel: readerLabel, name: "x" }, owner.apiKey, 404, "job_not_found"],
    [{ jobId: first.job_id, speakerLabel: readerLabel, name: "x" }, other.apiKey, 404, "job_not_found"],
    [{ jobId: first.job_id, speakerLabel: "SPEAKER_09", name: "x" }, owner.apiKey, 404, "speaker_label_not_found"],
    [{ jobId: plain.job_id, speakerLabel: "SPEAKER_00", name: "x" }, owner.apiKey, 409, "no_voiceprints"],
    [{ jobId: reserved.json.job_id, speakerLabel: "SPEAKER_00", name: "x" }, owner.apiKey, 409, "job_not_succeeded"],
    [{ jobId: first.job_id, speakerLabel: readerLabel, name: "x" }, null, 401]
  ]
  for (const [body, key, status, code] of cases) expectError(t, await call("POST", "/recognition/speakers", key, body), status, code)
  expectError(t, await call("POST", "/recognition/jobs/" + reserved.json.job_id + "/start", null, { diarize: true, speaker_recognition: true }), 404)
  const anonymous = await call("POST", "/recognition/uploads", null, {})
  expectError(t, await call("POST", `/recognition/jobs/${anonymous.json.job_id}/start`, null, { diarize: true, speaker_recognition: true }), 400)
  expectError(t, await call("POST", `/recognition/jobs/${reserved.json.job_id}/start`, owner.apiKey, { speaker_recognition: true }), 400)
})

t.test("enroll → matched in a later job → renamed → deleted, and the match is gone", async (t) => {
  const enrolled = await call("POST", "/recognition/speakers", owner.apiKey, { jobId: first.job_id, speakerLabel: readerLabel, name: "The reader" })
  t.equal(enrolled.status, 201)
  t.match(enrolled.json.speaker, { id: /^spk_/, name: "The reader", source_job_id: first.job_id })
  t.ok(enrolled.json.speaker.speech_seconds > 3 && enrolled.json.speaker.speech_seconds < 8, `${enrolled.json.speaker.speech_seconds} s of speech`)
  const id = enrolled.json.speaker.id as string
  expectError(t, await call("POST", "/recognition/speakers", owner.apiKey, { jobId: first.job_id, speakerLabel: readerLabel, name: "again" }), 409, "speaker_already_enrolled")
  t.same((await call("GET", "/recognition/speakers", owner.apiKey)).json.speakers.map((s: Json) => s.id), [id])
  t.same((await call("GET", "/recognition/speakers", other.apiKey)).json.speakers, [], "another user sees none")

  const later = await job(owner.apiKey, cardsThenReader, recognise)
  const readerPart = speakerAt(later.result, readerStartsAt - 0.2, 60)
  const cardsPart = speakerAt(later.result, 0, readerStartsAt - 0.5)
  t.comment(`match scores: reader ${readerPart.speaker_match_score ?? "none"}, cards speaker ${cardsPart.speaker_match_score ?? "none"} (threshold ${SPEAKER_MATCH_THRESHOLD})`)
  t.match(readerPart, { speaker_name: "The reader", saved_speaker_id: id }, "the reader is recognised in another recording")
  t.ok(readerPart.speaker_match_score >= SPEAKER_MATCH_THRESHOLD && readerPart.speaker_match_score <= 1)
  t.notOk("speaker_name" in cardsPart, "the other speaker is not named after them")
  const named = (later.result.words as Array<Json>).filter((w) => w.speaker_name === "The reader")
  t.ok(named.length > 5 && named.every((w) => w.speaker_id === readerPart.speaker_id), `${named.length} words named`)

  const theirs = await job(other.apiKey, cardsThenReader, recognise)
  t.notOk((theirs.result.speakers as Array<Json>).some((s) => "speaker_name" in s), "another user's job is never compared with these voiceprints")

  expectError(t, await call("PATCH", `/recognition/speakers/${id}`, other.apiKey, { name: "mine now" }), 404, "speaker_not_found")
  expectError(t, await call("PATCH", `/recognition/speakers/${id}`, owner.apiKey, { name: "x".repeat(201) }), 400)
  const renamed = await call("PATCH", `/recognition/speakers/${id}`, owner.apiKey, { name: "Narrator" })
  t.equal(renamed.json.speaker.name, "Narrator")
  const afterRename = await job(owner.apiKey, cardsThenReader, recognise)
  t.ok((afterRename.result.speakers as Array<Json>).some((s) => s.speaker_name === "Narrator"), "the new name shows in the next job")

  expectError(t, await call("DELETE", `/recognition/speakers/${id}`, other.apiKey), 404, "speaker_not_found")
  t.same((await call("DELETE", `/recognition/speakers/${id}`, owner.apiKey)).json, { ok: true })
  expectError(t, await call("DELETE", `/recognition/speakers/${id}`, owner.apiKey), 404)
  t.same((await call("GET", "/recognition/speakers", owner.apiKey)).json.speakers, [])
  const afterDelete = await job(owner.apiKey, cardsThenReader, recognise)
  t.notOk((afterDelete.result.speakers as Array<Json>).some((s) => "speaker_name" in s), "deleted: nobody is named any more")
  const again = await call("POST", "/recognition/speakers", owner.apiKey, { jobId: first.job_id, speakerLabel: readerLabel, name: "back" })
  t.equal(again.status, 201, "the row is gone for real: the label can be enrolled again")
})
