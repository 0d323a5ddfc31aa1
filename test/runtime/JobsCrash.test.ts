/**
 * Recognition jobs across whole processes (runtime/main.ts as a child):
 * - a server killed with SIGKILL while a job runs, then started again on the same database
 *   (the same embedded directory, or PostgreSQL), finishes that job exactly once: one terminal
 *   state, two claims in the logs, one "job finished", the user charged once;
 * - two servers on one PostgreSQL never run the same job twice (every job claimed once).
 * The work is real: LibriVox speech from pocketsphinx-testdata through the real engines.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import t from "tap"
import { sttCredits } from "../../actors/CreditPolicy.ts"
import { isolatedDatabaseUrl } from "../support/database.ts"
import { type ServiceProcess, startServiceProcess } from "../support/serviceProcess.ts"
import { repeatedSpeech, SPEECH } from "../support/librivoxSpeech.ts"

const api = (p: ServiceProcess, apiKey: string) => async (method: string, route: string, body?: unknown) => {
  const res = await fetch(`${p.siteUrl}/api/v1${route}`, {
    method,
    headers: { "xi-api-key": apiKey, ...(body !== undefined ? { "content-type": "application/json" } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {})
  })
  return { status: res.status, json: await res.json() as Record<string, any> }
}

/** Reserve, PUT and start one job; its id. */
const submit = async (p: ServiceProcess, apiKey: string, audio: Buffer) => {
  const call = api(p, apiKey)
  const reserved = await call("POST", "/recognition/uploads", { content_type: "audio/wav", size_bytes: audio.length })
  if (reserved.status !== 201) throw new Error(`reserve: ${reserved.status} ${JSON.stringify(reserved.json)}`)
  const put = await fetch(reserved.json.upload_url, { method: "PUT", body: audio })
  if (put.status !== 200) throw new Error(`PUT: ${put.status}`)
  const started = await call("POST", `/recognition/jobs/${reserved.json.job_id}/start`, {})
  if (started.status !== 202) throw new Error(`start: ${started.status} ${JSON.stringify(started.json)}`)
  return reserved.json.job_id as string
}

const waitUntil = async (what: string, ok: () => Promise<boolean>, seconds = 240) => {
  for (let i = 0; i < seconds * 5; i++) {
    if (await ok()) return
    await new Promise((r) => setTimeout(r, 200))
  }
  throw new Error(`timed out waiting for ${what}`)
}

interface LogLine {
  msg: string
  jobId?: string
  claims?: number
}
const logLines = (p: ServiceProcess): Array<LogLine> =>
  p.output().split("\n").filter((l) => l.startsWith("{")).map((l) => {
    try {
      return JSON.parse(l) as LogLine
    } catch {
      return { msg: "" }
    }
  })

t.test("a server killed with SIGKILL mid-job: the restarted server finishes it exactly once", async (t) => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "jobs-crash-"))
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }))
  const pg = process.env.DATABASE_URL
  const databaseUrl = pg !== undefined && pg !== "" ? await isolatedDatabaseUrl(t, pg) : undefined
  const settings = { env: { JOB_LEASE_S: "3", JOB_POLL_MS: "200" }, dataDir, ...(databaseUrl !== undefined ? { databaseUrl } : {}) }

  const first = await startServiceProcess(t, settings)
  const credits = 1000
  const apiKey = await first.newKey(credits)
  // Long enough to still be recognising when it is killed, even on a quiet machine.
  const jobId = await submit(first, apiKey, repeatedSpeech(3))
  await waitUntil("the job to run", async () => {
    const s = await api(first, apiKey)("GET", `/recognition/jobs/${jobId}`)
    return s.json.state === "running" && s.json.progress?.stage === "recognising"
  })
  first.child.kill("SIGKILL")
  await new Promise((r) => first.child.once("exit", r))
  t.ok(logLines(first).some((l) => l.msg === "job claimed" && l.jobId === jobId), "the first server had claimed it")
  t.notOk(logLines(first).some((l) => l.msg === "job finished"), "and had not finished it")

  const second = await startServiceProcess(t, settings)
  const call = api(second, apiKey)
  let status = await call("GET", `/recognition/jobs/${jobId}`)
  await waitUntil("the job to end", async () => {
    status = await call("GET", `/recognition/jobs/${jobId}`)
    return ["succeeded", "failed", "cancelled"].includes(status.json.state)
  })
  t.equal(status.json.state, "succeeded", JSON.stringify(status.json.error ?? {}))
  const words = (status.json.result.words as Array<{ type: string }>).filter((w) => w.type === "word")
  t.ok(words.length > 3 * 8, `the whole 3× recording was transcribed (${words.length} words)`)
  const duration = status.json.audio_duration_s as number
  t.ok(Math.abs(duration - 3 * 7.1) < 0.5, `duration ${duration} s`)

  const claims = [...logLines(first), ...logLines(second)].filter((l) => l.msg === "job claimed" && l.jobId === jobId)
  t.same(claims.map((c) => c.claims), [1, 2], "claimed twice: by the dead server, then by the new one")
  t.equal(logLines(second).filter((l) => l.msg === "job finished" && l.jobId === jobId).length, 1, "finished once")

  // The dead server's reservation comes back, the new one is charged: one charge in all.
  const charge = sttCredits(duration * 1000)
  let balance = -1
  await waitUntil("the balance to settle", async () => {
    balance = (await call("GET", "/user/subscription")).json.character_limit as number
    return balance === credits - charge
  }, 60).catch(() => {})
  t.equal(balance, credits - charge, `charged once: ${charge} credits for ${duration} s`)
  second.child.kill("SIGTERM")
})

t.test("two servers on one PostgreSQL never run the same job twice", { skip: process.env.DATABASE_URL ? false : "needs DATABASE_URL (PGlite has one process per directory)" }, async (t) => {
  const databaseUrl = await isolatedDatabaseUrl(t, process.env.DATABASE_URL!)
  // With the embedded blob store, instances share DATA_DIR (a shared volume in a deployment):
  // an upload that landed through one is run by whichever claims it.
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "jobs-two-"))
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }))
  const settings = { env: { JOB_POLL_MS: "100", JOBS_CONCURRENCY: "1" }, databaseUrl, dataDir }
  const [a, b] = await Promise.all([startServiceProcess(t, settings), startServiceProcess(t, settings)])
  const apiKey = await a.newKey(10_000)
  // Half submitted to each, all at once: both race for every job.
  const ids = await Promise.all(Array.from({ length: 12 }, (_, i) => submit(i % 2 === 0 ? a : b, apiKey, SPEECH)))
  const call = api(a, apiKey)
  await waitUntil("all jobs to end", async () => {
    const states = await Promise.all(ids.map(async (id) => (await call("GET", `/recognition/jobs/${id}`)).json.state))
    return states.every((s) => s === "succeeded" || s === "failed")
  })
  for (const id of ids) {
    const s = (await call("GET", `/recognition/jobs/${id}`)).json
    t.equal(s.state, "succeeded", JSON.stringify(s.error ?? {}))
  }
  const claimsA = logLines(a).filter((l) => l.msg === "job claimed")
  const claimsB = logLines(b).filter((l) => l.msg === "job claimed")
  const all = [...claimsA, ...claimsB]
  t.equal(all.length, 12, `12 claims in all (${claimsA.length} on one server, ${claimsB.length} on the other)`)
  t.equal(new Set(all.map((c) => c.jobId)).size, 12, "each job claimed by exactly one server")
  t.ok(all.every((c) => c.claims === 1), "and only once")
  t.ok(claimsA.length > 0 && claimsB.length > 0, "both servers did work")
})
