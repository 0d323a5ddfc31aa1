/**
 * Single-use tokens (issue 39): minted with the official SDK's `client.tokens.singleUse.create`,
 * then a TTS WebSocket opened with only `?token=` (no key), spending the minting user's credits;
 * and every way a token must fail before the upgrade (401 with the SPEC 2.1 body): a second
 * use, a token of the other type, an expired one (aged in the database, no sleeping), one whose
 * minting key was deleted (whose open session is closed too), ten racing uses of one token (one
 * wins), an anonymous mint, and arbitrary strings in the query (never a 5xx). Runs in whichever
 * database mode the environment selects (PGlite, or PostgreSQL with DATABASE_URL).
 */
import { ElevenLabsClient } from "@elevenlabs/elevenlabs-js"
import { Effect } from "effect"
import fc from "fast-check"
import { createHash } from "node:crypto"
import t, { type Test } from "tap"
import { CLOSE_POLICY } from "../../protocol/ws/CloseCodes.ts"
import { isolatedDatabaseUrl, testDatabaseMode } from "../support/database.ts"
import { consentedTokens, loopbackCallback, registerPublicClient } from "../support/oauthFlow.ts"
import { startTestService } from "../support/service.ts"
import { connectWs, type Frame, isRefused, refused, until, type WsClient } from "../support/wsClient.ts"

const databaseUrl = testDatabaseMode() === "postgres" ? await isolatedDatabaseUrl(t, process.env.DATABASE_URL!) : undefined
const service = await startTestService(t, databaseUrl === undefined ? {} : { DATABASE_URL: databaseUrl })

const sdk = (apiKey: string) => new ElevenLabsClient({ apiKey, baseUrl: `${service.siteUrl}/api`, maxRetries: 0 })
const mint = async (apiKey: string, type: "tts_websocket" | "realtime_scribe" = "tts_websocket") =>
  (await sdk(apiKey).tokens.singleUse.create(type)).token

const socketUrl = (token: string, path = "stream-input", base = service.base) =>
  `${base}/text-to-speech/mari/${path}?token=${encodeURIComponent(token)}`

const balance = (userId: string) => Effect.runPromise(service.users.balance(userId))

/** Opens a session with the token alone and speaks one sentence; the frames up to flushDone. */
const speak = async (t: Test, ws: WsClient, text: string): Promise<Array<Frame>> => {
  t.teardown(() => ws.destroy())
  ws.send({ text: " " })
  ws.send({ text, flush: true })
  return until(ws, (f) => f.flushDone === true)
}

const expectInvalidToken = (t: Test, r: { status: number; body: string; headers: Record<string, unknown> }, what: string) => {
  t.equal(r.status, 401, what)
  t.match(JSON.parse(r.body), { detail: { status: "invalid_token", message: /single-use token/ } }, `${what}: the spec's error body`)
  t.match(String(r.headers["www-authenticate"]), /invalid_token/, `${what}: WWW-Authenticate says invalid_token`)
}

t.test("the SDK mints a tts_websocket token; a stream-input session opened with it alone speaks and is charged to the minter", async (t) => {
  const user = await service.newUser(100_000)
  const token = await mint(user.apiKey)
  t.match(token, /^sut_[A-Za-z0-9_-]{43}$/)
  const before = await balance(user.userId)
  const ws = await connectWs(socketUrl(token))
  if (isRefused(ws)) return t.fail(`refused: ${ws.status} ${ws.body}`)
  const frames = await speak(t, ws, "Tere, see on proov.")
  t.ok(frames.some((f) => typeof f.audio === "string"), "audio arrived")
  t.ok((await balance(user.userId)) < before, "the minting user's credits were spent")

  expectInvalidToken(t, await refused(socketUrl(token)), "a second use")
  const stored = await Effect.runPromise(service.sql<{ n: number }>`SELECT count(*)::int AS n FROM single_use_tokens WHERE token_hash = ${createHash("sha256").update(token).digest()}`)
  t.equal(stored[0]!.n, 1, "stored by its hash")
})

t.test("multi-stream-input takes a token too (query name single_use_token also accepted)", async (t) => {
  const user = await service.newUser(100_000)
  const ws = await connectWs(`${service.base}/text-to-speech/mari/multi-stream-input?single_use_token=${await mint(user.apiKey)}`)
  if (isRefused(ws)) return t.fail(`refused: ${ws.status} ${ws.body}`)
  t.teardown(() => ws.destroy())
  ws.send({ text: " ", context_id: "c" })
  ws.send({ text: "Tere!", context_id: "c", flush: true })
  t.ok((await until(ws, (f) => f.flushDone === true)).some((f) => typeof f.audio === "string"))
})

