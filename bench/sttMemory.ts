/**
 * Memory of the speech-to-text pipeline under the scenario of issue 9: three concurrent
 * POST /v1/speech-to-text of a ~1.3 MB FLAC holding 2 h of silence, once from a user with 0
 * credits and once from a user with enough credits, each against a freshly started server.
 * Prints the server process's RSS (VmRSS, worker threads included) before, at its peak while the
 * requests run (sampled every 20 ms), and 10 s after the last answer, plus the answers' statuses.
 *
 *   npx tsx bench/sttMemory.ts [--workers N] [--seconds S] [--only broke|paying]
 *
 * Long: with credits, each 2 h file is 225 000 VAD frames (~1 min of one core each).
 */
import { execFileSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import * as http from "node:http"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { parseArgs } from "node:util"
import { ffmpegBinary } from "../engines/media/MediaDecoder.ts"
import { root, startService, stop } from "./support.ts"

const { values } = parseArgs({
  options: { workers: { type: "string", default: "2" }, seconds: { type: "string", default: "7200" }, only: { type: "string" } }
})
const seconds = Number(values.seconds)

const scratch = mkdtempSync(path.join(tmpdir(), "speech-bench-sttmem-"))
const flacFile = path.join(scratch, "silence.flac")
execFileSync(ffmpegBinary(), ["-nostdin", "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "anullsrc=r=16000:cl=mono", "-t", String(seconds), "-c:a", "flac", flacFile])
const flac = readFileSync(flacFile)

const rssBytes = (pid: number): number => {
  const status = readFileSync(`/proc/${pid}/status`, "utf8")
  const kb = /VmRSS:\s+(\d+) kB/.exec(status)
  return kb === null ? 0 : Number(kb[1]) * 1024
}
const mb = (b: number) => (b / 1e6).toFixed(0)
const signed = (b: number) => (b < 0 ? "−" : "+") + mb(Math.abs(b))

const createUser = (dataDir: string, credits: number): string => {
  const out = execFileSync(process.execPath, ["--import", "tsx", "runtime/admin.ts", "create-user", "--name", "bench", "--credits", String(credits), "--json"], {
    cwd: root,
    env: { ...process.env, DATA_DIR: dataDir },
    encoding: "utf8"
  })
  return (JSON.parse(out.trim().split("\n").at(-1)!) as { api_key: string }).api_key
}

/** One POST over node:http (fetch gives up after 300 s without headers; a paying run takes longer). */
const post = async (site: string, apiKey: string): Promise<number> => {
  const form = new FormData()
  form.append("model_id", "scribe_v1")
  form.append("file", new Blob([flac], { type: "audio/flac" }), "silence.flac")
  const encoded = new Request(site, { method: "POST", body: form })
  const body = Buffer.from(await encoded.arrayBuffer())
  return new Promise((resolve, reject) => {
    const req = http.request(`${site}/api/v1/speech-to-text`, {
      method: "POST",
      headers: { "xi-api-key": apiKey, "content-type": encoded.headers.get("content-type")!, "content-length": String(body.length) }
    }, (res) => {
      res.resume()
      res.once("end", () => resolve(res.statusCode ?? 0))
    })
    req.once("error", reject)
    req.end(body)
  })
}

const scenario = async (name: string, credits: number) => {
  const service = await startService({ WORKERS: values.workers!, LOG_LEVEL: "info" })
  try {
    const apiKey = createUser(service.dataDir, credits)
    const pid = service.child.pid!
    await new Promise((r) => setTimeout(r, 2000)) // let start-up allocations settle
    const before = rssBytes(pid)
    let peak = before
    const sampler = setInterval(() => {
      peak = Math.max(peak, rssBytes(pid))
    }, 20)
    const t0 = performance.now()
    const statuses = await Promise.all([0, 1, 2].map(() => post(service.site, apiKey)))
    const ms = performance.now() - t0
    await new Promise((r) => setTimeout(r, 10_000))
    clearInterval(sampler)
    const after = rssBytes(pid)
    console.log(`${name.padEnd(8)} statuses ${statuses.join(",")}  ${(ms / 1000).toFixed(1)} s  RSS before ${mb(before)} MB, peak ${mb(peak)} MB (${signed(peak - before)}), 10 s after ${mb(after)} MB (${signed(after - before)})`)
  } finally {
    await stop(service.child)
    rmSync(service.dataDir, { recursive: true, force: true })
  }
}

console.log(`3 concurrent POST /v1/speech-to-text of a ${(flac.length / 1e6).toFixed(2)} MB FLAC of ${seconds} s of silence, WORKERS=${values.workers}`)
try {
  if (values.only !== "paying") await scenario("0 credits", 0)
  if (values.only !== "broke") await scenario("paying", 1_000_000_000)
} finally {
  rmSync(scratch, { recursive: true, force: true })
}
