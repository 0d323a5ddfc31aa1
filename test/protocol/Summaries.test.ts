/**
 * Summaries through the real server (SPEC 2.9, 3, 4.1 rule 6, endpoints 19-22) on transcripts of
 * real recordings (the LibriVox readings of pocketsphinx-testdata, transcribed by the service's
 * own recogniser in a job): the extractive engine keeps sentences that exist in the transcript;
 * every call stores a new record, listed oldest first; templates and the caller's default; 404
 * for another user's job, 409 before success, 400 for unknown templates; anonymous jobs by id;
 * credits per 100 transcript characters, 402 when out.
 */
import { Effect } from "effect"
import t from "tap"
import { conversationWav, pcmOf } from "../support/librivoxSpeech.ts"
import { expectApiError, type Json, jsonApi } from "../support/jsonApi.ts"
import { startTestService } from "../support/service.ts"

const LIBRIVOX = "/usr/share/pocketsphinx/test/data/librivox"
const readings = ["0870", "0880", "0890", "0920", "0930"].map((n) => pcmOf(`${LIBRIVOX}/sense_and_sensibility_01_austen_64kb-${n}.wav`))

const service = await startTestService(t, { WORKERS: "1" })
const owner = await service.newUser()
const other = await service.newUser()
const balance = (userId: string) => Effect.runPromise(service.users.balance(userId))

const { call, runJob } = jsonApi(service.base)
const expectError = expectApiError

// The five readings with pauses between them: about 30 s of one real reader.
const reading = await runJob(owner.apiKey, conversationWav(readings, 900))
const transcript = (reading.status.result.text as string)

const itemsOf = (summary: Json): Array<Json> => (summary.sections as Array<Json>).flatMap((s) => s.items as Array<Json>)

t.test("the job succeeded with a real transcript", async (t) => {
  t.equal(reading.status.state, "succeeded")
  t.ok(transcript.split(" ").length > 40, transcript)
})

