/**
 * The real process entry (runtime/main.ts) survives faults that no request handler caught
 * (issue 9 item 1): a throw in a callback, an unlistened 'error' event, an unhandled rejection.
 * Each is logged with its stack, counted in /metrics, and the service keeps answering.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import t from "tap"
import { isolatedDatabaseUrl } from "../support/database.ts"

const root = path.resolve(import.meta.dirname, "../..")
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "fault-guard-"))
t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }))
const env: Record<string, string> = { ...process.env as Record<string, string>, PORT: "0", HOST: "127.0.0.1", DATA_DIR: dataDir, WORKERS: "1", LOG_LEVEL: "info" }
const pg = process.env.DATABASE_URL
if (pg !== undefined && pg !== "") env.DATABASE_URL = await isolatedDatabaseUrl(t, pg)

const child = spawn(process.execPath, ["--import", "tsx", "--import", "./test/fixtures/injectFaults.mjs", "runtime/main.ts"], { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] })
let out = ""
child.stdout.setEncoding("utf8").on("data", (s: string) => (out += s))
child.stderr.setEncoding("utf8").on("data", (s: string) => (out += s))
const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
t.teardown(() => {
  if (child.exitCode === null) child.kill("SIGKILL")
})

const waitFor = async (what: string, ok: () => boolean) => {
  for (let i = 0; i < 600 && !ok(); i++) {
    if (child.exitCode !== null) throw new Error(`the service exited (${child.exitCode}) while waiting for ${what}:\n${out.slice(-2000)}`)
    await new Promise((r) => setTimeout(r, 100))
  }
  if (!ok()) throw new Error(`timed out waiting for ${what}`)
}

t.test("uncaught faults are logged and counted; the process keeps serving", async (t) => {
  await waitFor("listening", () => /"msg":"listening"/.test(out))
  const siteUrl = JSON.parse(out.split("\n").find((l) => l.includes('"msg":"listening"'))!).siteUrl as string
  t.equal((await fetch(`${siteUrl}/healthz`)).status, 200, "serving before")
  child.kill("SIGUSR2")
  await waitFor("three fault reports", () => (out.match(/uncaught fault/g) ?? []).length >= 3)
  t.equal(child.exitCode, null, "still running")
  t.equal((await fetch(`${siteUrl}/healthz`)).status, 200, "serving after")
  t.match(out, /injected: a throw in a callback/)
  t.match(out, /injected: an 'error' event with no listener/)
  t.match(out, /injected: an unhandled rejection/)
  const metrics = await (await fetch(`${siteUrl}/metrics`)).text()
  t.match(metrics, /process_uncaught_faults(_total)? 3\b/, "counted in /metrics")
  child.kill("SIGTERM")
  t.equal(await exited, 0, "a normal shutdown afterwards")
})
