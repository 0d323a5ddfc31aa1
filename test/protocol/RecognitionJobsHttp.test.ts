/**
 * Recognition jobs through plain HTTP against the real server (PGlite, or PostgreSQL when
 * DATABASE_URL is set), as a client and as an attacker would use them: the whole reserve → PUT
 * → start → poll flow on real speech, the transcript by id, caps enforced while the body
 * streams, altered and expired upload addresses, 409s, list bounds, cancel from each state,
 * and ownership on every route. Property tests: the job and upload routes answer malformed
 * input with the spec's error body, never a 5xx.
 */
import fc from "fast-check"
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import t, { type Test } from "tap"
import { startTestService, type TestService } from "../support/service.ts"
import { repeatedSpeech, SPEECH } from "../support/librivoxSpeech.ts"

const CAP = 3_000_000

const service = await startTestService(t, { WORKERS: "1", JOBS_CONCURRENCY: "1", UPLOAD_MAX_BYTES: String(CAP) })
const owner = await service.newUser()
const other = await service.newUser()

type Json = Record<string, any>

const call = async (method: string, route: string, apiKey: string | null, body?: unknown, target: TestService = service) => {
  const res = await fetch(`${target.base}${route}`, {
    method,
    headers: { ...(apiKey !== null ? { "xi-api-key": apiKey } : {}), ...(body !== undefined ? { "content-type": "application/json" } : {}) },
    ...(body !== undefined ? { body: typeof body === "string" ? body : JSON.stringify(body) } : {})
  })
  const text = await res.text()
  let json: Json = {}
  try {
    json = JSON.parse(text) as Json
  } catch {
    json = { text }
  }
  return { status: res.status, json }
}

const expectError = (t: Test, res: { status: number; json: Json }, status: number, code?: string) => {
  t.equal(res.status, status, `${status}${code ? ` ${code}` : ""}: ${JSON.stringify(res.json).slice(0, 200)}`)
  t.type(res.json.detail?.message, "string", "the spec's error body")
  if (code !== undefined) t.equal(res.json.detail?.status, code)
}

const reserve = async (apiKey: string | null, body: unknown = {}, target: TestService = service) => {
  const r = await call("POST", "/recognition/uploads", apiKey, body, target)
  if (r.status !== 201) throw new Error(`reserve: ${r.status} ${JSON.stringify(r.json)}`)
  return r.json as { job_id: string; upload_url: string; expires_at: string; max_bytes: number; headers: Record<string, string> }
}
const put = (url: string, body: Uint8Array | string) => fetch(url, { method: "PUT", body }).then(async (r) => ({ status: r.status, json: await r.json() as Json }))
const status = (jobId: string, apiKey: string | null = owner.apiKey) => call("GET", `/recognition/jobs/${jobId}`, apiKey)
const until = async (jobId: string, apiKey: string | null, done: (s: Json) => boolean) => {
  let s = await status(jobId, apiKey)
  for (let i = 0; i < 1200 && !done(s.json); i++) {
    await new Promise((r) => setTimeout(r, 100))
    s = await status(jobId, apiKey)
  }
  return s.json
}
const ended = (s: Json) => ["succeeded", "failed", "cancelled"].includes(s.state)

