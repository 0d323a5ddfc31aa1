/**
 * The speech-to-text engine's Debian packages are missing: the service is started with
 * POCKETSPHINX_LIBRARY naming a library that is not there, as on a machine without
 * `libpocketsphinx3`. The service still starts (with a warning naming the packages), a
 * transcription answers 502 `engine_unavailable` with a message that says what to install, a
 * recognition job fails with the same code, text-to-speech answers 200 with audio, and /readyz
 * stays 200 (the instance serves everything else) while its `speech_to_text` check says what is
 * missing. A missing model directory is reported the same way (checked in-process).
 */
import t from "tap"
import { PocketSphinxAsr } from "../../engines/asr/PocketSphinxAsr.ts"
import { SPEECH } from "../support/librivoxSpeech.ts"
import { startServiceProcess } from "../support/serviceProcess.ts"

const INSTALL = /apt install pocketsphinx pocketsphinx-en-us/

const service = await startServiceProcess(t, {
  env: { WORKERS: "1", POCKETSPHINX_LIBRARY: "/nonexistent/libpocketsphinx.so.3" }
})
const apiKey = await service.newKey(1_000_000)
const api = `${service.siteUrl}/api/v1`

type Json = { detail?: { status?: string; message?: string }; [k: string]: any }
const answer = async (res: Response) => ({ status: res.status, json: await res.json().catch(() => ({})) as Json })
const call = (method: string, route: string, body?: unknown) =>
  fetch(`${api}${route}`, {
    method,
    headers: { "xi-api-key": apiKey, ...(body !== undefined ? { "content-type": "application/json" } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    signal: AbortSignal.timeout(60_000)
  }).then(answer)

t.test("start-up says what is missing", async (t) => {
  t.match(service.output(), /speech-to-text is unavailable/)
  t.match(service.output(), INSTALL)
})

t.test("speech-to-text: 502 engine_unavailable naming the packages", async (t) => {
  const form = new FormData()
  form.set("model_id", "scribe_v1")
  form.set("file", new Blob([SPEECH], { type: "audio/wav" }), "talk.wav")
  const r = await fetch(`${api}/speech-to-text`, { method: "POST", headers: { "xi-api-key": apiKey }, body: form, signal: AbortSignal.timeout(60_000) }).then(answer)
  t.equal(r.status, 502, JSON.stringify(r.json).slice(0, 300))
  t.equal(r.json.detail?.status, "engine_unavailable")
  t.match(r.json.detail?.message, INSTALL, "the message says what to install")
})

t.test("a recognition job fails with the same code", async (t) => {
  const reserved = await call("POST", "/recognition/uploads", { filename: "talk.wav", content_type: "audio/wav", size_bytes: SPEECH.length })
  t.equal(reserved.status, 201)
  const put = await fetch(reserved.json.upload_url, { method: "PUT", body: SPEECH }).then(answer)
  t.equal(put.status, 200)
  const started = await call("POST", `/recognition/jobs/${reserved.json.job_id}/start`, {})
  t.ok(started.status === 200 || started.status === 202, `started: ${started.status}`)
  let s = await call("GET", `/recognition/jobs/${reserved.json.job_id}`)
  for (let i = 0; i < 600 && !["succeeded", "failed", "cancelled"].includes(s.json.state); i++) {
    await new Promise((r) => setTimeout(r, 100))
    s = await call("GET", `/recognition/jobs/${reserved.json.job_id}`)
  }
  t.equal(s.json.state, "failed")
  t.equal(s.json.error?.code, "engine_unavailable", JSON.stringify(s.json.error))
  t.match(s.json.error?.message, INSTALL)
})

t.test("text-to-speech still works; /readyz stays ready and names what is missing", async (t) => {
  const res = await fetch(`${api}/text-to-speech/mari`, {
    method: "POST",
    headers: { "xi-api-key": apiKey, "content-type": "application/json" },
    body: JSON.stringify({ text: "Tere hommikust." }),
    signal: AbortSignal.timeout(60_000)
  })
  t.equal(res.status, 200)
  t.ok((await res.arrayBuffer()).byteLength > 1000, "with audio")
  const ready = await fetch(`${service.siteUrl}/readyz`).then(answer)
  t.equal(ready.status, 200, JSON.stringify(ready.json))
  t.equal(ready.json.status, "ready")
  t.match(ready.json.checks, { database: { ok: true }, worker_pool: { ok: true }, speech_to_text: { ok: false, optional: true } })
  t.match(ready.json.checks.speech_to_text.error, INSTALL)
})

t.test("a missing model directory names its package", async (t) => {
  const missing = PocketSphinxAsr.check({ modelDirectory: "/nonexistent/pocketsphinx/model/en-us" })
  t.equal(missing?.reason, "EngineUnavailable")
  t.match(missing?.message, /pocketsphinx-en-us/)
  t.match(missing?.message, INSTALL)
})
