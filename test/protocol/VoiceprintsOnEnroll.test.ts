/**
 * A voiceprint is stored only by the explicit enroll call and deleted for real (SPEC 2.7; issue
 * 38, item 4), read straight from the database after each step, on PGlite or PostgreSQL:
 * a finished job with speaker recognition leaves no voiceprint anywhere (no `job_voiceprints`,
 * no saved speaker, nothing vector-like in its result); enroll stores exactly one; the hard
 * delete leaves none. Enrollment computes that one from the job's kept audio, and it is the
 * job's own voiceprint: a later recording of the same speaker is named. Once the job's audio is
 * no longer kept, enrollment is 409 `enroll_window_closed`, and deleting the transcript deletes
 * the kept audio.
 */
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import t from "tap"
import { conversationWav, LIBRIVOX_WAV, pcmOf } from "../support/librivoxSpeech.ts"
import { expectApiError, type Json, jsonApi } from "../support/jsonApi.ts"
import { startTestService } from "../support/service.ts"

const CARDS = "/usr/share/pocketsphinx/test/data/cards"
const reader = pcmOf(LIBRIVOX_WAV)
const cards = [1, 2, 3, 4, 5].map((n) => pcmOf(`${CARDS}/00${n}.wav`))
const readerThenCards = conversationWav([reader, ...cards], 500)
const cardsThenReader = conversationWav([...cards.slice(2), reader.subarray(Math.floor(reader.length / 4) * 2)], 500)

const service = await startTestService(t, { WORKERS: "1" })
const owner = await service.newUser()
const { call, runJob } = jsonApi(service.base)
const recognise = { diarize: true, num_speakers: 2, speaker_recognition: true }

const query = <A extends object>(text: string) => Effect.runPromise(service.sql.unsafe<A>(text))
const count = async (text: string) => Number((await query<{ n: number | string }>(text))[0]!.n)
/** Every voiceprint the database holds: job_voiceprints rows (while the table exists) and saved speakers. */
const voiceprintRows = async () => {
  const table = await query<{ t: string | null }>(`SELECT to_regclass('job_voiceprints')::text AS t`)
  const perJob = table[0]!.t === null ? 0 : await count(`SELECT count(*) AS n FROM job_voiceprints`)
  return { perJob, saved: await count(`SELECT count(*) AS n FROM saved_speakers`) }
}
const blobOf = (jobId: string) => path.join(service.dataDir, "blobs", "uploads", jobId)

t.test("job done: no voiceprint anywhere; enroll: exactly one; hard delete: none", async (t) => {
  const { id, status } = await runJob(owner.apiKey, readerThenCards, recognise)
  t.equal(status.state, "succeeded", JSON.stringify(status.error ?? {}))
  t.equal((await query<{ t: string | null }>(`SELECT to_regclass('job_voiceprints')::text AS t`))[0]!.t, null, "migration 0011 dropped job_voiceprints with its rows")
  t.same(await voiceprintRows(), { perJob: 0, saved: 0 }, "the finished job left no voiceprint")
  t.notMatch(JSON.stringify(status.result), /centroid|voiceprint|embedding/i, "nor in its result")
  const label = (status.result.speakers as Array<Json>)[0]!.speaker_label as string

  const enrolled = await call("POST", "/recognition/speakers", owner.apiKey, { jobId: id, speakerLabel: label, name: "First" })
  t.equal(enrolled.status, 201, JSON.stringify(enrolled.json))
  t.same(await voiceprintRows(), { perJob: 0, saved: 1 }, "enroll stored exactly one")
  const stored = await query<{ source_label: string; voiceprint: string }>(`SELECT source_label, voiceprint FROM saved_speakers`)
  t.equal(stored[0]!.source_label, label)
  t.ok(stored[0]!.voiceprint.length > 40, "and it is a vector")

  // Enrollment ran the job's speaker pipeline again on its audio; every stage is deterministic,
  // so the same recording matches the stored voiceprint exactly.
  const again = await runJob(owner.apiKey, readerThenCards, recognise)
  const self = (again.status.result.speakers as Array<Json>).find((s) => s.speaker_label === label)
  t.match(self, { speaker_name: "First", speaker_match_score: 1 }, "the stored voiceprint is the job's own")
  const later = await runJob(owner.apiKey, cardsThenReader, recognise)
  t.ok((later.status.result.speakers as Array<Json>).some((s) => s.speaker_name === "First"), "and it names its speaker in another recording")
  t.same(await voiceprintRows(), { perJob: 0, saved: 1 }, "the matching jobs left none either")

  t.same((await call("DELETE", `/recognition/speakers/${enrolled.json.speaker.id}`, owner.apiKey)).json, { ok: true })
  t.same(await voiceprintRows(), { perJob: 0, saved: 0 }, "the hard delete removed the only copy")
})

t.test("enrollment needs the job's kept audio: closed window is 409, deleting the transcript deletes the audio", async (t) => {
  const { id, status } = await runJob(owner.apiKey, readerThenCards, recognise)
  t.equal(status.state, "succeeded")
  t.ok(fs.existsSync(blobOf(id)), "the audio is kept for the enrollment window")
  const label = (status.result.speakers as Array<Json>)[0]!.speaker_label as string
  await query(`UPDATE recognition_jobs SET audio_kept_until = now() - interval '1 second' WHERE id = '${id}'`)
  expectApiError(t, await call("POST", "/recognition/speakers", owner.apiKey, { jobId: id, speakerLabel: label, name: "Late" }), 409, "enroll_window_closed")
  t.same(await voiceprintRows(), { perJob: 0, saved: 0 })

  const other = await runJob(owner.apiKey, conversationWav([cards[0]!, reader.subarray(0, 16000 * 3)], 500), recognise)
  t.ok(fs.existsSync(blobOf(other.id)))
  const deleted = await call("DELETE", `/speech-to-text/transcripts/${other.status.transcription_id}`, owner.apiKey)
  t.equal(deleted.status, 200)
  t.notOk(fs.existsSync(blobOf(other.id)), "the kept audio went with the transcript")

  const plain = await runJob(owner.apiKey, conversationWav([cards[0]!]), { diarize: true })
  t.equal(plain.status.state, "succeeded")
  const marked = await query<{ kept: Date | null }>(`SELECT audio_kept_until AS kept FROM recognition_jobs WHERE id = '${plain.id}'`)
  t.equal(marked[0]!.kept, null, "a job without speaker recognition keeps no audio")
  // Its upload is deleted just after the terminal commit the poll saw: wait for that event.
  for (let i = 0; i < 1000 && fs.existsSync(blobOf(plain.id)); i++) await new Promise((r) => setTimeout(r, 20))
  t.notOk(fs.existsSync(blobOf(plain.id)), "its upload is deleted after the job")
})