t.test("reserve → PUT → start → poll on real speech; the transcript by id", async (t) => {
  const r = await reserve(owner.apiKey, { filename: "talk.wav", content_type: "audio/wav", size_bytes: SPEECH.length })
  t.match(r, { job_id: /^job_[0-9a-f]{32}$/, max_bytes: CAP, headers: {} })
  const validFor = Date.parse(r.expires_at) - Date.now()
  t.ok(validFor > 29 * 60_000 && validFor <= 30 * 60_000, `the address is valid 30 minutes (${Math.round(validFor / 1000)} s)`)
  t.equal((await status(r.job_id)).json.state, "uploading")
  expectError(t, await call("POST", `/recognition/jobs/${r.job_id}/start`, owner.apiKey, {}), 409, "upload_missing")
  const landed = await put(r.upload_url, SPEECH)
  t.equal(landed.status, 200)
  t.equal(landed.json.bytes, SPEECH.length)
  expectError(t, await put(r.upload_url, SPEECH), 409, "upload_closed")
  const started = await call("POST", `/recognition/jobs/${r.job_id}/start`, owner.apiKey, { diarize: true, additional_formats: [{ format: "srt" }] })
  t.equal(started.status, 202)
  t.match(started.json, { job_id: r.job_id, state: "pending", transcription_id: /\S/ })
  expectError(t, await call("POST", `/recognition/jobs/${r.job_id}/start`, owner.apiKey, {}), 409, "job_already_started")
  const done = await until(r.job_id, owner.apiKey, ended)
  t.equal(done.state, "succeeded", JSON.stringify(done.error ?? {}))
  t.ok(Math.abs(done.audio_duration_s - 7.1) < 0.2, `duration ${done.audio_duration_s} s`)
  t.same(done.progress, { stage: "done", fraction: 1 })
  const words = (done.result.words as Array<Json>).filter((w) => w.type === "word")
  t.ok(words.length >= 8, `${words.length} words: ${String(done.result.text).slice(0, 60)}`)
  t.ok(words.every((w) => w.start >= 0 && w.end <= 7.2 && w.start <= w.end), "word times inside the recording")
  t.ok(words.every((w) => typeof w.speaker_id === "string"), "diarized")
  t.match(done.result.additional_formats?.[0], { requested_format: "srt", content: /-->/ })
  t.equal(done.filename, "talk.wav")

  const id = started.json.transcription_id as string
  const transcript = await call("GET", `/speech-to-text/transcripts/${id}`, owner.apiKey)
  t.equal(transcript.status, 200)
  t.equal(transcript.json.text, done.result.text)
  expectError(t, await call("GET", `/speech-to-text/transcripts/${id}`, other.apiKey), 404, "transcript_not_found")
  expectError(t, await call("GET", `/speech-to-text/transcripts/${id}`, null), 404, "transcript_not_found")
  expectError(t, await call("DELETE", `/speech-to-text/transcripts/${id}`, other.apiKey), 404)
  t.equal((await call("DELETE", `/speech-to-text/transcripts/${id}`, owner.apiKey)).status, 200)
  expectError(t, await call("GET", `/speech-to-text/transcripts/${id}`, owner.apiKey), 404)
  expectError(t, await status(r.job_id), 404, "job_not_found")
})

/**
 * PUTs `total` bytes (a WAV header, then zeros) in 256 KiB pieces on a raw connection, chunked
 * or with a true Content-Length, stopping as soon as an answer arrives or the server ends the
 * connection; the status (0 when none was read) and how many bytes went out.
 */
const streamPut = (uploadUrl: string, total: number, framing: "chunked" | "length") =>
  new Promise<{ status: number; sent: number; body: string }>((resolve) => {
    const url = new URL(uploadUrl)
    const socket = net.connect(Number(url.port), url.hostname)
    let answer = ""
    let sent = 0
    let stopped = false
    let closed = false
    const piece = Buffer.alloc(256 * 1024)
    SPEECH.copy(piece, 0, 0, 44)
    socket.on("data", (d) => {
      answer += d.toString("latin1")
      if (/\r\n\r\n/.test(answer)) stopped = true
    })
    socket.on("error", () => {
      stopped = true
    })
    socket.on("close", () => {
      stopped = true
      closed = true
    })
    const finish = () => {
      const m = /^HTTP\/1\.1 (\d{3})/.exec(answer)
      socket.destroy()
      resolve({ status: m === null ? 0 : Number(m[1]), sent, body: answer.split("\r\n\r\n").slice(1).join("\r\n\r\n") })
    }
    socket.on("connect", async () => {
      const head = framing === "chunked" ? "transfer-encoding: chunked" : `content-length: ${total}`
      socket.write(`PUT ${url.pathname}${url.search} HTTP/1.1\r\nhost: ${url.host}\r\n${head}\r\n\r\n`)
      while (!stopped && sent < total) {
        const n = Math.min(piece.length, total - sent)
        const data = sent === 0 ? piece.subarray(0, n) : Buffer.alloc(n)
        const ok = socket.write(framing === "chunked" ? Buffer.concat([Buffer.from(`${n.toString(16)}\r\n`), data, Buffer.from("\r\n")]) : data)
        sent += n
        if (!ok) await new Promise((r) => socket.once("drain", r).once("close", r))
        await new Promise((r) => setImmediate(r))
      }
      if (!stopped && framing === "chunked") socket.write("0\r\n\r\n")
      // A closed connection brings no answer any more: stop waiting for one at once.
      for (let i = 0; i < 300 && !closed && !/\r\n\r\n/.test(answer); i++) await new Promise((r) => setTimeout(r, 100))
      finish()
    })
  })

