/**
 * bench/http: requests per second of `GET /api/v1/models` through the whole service, as a ratio
 * against a bare uWebSockets.js handler serving the same bytes, both measured in this run with
 * the same load generator (wrk, one thread, so the server keeps the other core).
 *
 * Run: npm run bench:http   (installs wrk from Debian when missing)
 * `--smoke` (BENCH_SMOKE=1): no wrk; 300 requests over 8 keep-alive fetch clients per server,
 * one round, every answer checked (status 200, the same bytes).
 * Target: ratio ≥ 0.8 (issue 16; the foundation issue asked for 0.7).
 */
import { execFileSync } from "node:child_process"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { freePort, smoke, startProcess, startService, stop } from "./support.ts"

const seconds = Number(process.env.BENCH_SECONDS ?? 8)
const connections = Number(process.env.BENCH_CONNECTIONS ?? 64)
const rounds = Number(process.env.BENCH_ROUNDS ?? (smoke ? 1 : 2))

const ensureWrk = () => {
  try {
    execFileSync("wrk", ["--version"], { stdio: "ignore" })
  } catch (e) {
    if ((e as { code?: string }).code !== "ENOENT") return
    console.error("wrk missing: installing it with apt-get")
    execFileSync("sh", ["-c", "apt-get install -y wrk >/dev/null 2>&1 || (apt-get update >/dev/null && apt-get install -y wrk >/dev/null)"], { stdio: "inherit" })
  }
}

const wrk = (url: string): number => {
  const out = execFileSync("wrk", ["-t1", `-c${connections}`, `-d${seconds}s`, "--latency", url], { encoding: "utf8" })
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(out)
  const non2xx = /Non-2xx or 3xx responses:\s+(\d+)/.exec(out)
  if (non2xx) throw new Error(`wrk saw ${non2xx[1]} failed responses from ${url}`)
  return Number(rps![1])
}

/** Smoke-mode load: `total` GETs from `clients` fetch loops; each answer must be 200. */
const fetchLoad = async (url: string, total = 300, clients = 8): Promise<number> => {
  let started = 0
  const t0 = performance.now()
  await Promise.all(Array.from({ length: clients }, async () => {
    while (started < total) {
      started++
      const res = await fetch(url)
      const bytes = await res.arrayBuffer()
      if (res.status !== 200 || bytes.byteLength === 0) throw new Error(`${url} answered ${res.status} with ${bytes.byteLength} bytes`)
    }
  }))
  return total / ((performance.now() - t0) / 1000)
}
const measure = (url: string): Promise<number> => (smoke ? fetchLoad(url) : Promise.resolve(wrk(url)))

if (!smoke) ensureWrk()
const service = await startService({ WORKERS: "1" })
const url = `${service.site}/api/v1/models`
const body = await (await fetch(url)).arrayBuffer()
const dir = mkdtempSync(path.join(tmpdir(), "bench-http-"))
writeFileSync(path.join(dir, "body.json"), Buffer.from(body))
const barePort = await freePort()
const bare = await startProcess(process.execPath, ["bench/bareServer.mjs", String(barePort), "/api/v1/models", path.join(dir, "body.json")], {}, /listening/)
const bareUrl = `http://127.0.0.1:${barePort}/api/v1/models`

try {
  // Warm both (JIT) before measuring; alternate rounds so drift on a shared machine hits both.
  if (!smoke) {
    wrk(url)
    wrk(bareUrl)
  }
  const ours: Array<number> = []
  const baseline: Array<number> = []
  for (let i = 0; i < rounds; i++) {
    ours.push(await measure(url))
    baseline.push(await measure(bareUrl))
  }
  const best = (xs: Array<number>) => Math.max(...xs)
  const ratio = best(ours) / best(baseline)
  console.log(smoke
    ? `GET /api/v1/models, smoke: 300 requests over 8 fetch clients, body ${body.byteLength} bytes`
    : `GET /api/v1/models, ${connections} connections, ${seconds}s x ${rounds} rounds, body ${body.byteLength} bytes`)
  console.log(`  service     ${best(ours).toFixed(0)} req/s  (rounds: ${ours.map((x) => x.toFixed(0)).join(", ")})`)
  console.log(`  bare uWS    ${best(baseline).toFixed(0)} req/s  (rounds: ${baseline.map((x) => x.toFixed(0)).join(", ")})`)
  console.log(`  ratio       ${ratio.toFixed(2)}  (target >= 0.8)`)
} finally {
  await stop(service.child)
  await stop(bare)
}
