/**
 * API keys (storage/ApiKeys.ts) against a fresh database of the mode the environment selects
 * (embedded PGlite, or the PostgreSQL in DATABASE_URL): minting, deleting, authentication and
 * its cache. Users: users.test.ts; credits: creditLedger.test.ts.
 */
import { Effect, Exit, Scope } from "effect"
import { SqlClient } from "effect/sql/SqlClient"
import fc from "fast-check"
import t from "tap"
import { hashApiKey } from "../../storage/ApiKey.ts"
import { ApiKeys, type ApiKeysShape, apiKeyScopes, makeApiKeys } from "../../storage/ApiKeys.ts"
import { Users } from "../../storage/Users.ts"
import { accountLayers } from "../support/accounts.ts"
import { useTestDatabaseWith } from "../support/database.ts"

const reasonOf = <A, E>(exit: Exit.Exit<A, E>): string | undefined => {
  if (Exit.isSuccess(exit)) return undefined
  const failure = exit.cause.reasons.find((r) => r._tag === "Fail") as { error?: { reason?: string } } | undefined
  return failure?.error?.reason ?? "not a failure"
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

type Authenticator = Pick<ApiKeysShape, "authenticate">

t.test("API keys", async (t) => {
  const db = useTestDatabaseWith(t, accountLayers())
  const users = await db.run(Effect.service(Users))
  const keys = await db.run(Effect.service(ApiKeys))
  const run = <A, E>(effect: Effect.Effect<A, E, never>) => db.run(effect)
  const exitOf = <A, E>(effect: Effect.Effect<A, E, never>) => db.run(Effect.exit(effect))
  /**
   * Returns once `cache` has heard every key change committed so far. On PostgreSQL a new
   * instance's LISTEN starts in the background, and the NOTIFY of a key's own INSERT may reach it
   * after the key was first cached, evicting it once; a "never misses" check that starts before
   * then fails for a reason that is not the cache's. Notifications arrive in commit order, so once
   * the delete of a probe key has reached `cache`, so have all earlier ones. Embedded, the refresh
   * of keys in use drops the probe within the TTL.
   */
  const heardEverything = async (cache: Authenticator) => {
    const probe = await run(users.createUserWithKey({ name: "probe" }))
    await run(cache.authenticate(probe.apiKey))
    await run(keys.deleteKey(probe.keyId))
    while (Exit.isSuccess(await exitOf(cache.authenticate(probe.apiKey)))) await sleep(20)
  }

  t.test("create a user and a key, then authenticate with it", async (t) => {
    const user = await run(users.createUser({ name: "alice" }))
    const minted = await run(keys.mintKey(user.userId, "laptop"))
    t.match(minted.apiKey, /^sk_svc_[A-Za-z0-9_-]{43}$/)
    t.match(minted.keyId, /^key_[0-9a-f]{20}$/)
    t.equal(minted.prefix, minted.apiKey.slice(0, 11))
    const principal = await run(keys.authenticate(minted.apiKey))
    t.same(principal, { userId: user.userId, keyId: minted.keyId, scopes: apiKeyScopes })
    t.same(await run(keys.authenticate(minted.apiKey)), principal, "cached lookup gives the same principal")
    const listed = await run(keys.listKeys(user.userId))
    t.same(listed.map((k) => [k.keyId, k.name, k.prefix]), [[minted.keyId, "laptop", minted.prefix]])
  })

  t.test("bad keys are InvalidKey", async (t) => {
    t.equal(reasonOf(await exitOf(keys.authenticate("hello"))), "InvalidKey", "no prefix")
    t.equal(reasonOf(await exitOf(keys.authenticate("sk_svc_short"))), "InvalidKey", "malformed")
    const unknown = "sk_svc_" + "A".repeat(43)
    t.equal(reasonOf(await exitOf(keys.authenticate(unknown))), "InvalidKey", "well-formed but unknown")
    t.equal(reasonOf(await exitOf(keys.authenticate(unknown))), "InvalidKey", "again, from the negative cache")
  })

  t.test("a deleted key is rejected immediately, by id or by the key itself", async (t) => {
    const created = await run(users.createUserWithKey({ name: "carol" }))
    await run(keys.authenticate(created.apiKey)) // now cached
    const deleted = await run(keys.deleteKey(created.keyId))
    t.same(deleted, { keyId: created.keyId, userId: created.userId })
    t.equal(reasonOf(await exitOf(keys.authenticate(created.apiKey))), "InvalidKey")
    t.equal(reasonOf(await exitOf(keys.deleteKey(created.keyId))), "KeyNotFound", "deleting twice")

    const second = await run(keys.mintKey(created.userId))
    await run(keys.authenticate(second.apiKey))
    await run(keys.deleteKey(second.apiKey))
    t.equal(reasonOf(await exitOf(keys.authenticate(second.apiKey))), "InvalidKey")
    t.same(await run(keys.listKeys(created.userId)), [], "deleted keys are not listed")
  })

  t.test("a key deleted behind the cache's back: gone within the TTL embedded, at once with LISTEN", async (t) => {
    // A second ApiKeys (a cache of its own) whose TTL is long on PostgreSQL, so only a notification
    // can explain a quick rejection there; on PGlite nothing notifies, so the TTL (300 ms) is the bound.
    const scope = await run(Scope.make())
    t.teardown(() => run(Scope.close(scope, Exit.void)))
    const strict = await db.run(
      makeApiKeys({ shortTtlMs: db.mode === "postgres" ? 60_000 : 300, listenTtlMs: 60_000 }).pipe(Scope.provide(scope))
    )
    const created = await run(users.createUserWithKey({ name: "dave" }))
    await run(strict.authenticate(created.apiKey))
    await db.run(Effect.gen(function*() {
      const sql = yield* SqlClient
      yield* sql`UPDATE api_keys SET deleted_at = now() WHERE id = ${created.keyId}`
    }))
    const started = Date.now()
    while (Exit.isSuccess(await exitOf(strict.authenticate(created.apiKey)))) {
      if (Date.now() - started > 3_000) break
      await sleep(20)
    }
    const elapsed = Date.now() - started
    if (db.mode === "postgres") {
      t.ok(elapsed < 250, `the trigger's NOTIFY reached the cache: rejected after ${elapsed} ms`)
    } else {
      // Refreshing keys in use re-reads this one every 150 ms, so it may go sooner than the TTL.
      t.ok(elapsed < 600, `rejected after ${elapsed} ms (TTL 300 ms)`)
    }
  })

  t.test("a key in use stays cached while other keys change all the time", async (t) => {
    // Every other key's change is an invalidation; a refresh of keys in use that overlapped one
    // used to be thrown away whole, so under steady key churn (many clients, many instances on one
    // database) a key in use expired and missed.
    const scope = await run(Scope.make())
    t.teardown(() => run(Scope.close(scope, Exit.void)))
    const warm = await db.run(makeApiKeys({ shortTtlMs: 1_000, listenTtlMs: 1_000 }).pipe(Scope.provide(scope)))
    const created = await run(users.createUserWithKey({ name: "frank" }))
    await heardEverything(warm)
    await run(warm.authenticate(created.apiKey))
    const hit = () => Exit.isSuccess(Effect.runSyncExit(warm.authenticate(created.apiKey)))
    for (let waited = 0; !hit() && waited < 5_000; waited += 20) await sleep(20)
    let churning = true
    const churn = (async () => {
      while (churning) {
        const other = await run(warm.mintKey(created.userId, "churn"))
        await run(warm.deleteKey(other.keyId))
      }
    })()
    const started = Date.now()
    let checks = 0
    let synchronous = 0
    while (Date.now() - started < 4_000) {
      await sleep(50)
      checks++
      if (hit()) synchronous++
    }
    churning = false
    await churn
    t.equal(synchronous, checks, `${synchronous} of ${checks} authentications over 4 s (4 TTLs) of key churn were cache hits`)
  })

  t.test("a key in use never misses the cache: it authenticates without I/O across TTLs", async (t) => {
    // Short TTLs in both modes; a cache hit completes synchronously, a miss needs the database
    // and so cannot (runSyncExit then reports an AsyncFiberError).
    const scope = await run(Scope.make())
    t.teardown(() => run(Scope.close(scope, Exit.void)))
    // The TTL leaves the refresh query TTL/2 (2 s) of slack: a miss here means the refresh loop
    // stopped, not that a shared CI machine made one query slow (1 s of slack once failed CI).
    const warm = await db.run(makeApiKeys({ shortTtlMs: 4_000, listenTtlMs: 4_000 }).pipe(Scope.provide(scope)))
    const created = await run(users.createUserWithKey({ name: "erin" }))
    await heardEverything(warm)
    await run(warm.authenticate(created.apiKey))
    const hit = () => Exit.isSuccess(Effect.runSyncExit(warm.authenticate(created.apiKey)))
    for (let waited = 0; !hit() && waited < 5_000; waited += 50) await sleep(50)
    const started = Date.now()
    let checks = 0
    let synchronous = 0
    while (Date.now() - started < 9_000) {
      await sleep(300)
      checks++
      const exit = Effect.runSyncExit(warm.authenticate(created.apiKey))
      if (Exit.isSuccess(exit) && exit.value.keyId === created.keyId) synchronous++
    }
    t.equal(synchronous, checks, `${synchronous} of ${checks} authentications over 9 s (2.25 TTLs) were cache hits`)
    // A deleted key in use is dropped at the next refresh, not only when its TTL runs out.
    await db.run(Effect.gen(function*() {
      const sql = yield* SqlClient
      yield* sql`UPDATE api_keys SET deleted_at = now() WHERE id = ${created.keyId}`
    }))
    await sleep(4_500)
    t.equal(reasonOf(await exitOf(warm.authenticate(created.apiKey))), "InvalidKey", "deleted behind the cache's back: refused within the TTL")
  })

  t.test("PostgreSQL: a delete answers only after every live instance dropped the key", { skip: db.mode === "postgres" ? false : "one process embedded" }, async (t) => {
    // Two more caches stand for other instances of a deployment: registered as live in
    // service_instances, each with a long TTL, so only the acknowledged NOTIFY can drop the key
    // from them. They must refuse it synchronously the moment deleteKey returns, with no wait.
    const scope = await run(Scope.make())
    t.teardown(() => run(Scope.close(scope, Exit.void)))
    const register = (id: string) =>
      db.run(Effect.gen(function*() {
        const sql = yield* SqlClient
        yield* sql`INSERT INTO service_instances (id, host_key, pid) VALUES (${id}, 'test', 1)`
      }))
    const instance = async (id: string) => {
      const cache = await db.run(makeApiKeys({ instanceId: id, shortTtlMs: 60_000, listenTtlMs: 60_000 }).pipe(Scope.provide(scope)))
      await heardEverything(cache) // its LISTEN is up
      await register(id)
      return cache
    }
    const others = [await instance("ins_other_a"), await instance("ins_other_b")]
    const deleter = await db.run(makeApiKeys({ instanceId: "ins_deleter", shortTtlMs: 60_000 }).pipe(Scope.provide(scope)))
    // A cache hit completes synchronously; a miss needs the database, so runSyncExit fails.
    const hit = (cache: Authenticator, apiKey: string) => Exit.isSuccess(Effect.runSyncExit(cache.authenticate(apiKey)))
    for (let round = 0; round < 8; round++) {
      const created = await run(users.createUserWithKey({ name: `grace-${round}` }))
      // The NOTIFY of the key's own INSERT must have passed before it is cached for the test.
      for (const other of others) await heardEverything(other)
      for (const other of others) await run(other.authenticate(created.apiKey))
      t.ok(others.every((o) => hit(o, created.apiKey)), `round ${round}: cached by both`)
      await run(deleter.deleteKey(round % 2 === 0 ? created.keyId : created.apiKey))
      const held = others.map((o) => hit(o, created.apiKey))
      if (!t.same(held, [false, false], `round ${round}: dropped by both the moment the delete answered`)) break
      t.equal(reasonOf(await exitOf(others[0]!.authenticate(created.apiKey))), "InvalidKey")
    }

    // Deletes at once, more than the pool has connections (10): each used to hold one for its
    // LISTEN, so nine of them took every connection and none could run its UPDATE.
    const many = await Promise.all(Array.from({ length: 12 }, (_, i) => run(users.createUserWithKey({ name: `ivan-${i}` }))))
    const deletedAll = await run(Effect.all(many.map((m) => deleter.deleteKey(m.keyId)), { concurrency: "unbounded" }).pipe(Effect.timeoutOption("20 seconds")))
    t.ok(deletedAll._tag === "Some" && deletedAll.value.length === 12, "12 concurrent deletes all answered")

    // Anything on the channel (other tools, a hand-typed NOTIFY, payloads shaped like answers):
    // no listener dies of it, and the next delete is still acknowledged by both at once.
    const junk = fc.sample(fc.oneof(
      fc.string({ maxLength: 80 }),
      fc.string({ maxLength: 20 }).map((s) => `ack ${s}`),
      fc.tuple(fc.string({ maxLength: 10 }), fc.string({ maxLength: 10 }), fc.string({ maxLength: 10 })).map((p) => p.join(" ")),
      fc.constantFrom("", " ", "ack", "ack  ", "zz tok extra", "\t\n", "ack tok ins_other_a")
    ), 60)
    await db.run(Effect.gen(function*() {
      const sql = yield* SqlClient
      for (const payload of junk) yield* sql`SELECT pg_notify('speech_api_keys', ${payload})`
    }))
    const afterJunk = await run(users.createUserWithKey({ name: "judy" }))
    for (const other of others) await heardEverything(other)
    for (const other of others) await run(other.authenticate(afterJunk.apiKey))
    await run(deleter.deleteKey(afterJunk.keyId))
    t.same(others.map((o) => hit(o, afterJunk.apiKey)), [false, false], "after 60 junk payloads a delete is still acknowledged by both")

    // A live row with nobody behind it (killed without deregistering): the delete still answers,
    // after the deleter's shortTtlMs, the bound on how long a deaf instance may hold a key.
    await register("ins_silent")
    const quick = await db.run(makeApiKeys({ instanceId: "ins_deleter_2", shortTtlMs: 300 }).pipe(Scope.provide(scope)))
    const created = await run(users.createUserWithKey({ name: "heidi" }))
    const started = Date.now()
    t.same(await run(quick.deleteKey(created.keyId)), { keyId: created.keyId, userId: created.userId })
    t.ok(Date.now() - started >= 300, "it waited for the silent instance as long as the bound")
  })

  t.test("keys are stored only as their sha256", async (t) => {
    const created = await run(users.createUserWithKey({ name: "frank" }))
    const rows = await db.run(Effect.gen(function*() {
      const sql = yield* SqlClient
      return yield* sql<Record<string, unknown>>`SELECT * FROM api_keys WHERE id = ${created.keyId}`
    }))
    t.equal(rows.length, 1)
    const row = rows[0]!
    t.same(Buffer.from(row.key_hash as Uint8Array), hashApiKey(created.apiKey), "key_hash is sha256(key)")
    for (const [column, value] of Object.entries(row)) {
      const text = value instanceof Uint8Array ? Buffer.from(value).toString("latin1") : String(value)
      t.notOk(text.includes(created.apiKey.slice(11)), `column ${column} does not hold the key's secret part`)
    }
  })

  t.test("unknown users and keys", async (t) => {
    t.equal(reasonOf(await exitOf(keys.mintKey("usr_missing"))), "UserNotFound")
    t.equal(reasonOf(await exitOf(keys.listKeys("usr_missing"))), "UserNotFound")
    t.equal(reasonOf(await exitOf(keys.deleteKey("key_missing"))), "KeyNotFound")
  })
})
