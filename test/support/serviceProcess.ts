/**
 * The real process entry (`runtime/main.ts`) as a child process, for tests of what only a whole
 * process shows (faults that would end it, native aborts). Its own data directory, or a fresh
 * schema when DATABASE_URL is set; killed and removed in teardown.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { isolatedDatabaseUrl } from "./database.ts"

const root = path.resolve(import.meta.dirname, "../..")
/** A loaded machine can take well over a minute to start the child (tsx compiles on the fly). */
const waitLimitMs = Number(process.env.SERVICE_START_TIMEOUT_MS ?? "") || 180_000

export interface ServiceProcess {
  readonly child: ChildProcess
  readonly siteUrl: string
  /** Everything the process wrote so far (stdout and stderr). */
  readonly output: () => string
  /** Polls `ok` every 100 ms for up to SERVICE_START_TIMEOUT_MS (default 180 s); fails at once if the process has exited. */
  readonly waitFor: (what: string, ok: () => boolean) => Promise<void>
  /** A new user with credits, through the admin CLI against the running process. */
  readonly newKey: (credits: number) => Promise<string>
}

export const startServiceProcess = async (
  t: { teardown: (fn: () => unknown) => void },
  options: {
    readonly preload?: string
    /** Extra settings. */
    readonly env?: Record<string, string>
    /** A DATA_DIR to use (and keep: the caller removes it), e.g. to restart on the same embedded database. */
    readonly dataDir?: string
    /** A database to share with another process (from `isolatedDatabaseUrl`); by default a fresh schema when DATABASE_URL is set. */
    readonly databaseUrl?: string
  } = {}
): Promise<ServiceProcess> => {
  const dataDir = options.dataDir ?? fs.mkdtempSync(path.join(os.tmpdir(), "service-process-"))
  if (options.dataDir === undefined) t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }))
  // Start-up is detected by the info-level "listening" line: a quieter level would wait forever.
  const level = options.env?.LOG_LEVEL
  if (level !== undefined && !["trace", "debug", "info"].includes(level)) {
    throw new Error(`startServiceProcess needs LOG_LEVEL info or lower to see "listening", got ${level}`)
  }
  const env: Record<string, string> = {
    ...process.env as Record<string, string>,
    PORT: "0",
    HOST: "127.0.0.1",
    DATA_DIR: dataDir,
    WORKERS: "1",
    LOG_LEVEL: "info",
    ...options.env
  }
  const pg = process.env.DATABASE_URL
  if (options.databaseUrl !== undefined) env.DATABASE_URL = options.databaseUrl
  else if (pg !== undefined && pg !== "") env.DATABASE_URL = await isolatedDatabaseUrl(t, pg)
  const preload = options.preload !== undefined ? ["--import", options.preload] : []
  const child = spawn(process.execPath, ["--import", "tsx", ...preload, "runtime/main.ts"], { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] })
  let out = ""
  child.stdout!.setEncoding("utf8").on("data", (s: string) => (out += s))
  child.stderr!.setEncoding("utf8").on("data", (s: string) => (out += s))
  t.teardown(() => {
    if (child.exitCode === null) child.kill("SIGKILL")
  })
  const waitFor = async (what: string, ok: () => boolean) => {
    const deadline = Date.now() + waitLimitMs
    while (!ok() && Date.now() < deadline) {
      if (child.exitCode !== null) throw new Error(`the service exited (${child.exitCode}) while waiting for ${what}:\n${out.slice(-2000)}`)
      await new Promise((r) => setTimeout(r, 100))
    }
    if (!ok()) throw new Error(`timed out waiting for ${what} (${waitLimitMs} ms, SERVICE_START_TIMEOUT_MS):\n${out.slice(-2000)}`)
  }
  await waitFor("listening", () => /"msg":"listening"/.test(out))
  const siteUrl = (JSON.parse(out.split("\n").find((l) => l.includes('"msg":"listening"'))!) as { siteUrl: string }).siteUrl
  const newKey = (credits: number) =>
    new Promise<string>((resolve, reject) => {
      const admin = spawn(process.execPath, ["--import", "tsx", "runtime/admin.ts", "create-user", "--name", "test", "--credits", String(credits), "--json"], { cwd: root, env, stdio: ["ignore", "pipe", "inherit"] })
      let text = ""
      admin.stdout!.setEncoding("utf8").on("data", (s: string) => (text += s))
      admin.once("exit", (code) => (code === 0 ? resolve((JSON.parse(text.trim().split("\n").at(-1)!) as { api_key: string }).api_key) : reject(new Error(`admin exited ${code}`))))
    })
  return { child, siteUrl, output: () => out, waitFor, newKey }
}
