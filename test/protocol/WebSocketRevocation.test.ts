/**
 * A deleted API key ends the WebSocket sessions it opened: error frame `key_revoked`, close 1008,
 * no more synthesis or debits. Deleted through this process's ApiKeys (what the server's own
 * paths use) and by the admin CLI in another process, in whichever database mode the environment
 * selects (embedded: the CLI goes through the server's socket and nothing notifies the server, so
 * the periodic check finds it; PostgreSQL: NOTIFY).
 *
 * No timing thresholds: waits are for events, with generous safety timeouts only; the time the
 * CLI path took is printed as a comment.
 */
import { Effect } from "effect"
import { spawn } from "node:child_process"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import t, { type Test } from "tap"
import { MAX_PENDING_CHARS } from "../../actors/TtsSession.ts"
import { CLOSE_POLICY } from "../../protocol/ws/CloseCodes.ts"
import { isolatedDatabaseUrl, testDatabaseMode } from "../support/database.ts"
import { startTestService } from "../support/service.ts"
import { connectWs, type Frame, isRefused, until, type WsClient } from "../support/wsClient.ts"

const root = fileURLToPath(new URL("../../", import.meta.url))
const databaseUrl = testDatabaseMode() === "postgres" ? await isolatedDatabaseUrl(t, process.env.DATABASE_URL!) : undefined
const service = await startTestService(t, databaseUrl === undefined ? {} : { DATABASE_URL: databaseUrl })

const open = async (t: Test, apiKey: string, path = "stream-input") => {
  // A key's first use makes the upgrade asynchronous, which this uWS build may answer with an
  // early 1006 (README, known issue); one HTTP call first puts the key in the cache.
  await fetch(`${service.base}/user`, { headers: { "xi-api-key": apiKey } })
  const r = await connectWs(`${service.base}/text-to-speech/mari/${path}`, { "xi-api-key": apiKey })
  if (isRefused(r)) throw new Error(`upgrade refused: ${r.status} ${r.body}`)
  t.teardown(() => r.destroy())
  const multi = path === "multi-stream-input"
  r.send(multi ? { text: " ", context_id: "c" } : { text: " " })
  r.send(multi ? { text: "Tere!", context_id: "c", flush: true } : { text: "Tere!", flush: true })
  const ready = await until(r, (f) => f.flushDone === true)
  if (ready.at(-1)?.close !== undefined) throw new Error(`session closed before it was ready: ${JSON.stringify(ready.at(-1))}`)
  return r
}

/** The session's last frames: the error, then the close. */
const revokedEnd = async (ws: WsClient) => {
  const frames = await until(ws, () => false)
  return { error: frames.filter((f) => f.error !== undefined).at(-1), close: frames.at(-1) }
}

const balance = (userId: string) => Effect.runPromise(service.users.balance(userId))

t.test("deleted through ApiKeys: every session of that key gets key_revoked and 1008; other keys' sessions go on", async (t) => {
  const user = await service.newUser(1_000_000)
  const other = await service.newUser(1_000_000)
  const single = await open(t, user.apiKey)
  const multi = await open(t, user.apiKey, "multi-stream-input")
  const bystander = await open(t, other.apiKey)

  // A long stream under way, so the revocation interrupts synthesis and billing mid-stream.
  let long = ""
  while (long.length < MAX_PENDING_CHARS - 200) long += "See on pikk lause, mida loetakse tükkhaaval ette. "
  single.send({ text: long, voice_settings: { speed: 0.5 } })
  await single.nextJson() // its first audio: synthesis and debits are running
  single.pause() // the stream now waits for the client (backpressure), a few chunks ahead

  await Effect.runPromise(service.keys.deleteKey(user.keyId))
  single.resume()
  for (const [name, ws] of [["stream-input", single], ["multi-stream-input", multi]] as const) {
    const end = await revokedEnd(ws)
    t.match(end.error, { error: { code: "key_revoked", message: /deleted/ } }, name)
    t.match(end.close, { close: CLOSE_POLICY, reason: "key revoked" }, name)
  }
  const after = await balance(user.userId)
  await new Promise((r) => setTimeout(r, 300))
  t.equal(await balance(user.userId), after, "no debit after the close")
  t.ok(1_000_000 - after < long.length / 2, `${1_000_000 - after} of ${long.length} characters billed`)

  bystander.send({ text: "Mina räägin edasi.", flush: true })
  t.ok((await until(bystander, (f) => f.flushDone === true)).some((f) => typeof f.audio === "string"), "another key's session is untouched")
})

const cli = (...args: Array<string>) =>
  new Promise<{ code: number | null; stderr: string }>((resolve, reject) => {
    const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: service.dataDir }
    if (databaseUrl === undefined) delete env.DATABASE_URL
    else env.DATABASE_URL = databaseUrl
    const child = spawn(process.execPath, ["--import", "tsx", path.join(root, "runtime/admin.ts"), ...args], { cwd: root, env })
    let stderr = ""
    child.stderr.on("data", (chunk) => (stderr += chunk))
    child.once("error", reject)
    child.once("close", (code) => resolve({ code, stderr }))
  })

t.test(`deleted by the admin CLI in another process (${testDatabaseMode()}): the session is closed with key_revoked and 1008`, async (t) => {
  const user = await service.newUser(1_000_000)
  const ws = await open(t, user.apiKey)
  const deleted = await cli("delete-key", "--key", user.keyId)
  t.equal(deleted.code, 0, deleted.stderr)
  const started = Date.now()
  const end = await revokedEnd(ws)
  t.comment(`closed ${Date.now() - started} ms after the CLI exited`)
  t.match(end.error, { error: { code: "key_revoked" } })
  t.match(end.close, { close: CLOSE_POLICY })
  const refused = await connectWs(`${service.base}/text-to-speech/mari/stream-input`, { "xi-api-key": user.apiKey })
  t.ok(isRefused(refused) && refused.status === 401, "and the key opens no new session")
})
