/**
 * Credits of requests in flight when their process dies: the whole service runs in a child
 * process (test/storage/fixtures/credit-service.ts) that is SIGKILLed (or SIGSTOPped) in the
 * middle of an 8000-character streamed synthesis. The reservation it holds must come back: at
 * the next start-up (embedded PGlite, or PostgreSQL on the same host), or through the sweeper of
 * another live instance when the holder falls silent (PostgreSQL only).
 */
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import * as readline from "node:readline"
import { fileURLToPath } from "node:url"
import t from "tap"
import { freshEmbeddedDataDir, isolatedDatabaseUrl, testDatabaseMode } from "../support/database.ts"

const root = fileURLToPath(new URL("../../", import.meta.url))
const fixture = path.join(root, "test/storage/fixtures/credit-service.ts")

const START_CREDITS = 100_000
const TEXT = "Tere hommikust, kallis sõber. Täna on ilus ja päikeseline ilm. ".repeat(200).slice(0, 8000)

interface Child {
  readonly process: ChildProcessWithoutNullStreams
  readonly port: number
  /** Sends one command line and resolves with the JSON of the next output line. */
  readonly ask: (line: string) => Promise<Record<string, unknown>>
  readonly exited: Promise<unknown>
}

const startChild = async (t: { teardown: (fn: () => unknown) => void }, env: Record<string, string>): Promise<Child> => {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "error", WORKERS: "1", ...env }
  if (env.DATABASE_URL === undefined) delete childEnv.DATABASE_URL
  const child = spawn(process.execPath, ["--import", "tsx", fixture], { cwd: root, env: childEnv })
  const exited = new Promise((resolve) => child.once("exit", resolve))
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGKILL")
      await exited
    }
  })
  let stderr = ""
  child.stderr.on("data", (chunk) => (stderr += chunk))
  const lines = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]()
  const next = async (): Promise<Record<string, unknown>> => {
    for (;;) {
      const line = await lines.next()
      if (line.done === true) throw new Error(`the service exited: ${stderr}`)
      if (line.value.startsWith("@@ ")) return JSON.parse(line.value.slice(3)) as Record<string, unknown>
    }
  }
  const hello = await next()
  return {
    process: child,
    port: hello.port as number,
    ask: (line) => {
      child.stdin.write(`${line}\n`)
      return next()
    },
    exited
  }
}

/** Starts a streamed synthesis of TEXT and resolves once its first audio bytes arrived. */
const firstAudio = async (port: number, apiKey: string) => {
  const res = await fetch(`http://127.0.0.1:${port}/api/v1/text-to-speech/mari/stream?output_format=pcm_16000`, {
    method: "POST",
    headers: { "content-type": "application/json", "xi-api-key": apiKey },
    body: JSON.stringify({ text: TEXT, model_id: "svc_v1" })
  })
  if (res.status !== 200) throw new Error(`synthesis answered ${res.status}: ${await res.text()}`)
  const reader = res.body!.getReader()
  const first = await reader.read()
  if (first.done === true || first.value.byteLength === 0) throw new Error("no audio")
  // The process is about to die: whatever the body does next is of no interest.
  void reader.read().catch(() => undefined)
  reader.closed.catch(() => undefined)
}

const settingsFor = async (t: { teardown: (fn: () => unknown) => void }): Promise<Record<string, string>> => {
  const dataDir = await freshEmbeddedDataDir()
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }))
  if (testDatabaseMode() === "embedded") return { DATA_DIR: dataDir }
  return { DATA_DIR: dataDir, DATABASE_URL: await isolatedDatabaseUrl(t, process.env.DATABASE_URL!) }
}

t.test("SIGKILL during an 8000-character synthesis: the restarted service has the credits back", async (t) => {
  const settings = await settingsFor(t)
  const first = await startChild(t, settings)
  const user = await first.ask(`user ${START_CREDITS}`) as { userId: string; apiKey: string }
  await firstAudio(first.port, user.apiKey)
  const during = await first.ask(`balance ${user.userId}`) as { balance: number; reserved: number }
  t.equal(during.balance, START_CREDITS - TEXT.length, "the whole text is held while the synthesis runs")
  t.equal(during.reserved, TEXT.length, "as a reservation")
  first.process.kill("SIGKILL")
  await first.exited

  const second = await startChild(t, settings)
  const after = await second.ask(`balance ${user.userId}`) as { balance: number; reserved: number }
  t.comment(`${testDatabaseMode()}: ${START_CREDITS} before, ${during.balance} during, ${after.balance} after the restart (${START_CREDITS - after.balance} lost)`)
  t.equal(after.balance, START_CREDITS, "nothing is lost: the dead process's reservation was released at start-up")
  t.equal(after.reserved, 0, "no reservation is left open")
  second.process.kill("SIGTERM")
  await second.exited
})

t.test("PostgreSQL: a live instance's sweeper releases the reservations of an instance that fell silent", {
  skip: testDatabaseMode() === "embedded" ? "embedded PGlite has one process; its start-up release covers it" : false
}, async (t) => {
  const settings = { ...(await settingsFor(t)), INSTANCE_HEARTBEAT_S: "1", INSTANCE_STALE_S: "3" }
  const silent = await startChild(t, settings)
  const watcher = await startChild(t, settings)
  const user = await silent.ask(`user ${START_CREDITS}`) as { userId: string; apiKey: string }
  await firstAudio(silent.port, user.apiKey)
  // Stopped, not dead: its pid still exists, so only its missing heartbeat can give it away.
  silent.process.kill("SIGSTOP")
  const during = await watcher.ask(`balance ${user.userId}`) as { balance: number }
  t.equal(during.balance, START_CREDITS - TEXT.length, "held while the holder is stopped")
  let after = during
  for (let round = 0; round < 60 && after.balance !== START_CREDITS; round++) {
    await new Promise((resolve) => setTimeout(resolve, 500))
    after = await watcher.ask(`balance ${user.userId}`) as { balance: number }
  }
  t.comment(`postgres sweeper: ${during.balance} while the holder was silent, ${after.balance} after the sweep`)
  t.equal(after.balance, START_CREDITS, "the sweeper of the other instance gave the credits back")
  silent.process.kill("SIGKILL")
  await silent.exited
  watcher.process.kill("SIGTERM")
  await watcher.exited
})