t.test("a realtime_scribe token opens no TTS session, and is not used up by the attempt", async (t) => {
  const user = await service.newUser(100_000)
  const token = await mint(user.apiKey, "realtime_scribe")
  expectInvalidToken(t, await refused(socketUrl(token)), "wrong type")
  const row = await Effect.runPromise(service.sql<{ used: boolean }>`SELECT used_at IS NOT NULL AS used FROM single_use_tokens WHERE token_hash = ${createHash("sha256").update(token).digest()}`)
  t.equal(row[0]!.used, false)
})

t.test("an upgrade refused for its voice, format or parameters leaves the token unused (outside attack)", async (t) => {
  const user = await service.newUser(100_000)
  const token = await mint(user.apiKey)
  const q = `token=${encodeURIComponent(token)}`
  const refusals: Array<[string, number]> = [
    [`${service.base}/text-to-speech/nope/stream-input?${q}`, 404],
    [`${service.base}/text-to-speech/mari/stream-input?${q}&inactivity_timeout=abc`, 400],
    [`${service.base}/text-to-speech/mari/stream-input?${q}&language=zz`, 400],
    [`${service.base}/text-to-speech/mari/multi-stream-input?${q}&output_format=mp3_44100_128`, 415]
  ]
  for (const [url, status] of refusals) t.equal((await refused(url)).status, status, url.replace(token, "T"))
  const ws = await connectWs(socketUrl(token))
  if (isRefused(ws)) return t.fail(`the token was spent by a refused upgrade: ${ws.status} ${ws.body}`)
  t.ok((await speak(t, ws, "Tere!")).some((f) => typeof f.audio === "string"), "the token still opens a session")
})

t.test("an expired token is refused", async (t) => {
  const user = await service.newUser(100_000)
  const token = await mint(user.apiKey)
  await Effect.runPromise(service.sql`UPDATE single_use_tokens SET expires_at = now() - interval '1 second' WHERE token_hash = ${createHash("sha256").update(token).digest()}`)
  expectInvalidToken(t, await refused(socketUrl(token)), "expired")
})

t.test("a deleted minting key: its unused tokens are refused and a session opened with one is closed (key_revoked, 1008)", async (t) => {
  const user = await service.newUser(1_000_000)
  const used = await mint(user.apiKey)
  const unused = await mint(user.apiKey)
  const ws = await connectWs(socketUrl(used))
  if (isRefused(ws)) return t.fail(`refused: ${ws.status} ${ws.body}`)
  await speak(t, ws, "Tere!")
  await Effect.runPromise(service.keys.deleteKey(user.keyId))
  const frames = await until(ws, () => false)
  t.match(frames.filter((f) => f.error !== undefined).at(-1), { error: { code: "key_revoked" } })
  t.match(frames.at(-1), { close: CLOSE_POLICY })
  expectInvalidToken(t, await refused(socketUrl(unused)), "minted by a deleted key")
})

t.test("ten simultaneous upgrades with one token: exactly one is let in", async (t) => {
  const user = await service.newUser(100_000)
  const token = await mint(user.apiKey)
  const results = await Promise.all(Array.from({ length: 10 }, () => connectWs(socketUrl(token))))
  const opened = results.filter((r): r is WsClient => !isRefused(r))
  for (const ws of opened) ws.destroy()
  t.equal(opened.length, 1, "one upgrade")
  t.same(results.filter(isRefused).map((r) => r.status), Array(9).fill(401), "nine 401s")
})

t.test("PostgreSQL: ten simultaneous upgrades with one token split over two instances on one database: exactly one is let in", { skip: databaseUrl === undefined ? "embedded mode has one instance per database" : false }, async (t) => {
  const second = await startTestService(t, { DATABASE_URL: databaseUrl! })
  const user = await service.newUser(100_000)
  for (let round = 0; round < 3; round++) {
    const token = await mint(user.apiKey)
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => connectWs(socketUrl(token, "stream-input", i % 2 === 0 ? service.base : second.base))))
    const opened = results.filter((r): r is WsClient => !isRefused(r))
    for (const ws of opened) ws.destroy()
    t.equal(opened.length, 1, `round ${round}: one upgrade`)
    t.same(results.filter(isRefused).map((r) => r.status), Array(9).fill(401), `round ${round}: nine 401s`)
  }
})

