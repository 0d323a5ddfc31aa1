/**
 * bench/jobs: recognition-job throughput against the number of inference workers per server
 * (W) and of server processes (P) on one database, measured in one run on the same machine.
 *
 * For each (W, P): P servers (WORKERS=W, JOBS_CONCURRENCY=W) share one PostgreSQL schema and
 * one DATA_DIR (the embedded blob store needs a shared volume across instances). N jobs of the
 * same 7.1 s LibriVox reading (real speech from pocketsphinx-testdata) are reserved and uploaded
 * round-robin through the servers, then all started at once (a burst). Printed per row:
 * - jobs per minute: N / (last finish − first start), and the ratio to W=1, P=1;
 * - start → claim, p50 / p99: from the client's start request to the job's `started_at` (its
 *   first claim, the database's clock; same machine);
 * - claims per server (how the queue split the burst) and any job claimed twice (must be 0).
 *
 * P=2 needs PostgreSQL (one embedded PGlite directory belongs to one process): DATABASE_URL or
 * BENCH_DATABASE_URL; without one only P=1 rows run, on embedded PGlite.
 * Run: npm run bench:jobs. Knobs: BENCH_JOBS (default 24), BENCH_MAX_WORKERS (default 2).
 * `--smoke` (BENCH_SMOKE=1): 2 jobs, W=1, P=1 (and P=2 when a database URL is given).
 */
import { spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { Effect } from "effect"
import { adminStatement } from "../storage/Database.ts"
import { root, smoke, startService, stop } from "./support.ts"

const SPEECH = readFileSync("/usr/share/pocketsphinx/test/data/librivox/sense_and_sensibility_01_austen_64kb-0870.wav")
const jobCount = Number(process.env.BENCH_JOBS ?? (smoke ? 2 : 24))
const maxWorkers = Number(process.env.BENCH_MAX_WORKERS ?? (smoke ? 1 : 2))
const pg = process.env.BENCH_DATABASE_URL ?? process.env.DATABASE_URL

const quantile = (xs: ReadonlyArray<number>, q: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]!
}

/** A fresh schema on the PostgreSQL server, and a URL whose connections use it. */
const freshSchema = async (url: string) => {
  const schema = `bench_jobs_${randomBytes(5).toString("hex")}`
  await Effect.runPromise(adminStatement(url, `CREATE SCHEMA ${schema}`))
  const isolated = new URL(url)
  isolated.searchParams.set("options", `-c search_path=${schema}`)
  return { url: isolated.toString(), drop: () => Effect.runPromise(adminStatement(url, `DROP SCHEMA ${schema} CASCADE`).pipe(Effect.ignore)) }
}

const newKey = (env: Record<string, string>) =>
  new Promise<string>((resolve, reject) => {
    const admin = spawn(process.execPath, ["--import", "tsx", "runtime/admin.ts", "create-user", "--name", "bench", "--credits", "1000000", "--json"], {
      cwd: root,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "inherit"]
    })
    let text = ""
    admin.stdout!.setEncoding("utf8").on("data", (s: string) => (text += s))
    admin.once("exit", (code) => (code === 0 ? resolve((JSON.parse(text.trim().split("\n").at(-1)!) as { api_key: string }).api_key) : reject(new Error(`admin exited ${code}`))))
  })

const json = async (res: Response) => {
  const body = await res.json() as Record<string, any>
  if (res.status >= 300) throw new Error(`${res.url}: ${res.status} ${JSON.stringify(body)}`)
  return body
}

interface Row {
  readonly workers: number
  readonly processes: number
  readonly perMinute: number
  readonly claimP50: number
  readonly claimP99: number
  readonly split: ReadonlyArray<number>
  readonly doubleClaims: number
}