t.test("caps are enforced while the body streams: 25 MB anonymous, UPLOAD_MAX_BYTES with a key", async (t) => {
  // With a Content-Length the 413 comes when the declared length is read (before any body); a
  // chunked body past the cap is answered 413 and the connection closed at once, so a client
  // still writing may see the close before it reads the answer (README): either way the server
  // stops reading long before the end.
  for (const [who, key, cap] of [["anonymous", null, 25 * 1024 * 1024], ["with a key", owner.apiKey, CAP]] as const) {
    for (const framing of ["length", "chunked"] as const) {
      const r = await reserve(key)
      t.equal(r.max_bytes, cap)
      // Far past the cap, more than loopback socket buffers hold, so "stopped early" means something.
      const total = Math.max(3 * cap, 64 * 1024 * 1024)
      const answer = await streamPut(r.upload_url, total, framing)
      if (framing === "length") {
        t.equal(answer.status, 413, `${who}, Content-Length over the cap`)
        t.match(answer.body, /payload_too_large/)
      } else {
        t.ok(answer.status === 413 || answer.status === 0, `${who}, chunked: 413 or closed (${answer.status})`)
      }
      t.ok(answer.sent < total, `${who}, ${framing}: stopped after ${(answer.sent / 2 ** 20).toFixed(1)} MiB of ${(total / 2 ** 20).toFixed(1)} MiB`)
      expectError(t, await call("POST", `/recognition/jobs/${r.job_id}/start`, key, {}), 409, "upload_missing")
    }
  }
  expectError(t, await call("POST", "/recognition/uploads", owner.apiKey, { size_bytes: CAP + 1 }), 413, "payload_too_large")
  expectError(t, await call("POST", "/recognition/uploads", null, { size_bytes: 25 * 1024 * 1024 + 1 }), 413, "payload_too_large")
  const left = fs.readdirSync(path.join(service.dataDir, "tmp")).filter((f) => f.startsWith("upload-"))
  t.same(left, [], "no partial upload is left on disk")
})

t.test("altered and expired upload addresses are 403", async (t) => {
  const r = await reserve(owner.apiKey)
  const victim = await reserve(other.apiKey)
  const url = new URL(r.upload_url)
  const variants: Array<[string, (u: URL) => void]> = [
    ["signature", (u) => u.searchParams.set("sig", u.searchParams.get("sig")!.replace(/^./, (c) => (c === "a" ? "b" : "a")))],
    ["size bound", (u) => u.searchParams.set("max", String(Number(u.searchParams.get("max")) * 2))],
    ["expiry", (u) => u.searchParams.set("expires", String(Number(u.searchParams.get("expires")) + 3600_000))],
    ["key (another user's job)", (u) => (u.pathname = new URL(victim.upload_url).pathname)],
    ["no signature", (u) => u.searchParams.delete("sig")],
    ["no query", (u) => (u.search = "")]
  ]
  for (const [what, alter] of variants) {
    const u = new URL(url)
    alter(u)
    const res = await put(u.toString(), SPEECH)
    expectError(t, res, 403)
    t.not(res.json.detail?.status, "upload_expired", `${what}: refused as altered`)
  }
  const realNow = Date.now
  Date.now = () => realNow() + 31 * 60_000
  let expired
  try {
    expired = await put(r.upload_url, SPEECH)
  } finally {
    Date.now = realNow
  }
  expectError(t, expired, 403, "upload_expired")
  t.equal((await status(victim.job_id, other.apiKey)).json.upload_bytes, null, "the other user's job got nothing")
  t.equal((await put(r.upload_url, SPEECH)).status, 200, "the untouched address still works")
})

