/** Shared plumbing for the benchmarks: free ports, child processes that announce readiness. */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { mkdtempSync, readFileSync } from "node:fs"
import * as net from "node:net"
import { tmpdir } from "node:os"
import * as path from "node:path"

export const root = path.resolve(import.meta.dirname, "..")

/**
 * Smoke mode (`--smoke` or BENCH_SMOKE=1): tiny inputs, seconds instead of minutes, the same
 * path end to end. `.ci/run` runs every bench so; a bench that breaks fails CI (non-zero exit)
 * instead of rotting. Its numbers mean nothing.
 */
export const smoke = process.argv.includes("--smoke") || process.env.BENCH_SMOKE === "1"

export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const s = net.createServer()
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as net.AddressInfo
      s.close(() => resolve(port))
    })
    s.on("error", reject)
  })

/** Spawns a process and resolves once a line of its stdout matches `ready`. */
export const startProcess = (
  command: string,
  args: ReadonlyArray<string>,
  env: Record<string, string>,
  ready: RegExp
): Promise<ChildProcess> =>
  new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: root, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "inherit"] })
    let buffered = ""
    const onData = (d: Buffer) => {
      buffered += d.toString()
      if (ready.test(buffered)) {
        child.stdout!.off("data", onData)
        child.stdout!.resume()
        resolve(child)
      }
    }
    child.stdout!.on("data", onData)
    child.once("exit", (code) => reject(new Error(`${command} ${args.join(" ")} exited with ${code} before it was ready`)))
  })

/**
 * How benches run the service: the production build (`dist/`, built first when stale; what
 * `npm start` runs) unless BENCH_RUNTIME=tsx asks for the sources under tsx. Memory and start-up
 * differ a lot between the two (tsx compiles every module in every worker thread).
 * BENCH_CPU_PROF=<dir>: the service writes V8 CPU profiles there when it stops, one for the main
 * thread and one per worker thread (open them in Chrome's DevTools).
 */
export const serviceArgs = (): Array<string> => {
  const profile = process.env.BENCH_CPU_PROF ? ["--cpu-prof", `--cpu-prof-dir=${path.resolve(process.env.BENCH_CPU_PROF)}`] : []
  if (process.env.BENCH_RUNTIME === "tsx") return [...profile, "--import", "tsx", "runtime/main.ts"]
  execFileSync(process.execPath, ["scripts/build.mjs", "--if-stale"], { cwd: root, stdio: ["ignore", "ignore", "inherit"] })
  return [...profile, "dist/runtime/main.js"]
}

/** The database benches run on: the PostgreSQL of DATABASE_URL when set, else embedded PGlite. */
export const databaseLabel = (): string =>
  process.env.DATABASE_URL ? `PostgreSQL (${new URL(process.env.DATABASE_URL).host})` : "embedded PGlite (set DATABASE_URL for a PostgreSQL server)"

/** Starts the service on a free port with a fresh embedded database; resolves its site URL. */
export const startService = async (env: Record<string, string> = {}) => {
  const port = await freePort()
  const dataDir = mkdtempSync(path.join(tmpdir(), "speech-bench-"))
  const child = await startProcess(
    process.execPath,
    serviceArgs(),
    { PORT: String(port), HOST: "127.0.0.1", DATA_DIR: dataDir, LOG_LEVEL: "info", ...env },
    /"msg":"listening"/
  )
  return { child, port, site: `http://127.0.0.1:${port}`, dataDir }
}

export const stop = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (child.exitCode !== null) return resolve()
    child.once("exit", () => resolve())
    child.kill("SIGTERM")
  })

/** A number a shell command prints (`ulimit -n`, `getconf CLK_TCK`); "unlimited" is Infinity. */
export const shellNumber = (command: string): number => {
  const out = execFileSync("sh", ["-c", command], { encoding: "utf8" }).trim()
  return out === "unlimited" ? Infinity : Number(out)
}

let ticksPerS: number | undefined
/** User + system CPU seconds of one /proc stat line (clock ticks of `getconf CLK_TCK`). */
const statCpuSeconds = (stat: string): number => {
  ticksPerS ??= shellNumber("getconf CLK_TCK")
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return (Number(fields[11]) + Number(fields[12])) / ticksPerS
}

/** CPU seconds of a process, all threads. */
export const cpuSeconds = (pid: number): number => statCpuSeconds(readFileSync(`/proc/${pid}/stat`, "utf8"))

/**
 * CPU seconds of a process's main thread (its tid is its pid) and of everything else in it: the
 * process's total less the main thread, so threads that ended in between still count.
 */
export const threadCpuSeconds = (pid: number): { readonly main: number; readonly others: number } => {
  const main = statCpuSeconds(readFileSync(`/proc/${pid}/task/${pid}/stat`, "utf8"))
  return { main, others: cpuSeconds(pid) - main }
}

/** A user with plenty of credits in a benched service's database (runtime/admin.ts); its API key. */
export const benchApiKey = (dataDir: string): string => {
  const created = execFileSync(process.execPath, ["--import", "tsx", "runtime/admin.ts", "create-user", "--name", "bench", "--credits", "1000000000", "--json"], {
    cwd: root,
    env: { ...process.env, DATA_DIR: dataDir },
    encoding: "utf8"
  })
  return (JSON.parse(created.trim().split("\n").at(-1)!) as { api_key: string }).api_key
}

/** VmRSS of a process, MB. */
export const rssMb = (pid: number): number => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024
