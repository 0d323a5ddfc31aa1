/**
 * kill -9 during live realtime speech-to-text (issue 39's "Done when"): the whole service runs in
 * a child process (test/storage/fixtures/credit-service.ts), 20 sessions of 5 users stream
 * LibriVox speech, the process is SIGKILLed while every one of them is decoding, and a new
 * process is started on the same database (the same embedded directory, or the same PostgreSQL
 * schema). README "Realtime speech-to-text", Credits: the dead process's reservations are given
 * back by the instance sweep (at start-up on the same host), at most its last minute of audio
 * uncharged and nothing charged twice. None of the 20 reached a settlement (a minute of audio),
 * so their users must have exactly the credits they started with, no reservation, no
 * `stt_realtime` debit, and a ledger that sums to balance + reserved. A 21st session, of a user
 * of its own, has streamed 65 s before the kill (5 s chunks, each committed and answered before
 * the next: paced by events): its first minute was settled, its last 5 s reserved; after the
 * restart it keeps exactly the one debit of 60, the reservation is back.
 *
 * Waits for events only: the sessions' first partial transcripts (the decode is live), the
 * fixture's answers, the child's exit. The audio is paced by the partials (each one lets the
 * session send its next chunk), not by a clock.
 */
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import * as readline from "node:readline"
import { fileURLToPath } from "node:url"
import t from "tap"
import { CreditPurpose } from "../../actors/CreditPolicy.ts"
import { REALTIME_AHEAD_CREDITS } from "../../actors/RealtimeCharge.ts"
import { freshEmbeddedDataDir, isolatedDatabaseUrl, testDatabaseMode } from "../support/database.ts"
import { LIBRIVOX_WAV, pcmOf } from "../support/librivoxSpeech.ts"
import { connectWs, isRefused, type WsClient } from "../support/wsClient.ts"

const root = fileURLToPath(new URL("../../", import.meta.url))
const fixture = path.join(root, "test/storage/fixtures/credit-service.ts")

const USERS = 5
const SESSIONS_PER_USER = 4
const START_CREDITS = 1000
const PCM = pcmOf(LIBRIVOX_WAV)
/** 250 ms of 16 kHz s16le. */
const CHUNK_BYTES = 8000
/** Sent at once when a session starts: 3 s, well under the 10 s queue_overflow bound. */
const OPENING_CHUNKS = 12

interface Child {
  readonly process: ChildProcessWithoutNullStreams
  readonly port: number
  readonly ask: (line: string) => Promise<Record<string, any>>
  readonly exited: Promise<unknown>
}

const startChild = async (t: { teardown: (fn: () => unknown) => void }, env: Record<string, string>): Promise<Child> => {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "error", ...env }
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
  const next = async (): Promise<Record<string, any>> => {
    for (;;) {
      const line = await lines.next()
      if (line.done === true) throw new Error(`the service exited: ${stderr}`)
      if (line.value.startsWith("@@ ")) return JSON.parse(line.value.slice(3)) as Record<string, any>
    }
  }
  const hello = await next()
  return { process: child, port: hello.port as number, ask: (line) => (child.stdin.write(`${line}\n`), next()), exited }
}

const settingsFor = async (t: { teardown: (fn: () => unknown) => void }): Promise<Record<string, string>> => {
  const dataDir = await freshEmbeddedDataDir()
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }))
  // 2 × 11 recognizer sessions: room for all 21 (the default is 4 a worker).
  const base = { DATA_DIR: dataDir, WORKERS: "2", STT_SESSIONS_PER_WORKER: "11" }
  if (testDatabaseMode() === "embedded") return base
  return { ...base, DATABASE_URL: await isolatedDatabaseUrl(t, process.env.DATABASE_URL!) }
}

/** One live session: opening audio at once, then one more chunk per partial; resolves at its first partial, with the socket's end. */
const stream = async (port: number, apiKey: string): Promise<{ readonly ws: WsClient; readonly ended: Promise<void> }> => {
  const ws = await connectWs(`http://127.0.0.1:${port}/api/v1/speech-to-text/realtime?model_id=m&audio_format=pcm_16000`, { "xi-api-key": apiKey })
  if (isRefused(ws)) throw new Error(`refused: ${ws.status} ${ws.body}`)
  const started = await ws.nextJson(120_000)
  if (started.message_type !== "session_started") throw new Error(`expected session_started, got ${JSON.stringify(started)}`)
  let at = 0
  const sendChunk = () => {
    if (at + CHUNK_BYTES > PCM.length) at = 0
    ws.send({ message_type: "input_audio_chunk", audio_base_64: PCM.subarray(at, at + CHUNK_BYTES).toString("base64"), commit: false, sample_rate: 16000 })
    at += CHUNK_BYTES
  }
  for (let i = 0; i < OPENING_CHUNKS; i++) sendChunk()
  for (;;) {
    const m = await ws.nextJson(180_000)
    if (m.message_type === "partial_transcript") break
    if ("close" in m || m.error !== undefined) throw new Error(`the session ended before its first partial: ${JSON.stringify(m)}`)
  }
  // Keeps streaming until the process dies (then the socket closes and the loop ends).
  const ended = (async () => {
    for (;;) {
      const m = await ws.nextJson(600_000).catch(() => ({ close: 0 }))
      if ("close" in m) return
      if (m.message_type === "partial_transcript") sendChunk()
    }
  })()
  return { ws, ended }
}

