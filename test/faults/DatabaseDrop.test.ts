/**
 * PostgreSQL unreachable for 20 s while clients keep calling (extends
 * test/runtime/DatabaseOutage.test.ts, which cuts once and checks one route):
 * - before: authenticated TTS, GET /user and a recognition job work; the job is still running
 *   when the database goes;
 * - for 20 s the proxy in front of PostgreSQL refuses everything: every request that needs the
 *   database (TTS, /user, job status, a new upload) is answered 503 `database_unavailable` with
 *   the SPEC error body within a few seconds, every time it is asked; /readyz is 503 and names
 *   the database; /healthz and /models keep answering 200;
 * - a partition (connections accepted, never answered) is answered 503 within the connect
 *   timeout, not held for the client's;
 * - after the restore the same process serves again (no restart) and the job submitted before
 *   the drop finishes: none lost.
 * PostgreSQL only: the embedded database lives inside the process and cannot be cut.
 */
import t, { type Test } from "tap"
import { repeatedSpeech } from "../support/librivoxSpeech.ts"
import { startTestService } from "../support/service.ts"
import { isolatedDatabaseUrl } from "../support/database.ts"
import { startTcpProxy } from "../support/tcpProxy.ts"

const pg = process.env.DATABASE_URL
if (pg === undefined || pg === "") {
  t.test("PostgreSQL dropped for 20 s", { skip: "needs DATABASE_URL (PostgreSQL): the embedded database cannot be cut from outside" }, () => {})
} else {
  const target = new URL(pg)
  const proxy = await startTcpProxy(t, { host: target.hostname, port: Number(target.port || 5432) })
  const url = new URL(await isolatedDatabaseUrl(t, pg))
  url.hostname = "127.0.0.1"
  url.port = String(proxy.port)
  // A short lease and poll so that a job whose instance lost track of it is taken up again soon.
  // A short response bound so that a silenced connection is given up on well within the test's.
  const service = await startTestService(t, { DATABASE_URL: url.toString(), JOB_LEASE_S: "6", JOB_POLL_MS: "250", DATABASE_RESPONSE_TIMEOUT_S: "2" })
  const user = await service.newUser(1_000_000)

  /** One call, timed; a hang ends at 30 s (the client's timeout) and fails the bound below. */
  const call = async (method: string, path: string, body?: unknown, base = service.base) => {
    const started = performance.now()
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { "xi-api-key": user.apiKey, ...(body !== undefined ? { "content-type": "application/json" } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      signal: AbortSignal.timeout(30_000)
    })
    const bytes = new Uint8Array(await res.arrayBuffer())
    return { status: res.status, bytes, text: () => Buffer.from(bytes).toString(), seconds: (performance.now() - started) / 1000 }
  }
  const tts = () => call("POST", "/text-to-speech/mari", { text: "Tere! Kuidas läheb?" })
  const jobStatus = (id: string) => call("GET", `/recognition/jobs/${id}`)
  const newUpload = () => call("POST", "/recognition/uploads", { content_type: "audio/wav", size_bytes: 1000 })

  /** The SPEC error body of a 503 for the database, answered well before any client timeout. */
  const expectDatabase503 = (t: Test, r: Awaited<ReturnType<typeof call>>, what: string) => {
    t.equal(r.status, 503, `${what}: 503`)
    t.ok(r.seconds < 8, `${what}: answered in ${r.seconds.toFixed(1)} s, not held`)
    let body: { detail?: { status?: string; message?: string } } = {}
    try {
      body = JSON.parse(r.text())
    } catch {
      t.fail(`${what}: the body is JSON: ${r.text().slice(0, 200)}`)
    }
    t.equal(body.detail?.status, "database_unavailable", `${what}: detail.status`)
    t.match(body.detail?.message, /\S/, `${what}: a message`)
    t.notMatch(body.detail?.message ?? "", /ECONNREFUSED|127\.0\.0\.1|postgres|5432/i, `${what}: no connection details`)
  }

  let jobId = ""
  t.test("before the drop: traffic works and a job is running", async (t) => {
    t.equal((await tts()).status, 200, "TTS")
    t.equal((await call("GET", "/user")).status, 200, "GET /user")
    const audio = repeatedSpeech(2)
    const reserved = await call("POST", "/recognition/uploads", { content_type: "audio/wav", size_bytes: audio.length })
    t.equal(reserved.status, 201, "upload reserved")
    const grant = JSON.parse(reserved.text()) as { job_id: string; upload_url: string }
    jobId = grant.job_id
    t.equal((await fetch(grant.upload_url, { method: "PUT", body: audio })).status, 200, "uploaded")
    t.equal((await call("POST", `/recognition/jobs/${jobId}/start`, {})).status, 202, "started")
    for (let i = 0; i < 150; i++) {
      const s = JSON.parse((await jobStatus(jobId)).text()) as { state: string }
      if (s.state === "running") break
      await new Promise((r) => setTimeout(r, 100))
    }
    t.equal((JSON.parse((await jobStatus(jobId)).text()) as { state: string }).state, "running", "the job is running when the database goes")
  })

  t.test("20 s without the database: fast 503s, readiness says why, the rest serves", async (t) => {
    await proxy.drop("refuse")
    const until = Date.now() + 20_000
    let rounds = 0
    while (Date.now() < until) {
      rounds++
      const [a, b, c, d] = await Promise.all([tts(), call("GET", "/user"), jobStatus(jobId), newUpload()])
      expectDatabase503(t, a, `round ${rounds} TTS`)
      expectDatabase503(t, b, `round ${rounds} GET /user`)
      expectDatabase503(t, c, `round ${rounds} job status`)
      expectDatabase503(t, d, `round ${rounds} new upload`)
      const ready = await call("GET", "/readyz", undefined, service.siteUrl)
      t.equal(ready.status, 503, `round ${rounds}: /readyz not ready`)
      const checks = (JSON.parse(ready.text()) as { status: string; checks: Record<string, { ok: boolean; error?: string }> })
      t.equal(checks.checks.database?.ok, false, "the database check is the one failing")
      t.match(checks.checks.database?.error, /\S/, `and says why: ${checks.checks.database?.error}`)
      t.equal(checks.checks.worker_pool?.ok, true, "the worker pool is fine")
      t.equal((await call("GET", "/healthz", undefined, service.siteUrl)).status, 200, "liveness holds")
      t.equal((await call("GET", "/models")).status, 200, "routes without the database answer")
      await new Promise((r) => setTimeout(r, 1500))
    }
    t.ok(rounds >= 4, `${rounds} rounds of requests during the drop`)
  })

  t.test("a partition (connects never answered): 503 within the connect timeout", async (t) => {
    await proxy.drop("blackhole")
    const [a, b] = await Promise.all([call("GET", "/user"), tts()])
    expectDatabase503(t, a, "GET /user")
    expectDatabase503(t, b, "TTS")
    const ready = await call("GET", "/readyz", undefined, service.siteUrl)
    t.equal(ready.status, 503, "/readyz not ready")
    t.ok(ready.seconds < 8, `/readyz answered in ${ready.seconds.toFixed(1)} s`)
  })

  // @effect/sql-pg has no client-side query timeout: a statement written on a pooled connection
  // whose peer goes silent would wait for TCP to give up (minutes). storage/Database.ts watches
  // each plain-TCP connection (DATABASE_RESPONSE_TIMEOUT_S) and closes one that stays silent.
  t.test("a partition that also silences open connections: 503 within a few seconds, not held", async (t) => {
    await proxy.restore()
    for (let i = 0; i < 50 && (await call("GET", "/user")).status !== 200; i++) await new Promise((r) => setTimeout(r, 200))
    await proxy.drop("stall")
    const [a, b] = await Promise.all([call("GET", "/user"), tts()])
    expectDatabase503(t, a, "GET /user")
    expectDatabase503(t, b, "TTS")
  })

  t.test("restored: the same process serves again and the job is not lost", async (t) => {
    await proxy.restore()
    let user = 0
    for (let i = 0; i < 100 && user !== 200; i++) {
      user = (await call("GET", "/user")).status
      if (user !== 200) await new Promise((r) => setTimeout(r, 200))
    }
    t.equal(user, 200, "GET /user answers 200 again")
    const speech = await tts()
    t.equal(speech.status, 200, "TTS answers 200 again")
    t.ok(speech.bytes.length > 1000, "with audio")
    t.equal((await call("GET", "/readyz", undefined, service.siteUrl)).status, 200, "/readyz ready")
    let state = ""
    let job: { state: string; result?: { text?: string }; error?: unknown } = { state: "" }
    for (let i = 0; i < 300 && !["succeeded", "failed", "cancelled"].includes(state); i++) {
      const r = await jobStatus(jobId)
      if (r.status === 200) job = JSON.parse(r.text())
      state = job.state
      await new Promise((r) => setTimeout(r, 200))
    }
    t.equal(state, "succeeded", `the job submitted before the drop finished: ${JSON.stringify(job.error ?? {})}`)
    t.match(job.result?.text ?? "", /\w+/, "with a transcript")
    t.ok(proxy.connections() > 1, "the pool reconnected through the proxy")
  })
}
