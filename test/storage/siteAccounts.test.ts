/**
 * What the site's sign-in stands on, against a real database of the selected mode: e-mails unique
 * without regard to case, argon2id passwords (and the decoy that keeps timing flat), sessions
 * (stored hashed, found until they expire or end, all ended at once), and the developer page's
 * key columns (last four characters, last use written in the background).
 */
import { Effect, Exit, Layer } from "effect"
import { SqlClient } from "effect/sql/SqlClient"
import t from "tap"
import { ApiKeys } from "../../storage/ApiKeys.ts"
import { decoyHash, hashPassword, passwordProblem, verifyPassword } from "../../storage/Passwords.ts"
import { Users } from "../../storage/Users.ts"
import { WebSessions, webSessionsLayer } from "../../storage/WebSessions.ts"
import { accountLayers } from "../support/accounts.ts"
import { useTestDatabaseWith } from "../support/database.ts"

const db = useTestDatabaseWith(t, Layer.merge(accountLayers({ keys: { lastUsedFlushMs: 50 } }), webSessionsLayer({ lifetimeMs: 60_000 })))
const run = <A, E>(effect: Effect.Effect<A, E, Users | ApiKeys | WebSessions | SqlClient>) => db.run(effect)

t.test("e-mails: unique whatever the case, found whatever the case, taken is an error not a second user", async (t) => {
  const users = await run(Effect.service(Users))
  const hash = await run(hashPassword("first password!"))
  const made = await run(users.createUserWithKey({ name: "eve", email: "Eve@Example.org", passwordHash: hash }))
  t.match(await run(users.findByEmail("  eve@example.ORG ")), { userId: made.userId, email: "Eve@Example.org", passwordHash: hash })
  t.equal(await run(users.findByEmail("nobody@example.org")), undefined)
  const taken = await run(Effect.exit(users.createUserWithKey({ name: "eve2", email: "EVE@example.org" })))
  t.ok(Exit.isFailure(taken) && JSON.stringify(taken.cause).includes("EmailTaken"))
  t.equal((await run(users.listUsers())).filter((u) => u.name === "eve2").length, 0, "nothing half-made")
  const other = await run(users.createUser({ name: "frank" }))
  t.ok(Exit.isFailure(await run(Effect.exit(users.setEmail(other.userId, "eve@EXAMPLE.org")))))
  await run(users.setEmail(other.userId, "frank@example.org"))
  t.equal((await run(users.getUser(other.userId))).email, "frank@example.org")
  t.equal((await run(users.findByEmail("frank@example.org")))!.passwordHash, undefined, "no password: cannot sign in")
})

t.test("passwords: argon2id, verified, wrong ones and garbage hashes refused", async (t) => {
  const phc = await run(hashPassword("correct horse battery"))
  t.match(phc, /^\$argon2id\$v=19\$m=\d+,t=\d+,p=\d+\$/u)
  t.equal(await run(verifyPassword(phc, "correct horse battery")), true)
  t.equal(await run(verifyPassword(phc, "correct horse batterY")), false)
  t.equal(await run(verifyPassword("not a hash", "x")), false)
  t.equal(await run(verifyPassword(await run(decoyHash()), "")), false)
  t.equal(passwordProblem("short"), "a password needs at least 10 characters")
  t.equal(passwordProblem("x".repeat(257)), "a password has at most 256 characters")
  t.equal(passwordProblem("long enough ✓"), undefined)
})

t.test("sessions: stored hashed, found until they end or expire, ended all at once", async (t) => {
  const users = await run(Effect.service(Users))
  const sessions = await run(Effect.service(WebSessions))
  const user = await run(users.createUser({ name: "gina" }))
  const a = await run(sessions.start(user.userId))
  const b = await run(sessions.start(user.userId))
  t.match(a.token, /^[A-Za-z0-9_-]{43}$/u)
  t.match(await run(sessions.find(a.token)), { userId: user.userId, csrfToken: a.csrfToken })
  const stored = await run(Effect.gen(function*() {
    const sql = yield* SqlClient
    return yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM web_sessions WHERE csrf_token = ${a.csrfToken} AND token_hash = ${Buffer.from(a.token)}`
  }))
  t.equal(stored[0]!.n, 0, "the token itself is not what is stored")
  await run(sessions.end(a.token))
  t.equal(await run(sessions.find(a.token)), undefined, "ended")
  t.ok(await run(sessions.find(b.token)))
  const c = await run(sessions.start(user.userId))
  t.equal(await run(sessions.endAll(user.userId, c.token)), 1, "all but the kept one")
  t.equal(await run(sessions.find(b.token)), undefined)
  t.ok(await run(sessions.find(c.token)))
  const short = await run(sessions.start(user.userId, 1))
  await new Promise((r) => setTimeout(r, 20))
  t.equal(await run(sessions.find(short.token)), undefined, "expired")
  for (const bad of ["", "x", "a".repeat(44), "../../etc", "a".repeat(42) + "\u0000"]) t.equal(await run(sessions.find(bad)), undefined)
})

t.test("keys: last four characters kept, last use written in the background", async (t) => {
  const users = await run(Effect.service(Users))
  const keys = await run(Effect.service(ApiKeys))
  const made = await run(users.createUserWithKey({ name: "hal" }))
  const [before] = await run(keys.listKeys(made.userId))
  t.equal(before!.suffix, made.apiKey.slice(-4))
  t.equal(before!.lastUsedAt, undefined, "never used")
  await run(keys.authenticate(made.apiKey))
  let after = before
  for (let i = 0; i < 100 && after!.lastUsedAt === undefined; i++) {
    await new Promise((r) => setTimeout(r, 20))
    after = (await run(keys.listKeys(made.userId)))[0]
  }
  t.ok(after!.lastUsedAt instanceof Date, "written after use")
})