t.test("a file that is not audio fails its job with a clear error", async (t) => {
  const r = await reserve(owner.apiKey)
  expectError(t, await put(r.upload_url, "just some text, not a recording\n".repeat(20)), 415, "unsupported_media_type")
  const s = (await status(r.job_id)).json
  t.equal(s.state, "failed")
  t.equal(s.error.code, "unsupported_media_type")
  expectError(t, await call("POST", `/recognition/jobs/${r.job_id}/start`, owner.apiKey, {}), 409, "job_already_started")
})

t.test("list: the caller's jobs, newest first, limit 1-100", async (t) => {
  const user = await service.newUser()
  const ids: Array<string> = []
  for (let i = 0; i < 3; i++) ids.push((await reserve(user.apiKey)).job_id)
  const all = await call("GET", "/recognition/jobs", user.apiKey)
  t.equal(all.status, 200)
  t.same(all.json.jobs.map((j: Json) => j.job_id), [...ids].reverse(), "newest first")
  t.notOk("result" in all.json.jobs[0], "summaries without transcripts")
  t.same((await call("GET", "/recognition/jobs?limit=1", user.apiKey)).json.jobs.map((j: Json) => j.job_id), [ids[2]])
  t.equal((await call("GET", "/recognition/jobs?limit=100", user.apiKey)).json.jobs.length, 3)
  for (const bad of ["0", "-1", "101", "abc", "1.5", "", "1e3"]) {
    expectError(t, await call("GET", `/recognition/jobs?limit=${bad}`, user.apiKey), 400)
  }
  t.notOk((await call("GET", "/recognition/jobs", other.apiKey)).json.jobs.some((j: Json) => ids.includes(j.job_id)), "another user sees none")
  expectError(t, await call("GET", "/recognition/jobs", null), 401)
})

t.test("cancel from each state", async (t) => {
  // The service runs one job at a time (JOBS_CONCURRENCY=1): while a long job holds that slot, a
  // job started after it stays pending, without a second instance that runs none.
  const long = await reserve(owner.apiKey)
  await put(long.upload_url, repeatedSpeech(6))
  await call("POST", `/recognition/jobs/${long.job_id}/start`, owner.apiKey, {})
  await until(long.job_id, owner.apiKey, (s) => s.state === "running" || ended(s))
  t.equal((await status(long.job_id)).json.state, "running", "the long job holds the only job slot")

  const user = await service.newUser()
  const uploading = await reserve(user.apiKey)
  const c1 = await call("POST", `/recognition/jobs/${uploading.job_id}/cancel`, user.apiKey)
  t.same(c1.json, { job_id: uploading.job_id, state: "cancelled", previous_state: "uploading" })
  expectError(t, await put(uploading.upload_url, SPEECH), 409, "upload_closed")
  const pending = await reserve(user.apiKey)
  await put(pending.upload_url, SPEECH)
  t.equal((await call("POST", `/recognition/jobs/${pending.job_id}/start`, user.apiKey, {})).status, 202)
  const c2 = await call("POST", `/recognition/jobs/${pending.job_id}/cancel`, user.apiKey)
  t.same(c2.json, { job_id: pending.job_id, state: "cancelled", previous_state: "pending" })
  expectError(t, await call("POST", `/recognition/jobs/${pending.job_id}/cancel`, user.apiKey), 409, "job_finished")

  const c3 = await call("POST", `/recognition/jobs/${long.job_id}/cancel`, owner.apiKey)
  t.same(c3.json, { job_id: long.job_id, state: "cancelled", previous_state: "running" })
  const after = await until(long.job_id, owner.apiKey, ended)
  t.equal(after.state, "cancelled")
  t.notOk("result" in after, "no transcript for a cancelled job")
  expectError(t, await call("POST", `/recognition/jobs/${long.job_id}/cancel`, owner.apiKey), 409, "job_finished")
})