/** 65 s of speech in 5 s chunks, each committed and its transcript awaited; resolves with the session id, the socket left open. */
const settledMinute = async (port: number, apiKey: string): Promise<string> => {
  const ws = await connectWs(`http://127.0.0.1:${port}/api/v1/speech-to-text/realtime?model_id=m&audio_format=pcm_16000`, { "xi-api-key": apiKey })
  if (isRefused(ws)) throw new Error(`refused: ${ws.status} ${ws.body}`)
  const started = await ws.nextJson(120_000)
  const looped = Buffer.concat([PCM, PCM])
  for (let i = 0; i < 13; i++) {
    const at = (i * 160_000) % PCM.length
    ws.send({ message_type: "input_audio_chunk", audio_base_64: looped.subarray(at, at + 160_000).toString("base64"), commit: true, sample_rate: 16000 })
    for (;;) {
      const m = await ws.nextJson(180_000)
      if (m.message_type === "committed_transcript") break
      if ("close" in m || m.error !== undefined) throw new Error(`the long session ended: ${JSON.stringify(m)}`)
    }
  }
  // The socket's further messages are of no interest; the process dies with it open.
  void (async () => {
    for (;;) if ("close" in (await ws.nextJson(600_000).catch(() => ({ close: 0 })))) return
  })()
  return started.session_id as string
}

t.test("SIGKILL during 20 live realtime sessions: the restarted service gives every reservation back, nothing charged", async (t) => {
  const settings = await settingsFor(t)
  const first = await startChild(t, settings)
  const users: Array<{ userId: string; apiKey: string; credits: number }> = []
  for (let i = 0; i < USERS; i++) {
    const credits = START_CREDITS + i
    users.push({ ...(await first.ask(`user ${credits}`)) as { userId: string; apiKey: string }, credits })
  }
  const long = { ...(await first.ask(`user ${START_CREDITS}`)) as { userId: string; apiKey: string } }
  const longSession = await settledMinute(first.port, long.apiKey)
  const longDuring = await first.ask(`balance ${long.userId}`)
  t.same([longDuring.balance, longDuring.reserved], [START_CREDITS - 60 - (5 + REALTIME_AHEAD_CREDITS), 5 + REALTIME_AHEAD_CREDITS], "65 s: a minute settled, 5 s and a minute ahead reserved")
  const sockets = await Promise.all(users.flatMap((u) => Array.from({ length: SESSIONS_PER_USER }, () => stream(first.port, u.apiKey))))
  t.equal(sockets.length, USERS * SESSIONS_PER_USER, "20 sessions decoding (each has sent a partial transcript)")

  // Each session holds one reservation: its first started second and a minute ahead.
  for (const u of users) {
    const during = await first.ask(`balance ${u.userId}`)
    t.equal(during.reserved, SESSIONS_PER_USER * (1 + REALTIME_AHEAD_CREDITS), "4 sessions' reservations held while they stream")
    t.equal(during.balance + during.reserved, u.credits, "nothing settled yet: balance + reserved = what the user had")
  }
  first.process.kill("SIGKILL")
  await first.exited
  await Promise.all(sockets.map((s) => s.ended))

  const second = await startChild(t, settings)
  for (const [i, u] of users.entries()) {
    const after = await second.ask(`balance ${u.userId}`)
    const ledger = await second.ask(`ledger ${u.userId}`) as { sum: number; debits: Array<{ purpose: string | null; amount: number }> }
    if (i === 0) t.comment(`${testDatabaseMode()}: user 0 had ${u.credits}, has ${after.balance} after the restart, ${after.reserved} reserved, ${ledger.debits.length} debits`)
    t.equal(after.reserved, 0, `user ${i}: no reservation left open`)
    t.equal(after.balance, u.credits, `user ${i}: every reservation of the dead process was given back`)
    t.equal(ledger.sum, after.balance + after.reserved, `user ${i}: ledger sum = balance + reserved`)
    t.same(ledger.debits.filter((d) => d.purpose === CreditPurpose.sttRealtime), [], `user ${i}: no stt_realtime debit (no session reached a settlement)`)
  }
  const longAfter = await second.ask(`balance ${long.userId}`)
  const longLedger = await second.ask(`ledger ${long.userId}`) as { sum: number; debits: Array<{ reference: string | null; amount: number }> }
  t.same([longAfter.balance, longAfter.reserved], [START_CREDITS - 60, 0], "the 65 s session: its settled minute stays charged, its reservation is back")
  t.same(longLedger.debits.map((d) => [d.reference, d.amount]), [[longSession, -60]], "one debit of 60 for it: nothing charged twice")
  t.equal(longLedger.sum, longAfter.balance, "its ledger sum = balance + reserved")
  second.process.kill("SIGTERM")
  await second.exited
})
