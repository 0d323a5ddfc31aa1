/**
 * bench/flite-memory: resident memory at rest and time per synthesis of the Flite engine, in a
 * worker-like process, for the engine of this checkout (one instance per thread, reset before
 * every run) and for the version before that ("fresh": a new WebAssembly instance for every
 * run, two runs per synthesis), taken from git.
 *
 *   npx tsx bench/flite-memory.ts [--baseline REV] [--syntheses N] [--smoke]
 *
 * Each variant runs in its own child process with the engine on a worker thread, as in the
 * service; the main thread reads VmRSS of the process (worker included) 2 s after load, after
 * the first synthesis and after the last one. No GC is forced: at rest none comes. Time per
 * synthesis is the median over syntheses 2..N (the first includes the JIT's warm-up). Texts
 * rotate through service-sized segments (≤ 400 characters, engines/text/Segmenter.ts).
 * The baseline defaults to the parent of the commit that added engines/tts/WasmGlobals.ts
 * (HEAD while that file is not committed yet).
 */
import { execFileSync, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { once } from "node:events"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { parseArgs } from "node:util"
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads"
import { root, smoke } from "./support.ts"

const TEXTS = [
  "The quick brown fox.",
  "It costs $5.50 on 3/4/2020 at 12:45, so please call 555-0199 before noon.",
  "Hello there, Dr. Smith! It's 12 o'clock, and the train to Boston leaves at 3:45. Please don't be late, because the next one is not until tomorrow morning.",
  "The committee met on March 3rd, 2021, and approved a budget of $1,250,000 for 17 new buses; the questions about the old depot, the drivers' contracts and the timetable " +
    "for the winter were left for another meeting, which nobody has yet managed to schedule, and the town waits for an answer that may never come."
]
const VOICE = { engine: "flite", language: "en", variant: "slt", pitch: 1, rate: 1 } as const
const PAUSE_MS = smoke ? 200 : 2000

interface Step {
  readonly label: string
  /** ms per synthesis for the steps that synthesized. */
  readonly ms: ReadonlyArray<number>
}

/** Worker thread: loads the engine module it is given and synthesizes when told to. */
const workerMain = async () => {
  const { moduleUrl, syntheses } = workerData as { moduleUrl: string; syntheses: number }
  const { FliteTts } = (await import(moduleUrl)) as typeof import("../engines/tts/FliteTts.ts")
  const port = parentPort!
  const engine = await FliteTts.load()
  const synthesize = async (k: number) => {
    const t0 = performance.now()
    await engine.synthesize({ text: TEXTS[k % TEXTS.length]!, voice: VOICE, speed: 1 })
    return performance.now() - t0
  }
  const step = async (message: Step) => {
    port.postMessage(message)
    await once(port, "message") // the main thread has read the RSS
  }
  await step({ label: "loaded", ms: [] })
  await step({ label: "after 1 synthesis", ms: [await synthesize(0)] })
  const ms: Array<number> = []
  for (let k = 1; k < syntheses; k++) ms.push(await synthesize(k))
  await step({ label: `after ${syntheses} syntheses`, ms })
  engine.dispose()
}

const rssMb = () => Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync("/proc/self/status", "utf8"))![1]) / 1024

/** Child process: runs the worker and prints one JSON line per step. */
const childMain = async (moduleUrl: string, syntheses: number) => {
  // A worker does not inherit the TypeScript loader of `--import tsx`: it registers its own
  // (as runtime/worker.mjs does) before loading this file.
  const bootstrap = `import(${JSON.stringify(import.meta.resolve("tsx/esm/api"))}).then((tsx) => { tsx.register(); return import(${JSON.stringify(import.meta.url)}) })`
  const worker = new Worker(bootstrap, { eval: true, workerData: { moduleUrl, syntheses } })
  worker.on("message", (step: Step) => {
    setTimeout(() => {
      console.log(JSON.stringify({ ...step, rssMb: rssMb() }))
      worker.postMessage("next")
    }, PAUSE_MS)
  })
  const [code] = (await once(worker, "exit")) as [number]
  process.exitCode = code
}