t.test("minting needs a credential: anonymous 401, unknown type 422, both with the spec's body", async (t) => {
  const anonymous = await fetch(`${service.base}/single-use-token/tts_websocket`, { method: "POST" })
  t.equal(anonymous.status, 401)
  t.match(await anonymous.json(), { detail: { status: "needs_authorization" } })
  const user = await service.newUser(100_000)
  const unknown = await fetch(`${service.base}/single-use-token/batch_scribe`, { method: "POST", headers: { "xi-api-key": user.apiKey } })
  t.equal(unknown.status, 422)
  t.match(await unknown.json(), { detail: { status: "invalid_token_type" } })
  const doc = await (await fetch(`${service.base}/openapi.json`)).json() as { paths: Record<string, { post?: { operationId?: string } }> }
  t.equal(doc.paths["/api/v1/single-use-token/{token_type}"]?.post?.operationId, "createSingleUseToken", "in the OpenAPI document")
})

t.test("OAuth: minting needs the tts scope (403 without it); a token of a revoked grant is refused. A signed-in browser mints with its CSRF token", async (t) => {
  const redirectUri = await loopbackCallback(t)
  const clientId = await registerPublicClient(service.siteUrl, redirectUri)
  const user = await service.newUser(100_000)
  const session = await Effect.runPromise(service.webSessions.start(user.userId))
  const post = (headers: Record<string, string>) => fetch(`${service.base}/single-use-token/tts_websocket`, { method: "POST", headers })

  const voicesOnly = await consentedTokens(service.siteUrl, { session, clientId, redirectUri, scopes: ["voices"], granted: ["voices"] })
  const refusedMint = await post({ authorization: `Bearer ${voicesOnly.access_token}` })
  t.equal(refusedMint.status, 403)
  t.match(await refusedMint.json(), { detail: { status: "insufficient_scope" } })

  const tts = await consentedTokens(service.siteUrl, { session, clientId, redirectUri, scopes: ["tts"], granted: ["tts"] })
  const minted = await post({ authorization: `Bearer ${tts.access_token}` })
  t.equal(minted.status, 200)
  const { token } = await minted.json() as { token: string }
  // What the account page's revoke button does (OAuthStore.revokeGrant), by the grant's row.
  await Effect.runPromise(service.sql`UPDATE oauth_grants SET revoked_at = now() WHERE user_id = ${user.userId}`)
  expectInvalidToken(t, await refused(socketUrl(token)), "minted through a revoked grant")

  const bySession = await post({ cookie: `svc_session=${session.token}`, "x-csrf-token": session.csrfToken })
  t.equal(bySession.status, 200, "the playground's signed-in browser mints one")
  const ws = await connectWs(socketUrl((await bySession.json() as { token: string }).token))
  t.notOk(isRefused(ws), "and opens a session with it")
  if (!isRefused(ws)) ws.destroy()
  t.equal((await post({ cookie: `svc_session=${session.token}` })).status, 403, "not without the CSRF token")
})

t.test("property: arbitrary token strings in the query are refused before the upgrade, never with a 5xx", async (t) => {
  const user = await service.newUser(100_000)
  const real = await mint(user.apiKey)
  const candidates = fc.oneof(
    fc.string({ maxLength: 200 }),
    fc.string({ unit: "binary", maxLength: 80 }),
    // Well-formed, so they reach the database: random ones, and the real one bent a little.
    fc.stringMatching(/^sut_[A-Za-z0-9_-]{43}$/u),
    fc.nat({ max: real.length - 1 }).map((i) => real.slice(0, i) + (real[i] === "A" ? "B" : "A") + real.slice(i + 1))
  )
  await fc.assert(fc.asyncProperty(candidates, fc.constantFrom("token", "single_use_token"), async (token, name) => {
    const r = await connectWs(`${service.base}/text-to-speech/mari/stream-input?${name}=${encodeURIComponent(token)}`)
    if (!isRefused(r)) {
      r.destroy()
      throw new Error(`upgrade accepted for ${JSON.stringify(token)}`)
    }
    if (r.status >= 500 || r.status !== 401) throw new Error(`${r.status} ${r.body} for ${JSON.stringify(token)}`)
  }), { numRuns: 150 })
  t.pass("no 5xx, no upgrade")
  const ws = await connectWs(socketUrl(real))
  t.notOk(isRefused(ws), "the real token still works after the probing")
  if (!isRefused(ws)) ws.destroy()
})