t.test("ownership: another user's job is 404 on every route; an anonymous job's id is its capability", async (t) => {
  const mine = await reserve(owner.apiKey)
  for (const [method, route] of [
    ["GET", `/recognition/jobs/${mine.job_id}`],
    ["POST", `/recognition/jobs/${mine.job_id}/start`],
    ["POST", `/recognition/jobs/${mine.job_id}/cancel`]
  ] as const) {
    expectError(t, await call(method, route, other.apiKey, method === "POST" ? {} : undefined), 404, "job_not_found")
    expectError(t, await call(method, route, null, method === "POST" ? {} : undefined), 404, "job_not_found")
  }
  t.equal((await status(mine.job_id)).json.state, "uploading", "untouched by them")
  const theirs = await reserve(null)
  t.equal((await status(theirs.job_id, null)).status, 200, "readable by whoever holds the id")
  t.equal((await status(theirs.job_id, owner.apiKey)).status, 200)
  expectError(t, await call("POST", `/recognition/jobs/${theirs.job_id}/cancel`, owner.apiKey), 404, "job_not_found")
  expectError(t, await call("POST", `/recognition/jobs/${theirs.job_id}/start`, owner.apiKey, {}), 404, "job_not_found")
  expectError(t, await call("GET", "/recognition/jobs/job_00000000000000000000000000000000", owner.apiKey), 404, "job_not_found")
  expectError(t, await call("GET", "/recognition/jobs/x", "sk_svc_not_a_key"), 401)
})

t.test("property: malformed input to the job routes is a 4xx with the error body, never a 5xx", async (t) => {
  const r = await reserve(owner.apiKey)
  const base = new URL(r.upload_url)
  const json = fc.oneof(fc.json(), fc.string(), fc.constant(""), fc.constant("{"), fc.constant("[]"), fc.constant("null"))
  const startBody = fc.oneof(json, fc.record({
    language_code: fc.oneof(fc.string(), fc.integer(), fc.constant(null)),
    diarize: fc.oneof(fc.boolean(), fc.string(), fc.integer()),
    num_speakers: fc.oneof(fc.integer(), fc.string(), fc.double()),
    timestamps_granularity: fc.oneof(fc.constantFrom("word", "none", "character", "x"), fc.integer()),
    additional_formats: fc.oneof(fc.array(fc.record({ format: fc.oneof(fc.string(), fc.constantFrom("srt", "txt", "docx")) })), fc.string()),
    webhook: fc.oneof(fc.boolean(), fc.string()),
    webhook_id: fc.oneof(fc.string(), fc.integer())
  }, { requiredKeys: [] }).map((o) => JSON.stringify(o)))
  await fc.assert(fc.asyncProperty(startBody, json, fc.string(), fc.string({ maxLength: 40 }), async (start, reserveBody, query, jobId) => {
    const answers = [
      await call("POST", `/recognition/jobs/${r.job_id}/start`, owner.apiKey, start),
      await call("POST", "/recognition/uploads", owner.apiKey, reserveBody),
      await call("GET", `/recognition/jobs/${encodeURIComponent(jobId)}`, owner.apiKey),
      await call("POST", `/recognition/jobs/${encodeURIComponent(jobId)}/cancel`, null)
    ]
    const u = new URL(base)
    u.search = query.startsWith("?") ? query : `?${query}`
    answers.push(await fetch(u, { method: "PUT", body: "x" }).then(async (res) => ({ status: res.status, json: await res.json().catch(() => ({})) as Json })))
    for (const a of answers) {
      if (a.status >= 500 || (a.status >= 400 && typeof a.json.detail?.message !== "string")) return false
    }
    return true
  }), { numRuns: 60, seed: 11 })
  t.pass("60 runs of five requests each: no 5xx, always the error body")
  t.equal((await status(r.job_id)).json.state, "uploading", "the job survived it all unchanged")
})
