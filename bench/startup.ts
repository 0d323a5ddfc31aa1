/**
 * Start-up time and resident memory: `node --import tsx runtime/main.ts` (development) against
 * `node dist/runtime/main.js` (production build, `npm run build`), same environment.
 *
 *   npx tsx bench/startup.ts [--runs 3] [--dist-root DIR] [--smoke]
 *
 * Per run: spawn the server, time until GET /readyz answers 200 ("ready"); then one
 * text-to-speech and one speech-to-text request (so the worker threads load their engines), wait
 * 5 s, and read VmRSS / VmHWM from /proc/PID/status (the worker threads share the process, so its
 * RSS includes them). The modes alternate run by run and share one embedded database (made and
 * given a user before the first run), so neither pays PGlite's first initdb.
 *
 * `--dist-root DIR` runs the production mode from another tree holding dist/, package.json and
 * node_modules, e.g. a copy whose node_modules has no tsx, to show that the build does not need it.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { freePort, root, smoke, stop } from "./support.ts"

const option = (name: string): string | undefined => {
  const i = process.argv.indexOf(name)
  return i >= 0 ? process.argv[i + 1] : undefined
}
const runs = smoke ? 1 : Number(option("--runs") ?? 3)
const distRoot = path.resolve(option("--dist-root") ?? root)
const settleMs = smoke ? 500 : 5_000

interface Mode {
  readonly name: string
  readonly cwd: string
  readonly args: ReadonlyArray<string>
}
const modes: ReadonlyArray<Mode> = [
  { name: "tsx  (node --import tsx runtime/main.ts)", cwd: root, args: ["--import", "tsx", "runtime/main.ts"] },
  { name: "dist (node dist/runtime/main.js)", cwd: distRoot, args: ["dist/runtime/main.js"] }
]

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Milliseconds from spawn until /readyz says ready. */
const untilReady = async (site: string, child: ChildProcess, started: number): Promise<number> => {
  for (;;) {
    if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode} before it was ready`)
    try {
      const res = await fetch(`${site}/readyz`)
      if (res.status === 200) return performance.now() - started
    } catch {
      // not listening yet
    }
    if (performance.now() - started > 120_000) throw new Error("not ready after 120 s")
    await sleep(20)
  }
}

const wavOf = (pcm: Uint8Array, rate: number): Uint8Array => {
  const h = Buffer.alloc(44)
  h.write("RIFF", 0), h.writeUInt32LE(36 + pcm.length, 4), h.write("WAVE", 8), h.write("fmt ", 12)
  h.writeUInt32LE(16, 16), h.writeUInt16LE(1, 20), h.writeUInt16LE(1, 22), h.writeUInt32LE(rate, 24)
  h.writeUInt32LE(rate * 2, 28), h.writeUInt16LE(2, 32), h.writeUInt16LE(16, 34), h.write("data", 36), h.writeUInt32LE(pcm.length, 40)
  return Buffer.concat([h, pcm])
}

/** One TTS and one STT request; the transcript is returned so a broken engine shows. */
const exercise = async (site: string, key: string): Promise<string> => {
  const tts = await fetch(`${site}/api/v1/text-to-speech/emma-en?output_format=pcm_16000`, {
    method: "POST",
    headers: { "xi-api-key": key, "content-type": "application/json" },
    body: JSON.stringify({ text: "Hello from the start-up benchmark. The quick brown fox jumps over the lazy dog." })
  })
  if (tts.status !== 200) throw new Error(`TTS answered ${tts.status}: ${await tts.text()}`)
  const form = new FormData()
  form.set("model_id", "scribe_v1")
  form.set("file", new Blob([wavOf(new Uint8Array(await tts.arrayBuffer()), 16_000)], { type: "audio/wav" }), "speech.wav")
  const stt = await fetch(`${site}/api/v1/speech-to-text`, { method: "POST", headers: { "xi-api-key": key }, body: form })
  if (stt.status !== 200) throw new Error(`STT answered ${stt.status}: ${await stt.text()}`)
  return ((await stt.json()) as { text: string }).text
}

const memoryOf = (pid: number) => {
  const status = readFileSync(`/proc/${pid}/status`, "utf8")
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN)
  return { rssMb: kb("VmRSS") / 1024, hwmMb: kb("VmHWM") / 1024, threads: Number(/^Threads:\s+(\d+)/m.exec(status)?.[1]) }
}

const main = async () => {
  try {
    execFileSync(process.execPath, [path.join(root, "scripts/build.mjs"), "--if-stale"], { stdio: "inherit" })
  } catch {
    if (!existsSync(path.join(root, "dist/runtime/main.js"))) throw new Error("no dist/ and the build failed")
    console.log("the build failed; measuring the dist/ already there (older than the sources)")
  }
  if (distRoot !== root && !existsSync(path.join(distRoot, "dist/runtime/main.js"))) throw new Error(`${distRoot} has no dist/runtime/main.js`)
  const dataDir = mkdtempSync(path.join(tmpdir(), "speech-startup-"))
  const env = { ...process.env, DATA_DIR: dataDir, HOST: "127.0.0.1", WORKERS: process.env.WORKERS ?? "2", LOG_LEVEL: "warn" }
  const created = execFileSync(process.execPath, ["--import", "tsx", "runtime/admin.ts", "create-user", "--name", "startup-bench", "--credits", "100000000", "--json"], { cwd: root, env })
  const key = (JSON.parse(created.toString()) as { api_key: string }).api_key
  console.log(`dist mode runs from ${distRoot} (node_modules/tsx ${existsSync(path.join(distRoot, "node_modules/tsx")) ? "present" : "absent"}); WORKERS=${env.WORKERS}`)
  const results = new Map<string, Array<{ readyMs: number; rssMb: number; hwmMb: number }>>(modes.map((m) => [m.name, []]))
  try {
    for (let run = 1; run <= runs; run++) {
      for (const mode of modes) {
        const port = await freePort()
        const started = performance.now()
        const child = spawn(process.execPath, mode.args, { cwd: mode.cwd, env: { ...env, PORT: String(port) }, stdio: ["ignore", "ignore", "inherit"] })
        try {
          const site = `http://127.0.0.1:${port}`
          const readyMs = await untilReady(site, child, started)
          const text = await exercise(site, key)
          await sleep(settleMs)
          const mem = memoryOf(child.pid!)
          results.get(mode.name)!.push({ readyMs, ...mem })
          console.log(`run ${run} ${mode.name}: ready ${readyMs.toFixed(0)} ms, VmRSS ${mem.rssMb.toFixed(1)} MB (peak ${mem.hwmMb.toFixed(1)}, ${mem.threads} threads); heard "${text}"`)
        } finally {
          await stop(child)
        }
      }
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true })
  }
  const median = (xs: Array<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
  console.log("\nmode | ready ms (runs) | median | VmRSS MB (runs) | median")
  for (const [name, rows] of results) {
    const ready = rows.map((r) => r.readyMs), rss = rows.map((r) => r.rssMb)
    console.log(`${name} | ${ready.map((x) => x.toFixed(0)).join(", ")} | ${median(ready).toFixed(0)} | ${rss.map((x) => x.toFixed(0)).join(", ")} | ${median(rss).toFixed(0)}`)
  }
}

await main()