const runRow = async (workers: number, processes: number): Promise<Row> => {
  const schema = processes > 1 || pg !== undefined ? await freshSchema(pg!) : undefined
  const dataDir = mkdtempSync(path.join(tmpdir(), "bench-jobs-"))
  const env: Record<string, string> = {
    WORKERS: String(workers),
    JOBS_CONCURRENCY: String(workers),
    JOB_POLL_MS: "200",
    LOG_LEVEL: "info",
    DATA_DIR: dataDir,
    ...(schema !== undefined ? { DATABASE_URL: schema.url } : {})
  }
  // One at a time: the first creates the schema's tables.
  const servers: Array<Awaited<ReturnType<typeof startService>>> = []
  for (let i = 0; i < processes; i++) servers.push(await startService(env))
  const logs = servers.map((s) => {
    let text = ""
    s.child.stdout!.setEncoding("utf8").on("data", (d: string) => (text += d))
    return () => text
  })
  try {
    const apiKey = await newKey(env)
    const headers = { "xi-api-key": apiKey, "content-type": "application/json" }
    const jobs = await Promise.all(Array.from({ length: jobCount }, async (_, i) => {
      const site = servers[i % processes]!.site
      const reserved = await json(await fetch(`${site}/api/v1/recognition/uploads`, { method: "POST", headers, body: JSON.stringify({ content_type: "audio/wav" }) }))
      await json(await fetch(reserved.upload_url as string, { method: "PUT", body: SPEECH }))
      return { id: reserved.job_id as string, site, startSentAt: 0 }
    }))
    const first = Date.now()
    await Promise.all(jobs.map(async (job) => {
      job.startSentAt = Date.now()
      await json(await fetch(`${job.site}/api/v1/recognition/jobs/${job.id}/start`, { method: "POST", headers, body: "{}" }))
    }))
    const finished = new Map<string, { finishedAt: number; claimMs: number }>()
    while (finished.size < jobs.length) {
      await new Promise((r) => setTimeout(r, 200))
      for (const job of jobs) {
        if (finished.has(job.id)) continue
        const s = await json(await fetch(`${job.site}/api/v1/recognition/jobs/${job.id}`, { headers }))
        if (s.state === "failed" || s.state === "cancelled") throw new Error(`job ${job.id} ${s.state}: ${JSON.stringify(s.error)}`)
        if (s.state === "succeeded") {
          finished.set(job.id, { finishedAt: Date.parse(s.finished_at), claimMs: Date.parse(s.started_at) - job.startSentAt })
        }
      }
    }
    const last = Math.max(...[...finished.values()].map((f) => f.finishedAt))
    const claims = logs.map((log) => log().split("\n").filter((l) => l.includes('"msg":"job claimed"')).length)
    const claimDelays = [...finished.values()].map((f) => Math.max(0, f.claimMs) / 1000)
    return {
      workers,
      processes,
      perMinute: jobs.length / ((last - first) / 60_000),
      claimP50: quantile(claimDelays, 0.5),
      claimP99: quantile(claimDelays, 0.99),
      split: claims,
      doubleClaims: claims.reduce((a, b) => a + b, 0) - jobs.length
    }
  } finally {
    await Promise.all(servers.map((s) => stop(s.child)))
    rmSync(dataDir, { recursive: true, force: true })
    await schema?.drop()
  }
}

const plan: Array<[number, number]> = []
for (let w = 1; w <= maxWorkers; w++) for (const p of pg !== undefined ? [1, 2] : [1]) plan.push([w, p])
if (pg === undefined) console.log("no DATABASE_URL / BENCH_DATABASE_URL: P=2 rows skipped (one PGlite directory belongs to one process)")
console.log(`${jobCount} jobs of 7.1 s real speech per row, started in one burst`)
const rows: Array<Row> = []
for (const [w, p] of plan) {
  const row = await runRow(w, p)
  rows.push(row)
  const base = rows[0]!.perMinute
  console.log(
    `W=${w} P=${p}: ${row.perMinute.toFixed(1)} jobs/min (${(row.perMinute / base).toFixed(2)}× W=1 P=1), ` +
      `start→claim p50 ${row.claimP50.toFixed(1)} s p99 ${row.claimP99.toFixed(1)} s, claims per server ${row.split.join("/")}, double claims ${row.doubleClaims}`
  )
  if (row.doubleClaims !== 0) {
    console.error("a job was claimed more than once")
    process.exit(1)
  }
}
process.exit(0)