/** The engine file of `rev` in a temporary directory, its imports pointed back at this checkout. */
const engineAt = (rev: string, dir: string): string => {
  const source = execFileSync("git", ["show", `${rev}:engines/tts/FliteTts.ts`], { cwd: root, encoding: "utf8" })
  const here = path.join(root, "engines/tts")
  const rewritten = source
    .replace(/from "(\.\.?\/[^"]+)"/g, (_, rel: string) => `from ${JSON.stringify(pathToFileURL(path.resolve(here, rel)).href)}`)
    .replace(/createRequire\(import\.meta\.url\)/g, `createRequire(${JSON.stringify(pathToFileURL(path.join(here, "FliteTts.ts")).href)})`)
  const file = path.join(dir, "FliteTts.ts")
  writeFileSync(file, rewritten)
  writeFileSync(path.join(dir, "package.json"), JSON.stringify({ type: "module" })) // an ES module, as in the checkout
  return pathToFileURL(file).href
}

const defaultBaseline = (): string => {
  const added = execFileSync("git", ["log", "--diff-filter=A", "--format=%H", "--", "engines/tts/WasmGlobals.ts"], { cwd: root, encoding: "utf8" }).trim().split("\n").at(-1)
  return added === undefined || added === "" ? "HEAD" : `${added}^`
}

const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN

const measure = async (name: string, moduleUrl: string, syntheses: number) => {
  const child = spawn(process.execPath, ["--import", "tsx", fileURLToPath(import.meta.url), "--child", moduleUrl, "--syntheses", String(syntheses)], {
    cwd: root,
    stdio: ["ignore", "pipe", "inherit"]
  })
  let out = ""
  child.stdout.on("data", (d: Buffer) => (out += d.toString()))
  const [code] = (await once(child, "exit")) as [number]
  if (code !== 0) throw new Error(`${name}: child exited with ${code}`)
  const steps = out.trim().split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as Step & { rssMb: number })
  const loaded = steps[0]!.rssMb
  const parts = steps.slice(1).map((s) => `${s.label} ${s.rssMb.toFixed(0)} MB (+${(s.rssMb - loaded).toFixed(0)})`)
  const ms = median(steps.at(-1)!.ms)
  console.log(`  ${name}: loaded ${loaded.toFixed(0)} MB; ${parts.join("; ")}; ${ms.toFixed(0)} ms per synthesis (first ${steps[1]!.ms[0]!.toFixed(0)} ms)`)
}

if (!isMainThread) await workerMain()
else {
  const { values } = parseArgs({
    options: { child: { type: "string" }, syntheses: { type: "string", default: smoke ? "3" : "20" }, baseline: { type: "string" }, smoke: { type: "boolean" } }
  })
  const syntheses = Math.max(2, Number(values.syntheses))
  if (values.child !== undefined) await childMain(values.child, syntheses)
  else {
    const baseline = values.baseline ?? defaultBaseline()
    const dir = mkdtempSync(path.join(tmpdir(), "speech-bench-flite-"))
    try {
      const rev = execFileSync("git", ["rev-parse", "--short", baseline], { cwd: root, encoding: "utf8" }).trim()
      console.log(`Flite on a worker thread: VmRSS of the process ${PAUSE_MS / 1000} s after each step (no forced GC), voice ${VOICE.variant}, ${TEXTS.length} texts of ${TEXTS.map((t) => t.length).join("/")} characters in turn`)
      await measure(`fresh instance per run (git ${rev})`, engineAt(baseline, dir), syntheses)
      await measure("one instance per thread, reset per run (this checkout)", pathToFileURL(path.join(root, "engines/tts/FliteTts.ts")).href, syntheses)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }
}