t.test("the default template (meeting notes): sections in order, sentences that exist in the transcript, Markdown", async (t) => {
  const before = await balance(owner.userId)
  const res = await call("POST", `/recognition/jobs/${reading.id}/summary`, owner.apiKey)
  t.equal(res.status, 200, JSON.stringify(res.json).slice(0, 300))
  const s = res.json
  t.match(s, { summary_id: /^sum_/, job_id: reading.id, template_id: "meeting_notes", engine: "extractive", created_at: String, text: String })
  t.same(s.sections.map((x: Json) => x.id), ["overview", "key_points", "decisions", "action_items"])
  const items = itemsOf(s)
  t.ok(items.length >= 2, `${items.length} items`)
  for (const item of items) t.ok(transcript.includes(item.text), `"${item.text}" is in the transcript`)
  t.match(s.text, /^## /m, "Markdown headings")
  t.equal(before - await balance(owner.userId), Math.ceil([...transcript].length / 100), "one credit per started 100 transcript characters")
})

t.test("every call makes a new record; GET lists them oldest first", async (t) => {
  const a = await call("POST", `/recognition/jobs/${reading.id}/summary`, owner.apiKey, { templateId: "brief" })
  const b = await call("POST", `/recognition/jobs/${reading.id}/summary`, owner.apiKey, { template_id: "bullet_points" })
  t.equal(a.status, 200)
  t.equal(b.status, 200)
  t.not(a.json.summary_id, b.json.summary_id)
  const brief = a.json.sections[0].items as Array<Json>
  t.ok(brief.length >= 3 && brief.length <= 5, `brief: ${brief.length} sentences`)
  const list = await call("GET", `/recognition/jobs/${reading.id}/summary`, owner.apiKey)
  t.equal(list.status, 200)
  const ids = (list.json.summaries as Array<Json>).map((x) => x.summary_id)
  t.ok(ids.indexOf(a.json.summary_id) < ids.indexOf(b.json.summary_id), "oldest first")
  t.same(list.json.summaries.at(-1), b.json, "the stored record is what POST answered")
  const recap = await call("POST", `/recognition/jobs/${reading.id}/summary`, owner.apiKey, { templateId: "speaker_recap" })
  t.equal(recap.status, 200)
  t.equal(recap.json.sections[0].kind, "speakers")
})

t.test("errors: unknown template, bad bodies, another user's job, unknown job", async (t) => {
  expectError(t, await call("POST", `/recognition/jobs/${reading.id}/summary`, owner.apiKey, { templateId: "nope" }), 400, "unknown_template")
  expectError(t, await call("POST", `/recognition/jobs/${reading.id}/summary`, owner.apiKey, { templateId: 5 }), 400, "invalid_request")
  expectError(t, await call("POST", `/recognition/jobs/${reading.id}/summary`, owner.apiKey, "{not json"), 400, "invalid_request")
  expectError(t, await call("POST", `/recognition/jobs/${reading.id}/summary`, owner.apiKey, "[1]"), 400, "invalid_request")
  expectError(t, await call("POST", `/recognition/jobs/${reading.id}/summary`, other.apiKey), 404, "job_not_found")
  expectError(t, await call("GET", `/recognition/jobs/${reading.id}/summary`, other.apiKey), 404, "job_not_found")
  expectError(t, await call("GET", `/recognition/jobs/${reading.id}/summary`, null), 404, "job_not_found")
  expectError(t, await call("POST", `/recognition/jobs/job_unknown/summary`, owner.apiKey), 404, "job_not_found")
  expectError(t, await call("POST", `/recognition/jobs/${reading.id}/summary`, "sk_svc_wrong"), 401, "invalid_api_key")
})

t.test("409 unless the job succeeded", async (t) => {
  const reserved = await call("POST", "/recognition/uploads", owner.apiKey, {})
  expectError(t, await call("POST", `/recognition/jobs/${reserved.json.job_id}/summary`, owner.apiKey), 409, "job_not_succeeded")
  const list = await call("GET", `/recognition/jobs/${reserved.json.job_id}/summary`, owner.apiKey)
  t.same(list.json, { summaries: [] })
})

t.test("templates: the catalogue, the caller's default, PUT under both spellings", async (t) => {
  const anonymous = await call("GET", "/summary-templates", null)
  t.equal(anonymous.status, 200)
  t.equal(anonymous.json.default_template_id, "meeting_notes")
  const ids = (anonymous.json.templates as Array<Json>).map((x) => x.id)
  for (const id of ["meeting_notes", "brief", "bullet_points", "speaker_recap"]) t.ok(ids.includes(id), id)
  for (const tpl of anonymous.json.templates as Array<Json>) t.match(tpl, { id: String, name: String, description: String, sections: Array })

  const put = await call("PUT", "/summary-templates", other.apiKey, { default_template_id: "brief" })
  t.equal(put.status, 200)
  t.equal(put.json.default_template_id, "brief")
  t.equal((await call("GET", "/summary-templates", other.apiKey)).json.default_template_id, "brief")
  t.equal((await call("GET", "/summary-templates", owner.apiKey)).json.default_template_id, "meeting_notes", "a default is per user")
  t.equal((await call("PUT", "/summary-templates", other.apiKey, { templateId: "bullet_points" })).json.default_template_id, "bullet_points")
  expectError(t, await call("PUT", "/summary-templates", other.apiKey, { default_template_id: "nope" }), 400, "unknown_template")
  expectError(t, await call("PUT", "/summary-templates", other.apiKey, {}), 400, "invalid_request")
  expectError(t, await call("PUT", "/summary-templates", null, { default_template_id: "brief" }), 401, "needs_authorization")
  t.equal((await call("GET", "/summary-templates", other.apiKey)).json.default_template_id, "bullet_points", "failed PUTs changed nothing")

  // The default is what a POST without templateId uses.
  const otherJob = await runJob(other.apiKey, pcmWav(readings[0]!))
  const s = await call("POST", `/recognition/jobs/${otherJob.id}/summary`, other.apiKey)
  t.equal(s.json.template_id, "bullet_points")
})

t.test("anonymous jobs are summarised by whoever holds the id, free", async (t) => {
  const anon = await runJob(null, pcmWav(readings[2]!))
  t.equal(anon.status.state, "succeeded")
  const s = await call("POST", `/recognition/jobs/${anon.id}/summary`, null, { templateId: "brief" })
  t.equal(s.status, 200, JSON.stringify(s.json).slice(0, 200))
  const viaKey = await call("GET", `/recognition/jobs/${anon.id}/summary`, other.apiKey)
  t.equal(viaKey.json.summaries.length, 1, "the id is the capability")
})

t.test("402 when the owner is out of credits; nothing stored", async (t) => {
  const poor = await service.newUser()
  const job = await runJob(poor.apiKey, pcmWav(readings[1]!))
  const left = await balance(poor.userId)
  await Effect.runPromise(service.credits.debit(poor.userId, left))
  expectError(t, await call("POST", `/recognition/jobs/${job.id}/summary`, poor.apiKey), 402, "quota_exceeded")
  t.same((await call("GET", `/recognition/jobs/${job.id}/summary`, poor.apiKey)).json, { summaries: [] })
})

/** One reading as a WAV file of its own. */
function pcmWav(pcm: Buffer): Buffer {
  return conversationWav([pcm], 0)
}

