/**
 * Credits as a ledger: grants, debits, refunds and reservations (reserve, resize, settle,
 * release) against a fresh database of the mode the environment selects. The property: for
 * every user, at every point, the ledger's sum equals the balance plus what open reservations
 * hold, and the balance is never negative, under random sequences run one after another
 * (checked against a model) and in concurrent batches.
 */
import { Effect, Exit } from "effect"
import { SqlClient } from "effect/sql/SqlClient"
import fc from "fast-check"
import t from "tap"
import { Credits, type Reservation } from "../../storage/Credits.ts"
import { Users } from "../../storage/Users.ts"
import { accountLayers } from "../support/accounts.ts"
import { hostKey, releaseDeadInstances } from "../../storage/InstanceRegistry.ts"
import * as Migrator from "effect/sql/Migrator"
import { migrations, migrationsTable } from "../../storage/Migrations.ts"
import { useTestDatabase, useTestDatabaseWith } from "../support/database.ts"

const reasonOf = <A, E>(exit: Exit.Exit<A, E>): string | undefined => {
  if (Exit.isSuccess(exit)) return undefined
  const failure = exit.cause.reasons.find((r) => r._tag === "Fail") as { error?: { reason?: string } } | undefined
  return failure?.error?.reason ?? "not a failure"
}

t.test("credit ledger", async (t) => {
  const db = useTestDatabaseWith(t, accountLayers({ instanceId: "ins_test" }))
  const users = await db.run(Effect.service(Users))
  const credits = await db.run(Effect.service(Credits))
  const run = <A, E>(effect: Effect.Effect<A, E, never>) => db.run(effect)
  const exitOf = <A, E>(effect: Effect.Effect<A, E, never>) => db.run(Effect.exit(effect))

  /** Ledger sum, balance and reserved credits of a user, read in one statement. */
  const books = (userId: string) =>
    db.run(Effect.gen(function*() {
      const sql = yield* SqlClient
      const rows = yield* sql<{ ledger: string; balance: string; reserved: string }>`
        SELECT (SELECT coalesce(sum(amount), 0) FROM credit_ledger WHERE user_id = ${userId})::text AS ledger,
               (SELECT credits FROM users WHERE id = ${userId})::text AS balance,
               (SELECT coalesce(sum(amount), 0) FROM credit_reservations WHERE user_id = ${userId})::text AS reserved`
      return { ledger: Number(rows[0]!.ledger), balance: Number(rows[0]!.balance), reserved: Number(rows[0]!.reserved) }
    }))

  t.test("200 concurrent debits of 1 against 50 never overdraw", async (t) => {
    const user = await run(users.createUser({ name: "grace", credits: 50 }))
    const exits = await run(
      Effect.forEach(Array.from({ length: 200 }), () => Effect.exit(credits.debit(user.userId, 1)), { concurrency: "unbounded" })
    )
    const succeeded = exits.filter(Exit.isSuccess)
    t.equal(succeeded.length, 50, "exactly 50 debits succeed")
    t.ok(exits.filter(Exit.isFailure).every((e) => reasonOf(e) === "InsufficientCredits"), "the rest are InsufficientCredits")
    t.same(new Set(succeeded.map((e) => e.value)).size, 50, "each success saw a distinct remaining balance")
    t.equal(await run(users.balance(user.userId)), 0)
  })

  t.test("debit, refund, grant, and their failures", async (t) => {
    const user = await run(users.createUser({ name: "heidi", credits: 10 }))
    t.equal(await run(credits.debit(user.userId, 4)), 6)
    t.equal(await run(credits.refund(user.userId, 4)), 10)
    t.equal(await run(credits.grantCredits(user.userId, 90)), 100)
    t.equal(reasonOf(await exitOf(credits.debit(user.userId, 101))), "InsufficientCredits")
    t.equal(await run(users.balance(user.userId)), 100, "a refused debit takes nothing")
    t.equal(reasonOf(await exitOf(credits.debit("usr_missing", 1))), "UserNotFound")
    t.equal(reasonOf(await exitOf(credits.grantCredits("usr_missing", 1))), "UserNotFound")
  })

  t.test("every movement is a ledger row with the balance after it, newest first", async (t) => {
    const user = await run(users.createUser({ name: "ledger", credits: 100 }))
    await run(credits.grantCredits(user.userId, 50, { purpose: "admin" }))
    await run(credits.debit(user.userId, 30, { purpose: "tts_ws", reference: "req-1" }))
    await run(credits.refund(user.userId, 5))
    const held = await run(credits.reserve(user.userId, 40, { purpose: "tts", reference: "req-2" }))
    t.equal(await run(users.balance(user.userId)), 85, "a reservation leaves the balance at once")
    t.equal(await run(credits.reserved(user.userId)), 40)
    t.equal(await run(credits.settle(held, 25)), 25, "settle charges what was used")
    t.equal(await run(credits.settle(held, 25)), 0, "a second settle charges nothing")
    await run(credits.release(held))
    t.equal(await run(users.balance(user.userId)), 100)
    const entries = await run(credits.ledger(user.userId))
    t.same(
      entries.map((e) => [e.kind, e.amount, e.balanceAfter, e.purpose, e.reference]),
      [
        ["debit", -25, 100, "tts", "req-2"],
        ["refund", 5, 125, null, null],
        ["debit", -30, 120, "tts_ws", "req-1"],
        ["grant", 50, 150, "admin", null],
        ["grant", 100, 100, "new user", null]
      ]
    )
    const page = await run(credits.ledger(user.userId, { limit: 2, before: entries[1]!.id }))
    t.same(page.map((e) => e.id), [entries[2]!.id, entries[3]!.id], "paged by id")
    t.equal(reasonOf(await exitOf(credits.ledger("usr_nobody"))), "UserNotFound")
  })

  t.test("reserving more than the balance is InsufficientCredits and holds nothing", async (t) => {
    const user = await run(users.createUser({ name: "short", credits: 10 }))
    t.equal(reasonOf(await exitOf(credits.reserve(user.userId, 11))), "InsufficientCredits")
    const held = await run(credits.reserve(user.userId, 4))
    t.equal(reasonOf(await exitOf(credits.resize(held, 15))), "InsufficientCredits", "growing past the balance")
    t.same(await books(user.userId), { ledger: 10, balance: 6, reserved: 4 }, "a refused resize changes nothing")
    const grown = await run(credits.resize(held, 10))
    t.equal(grown.amount, 10)
    t.same(await books(user.userId), { ledger: 10, balance: 0, reserved: 10 })
    await run(credits.resize(grown, 3))
    t.same(await books(user.userId), { ledger: 10, balance: 7, reserved: 3 }, "shrinking gives back")
    t.equal(await run(credits.settle(grown, 99)), 3, "never charges more than is held")
    t.same(await books(user.userId), { ledger: 7, balance: 7, reserved: 0 })
    t.equal(reasonOf(await exitOf(credits.reserve("usr_nobody", 1))), "UserNotFound")
  })

  t.test("200 concurrent reservations of 1 against 50 credits: exactly 50 are held", async (t) => {
    const user = await run(users.createUser({ name: "crowd", credits: 50 }))
    const exits = await run(Effect.all(Array.from({ length: 200 }, () => Effect.exit(credits.reserve(user.userId, 1))), { concurrency: "unbounded" }))
    const held = exits.filter(Exit.isSuccess)
    t.equal(held.length, 50)
    t.equal(exits.filter((e) => reasonOf(e) === "InsufficientCredits").length, 150)
    t.same(await books(user.userId), { ledger: 50, balance: 0, reserved: 50 })
    await run(Effect.all(held.map((e, i) => credits.settle(e.value, i % 2)), { concurrency: "unbounded" }))
    t.same(await books(user.userId), { ledger: 25, balance: 25, reserved: 0 }, "half charged 1, half 0")
  })

  t.test("a reservation given back by the registry settles for nothing, and is given back once", async (t) => {
    const user = await run(users.createUser({ name: "swept", credits: 100 }))
    const sql = await db.run(Effect.service(SqlClient))
    // A reservation of another (dead) instance: this one plays the restarted server.
    await run(sql`INSERT INTO credit_reservations (id, user_id, amount, instance_id, purpose)
                  VALUES ('rsv_dead', ${user.userId}, 30, 'ins_dead', 'tts')`)
    await run(sql`UPDATE users SET credits = credits - 30 WHERE id = ${user.userId}`)
    const mine = await run(credits.reserve(user.userId, 20))
    const released = await db.run(releaseDeadInstances({ instanceId: "ins_test", heartbeatMs: 1000, staleAfterMs: 60_000, everyoneElse: true }))
    t.match(released, { reservations: 1, credits: 30 }, "only the other instance's reservation")
    t.same(await books(user.userId), { ledger: 100, balance: 80, reserved: 20 })
    const again = await db.run(releaseDeadInstances({ instanceId: "ins_test", heartbeatMs: 1000, staleAfterMs: 60_000, everyoneElse: true }))
    t.match(again, { reservations: 0, credits: 0 })
    t.equal(await run(credits.settle({ id: "rsv_dead", userId: user.userId, amount: 30 }, 30)), 0, "its late settle charges nothing")
    await run(credits.settle(mine, 20))
    t.same(await books(user.userId), { ledger: 80, balance: 80, reserved: 0 })
  })

  t.test("the sweeper: silent instances and dead pids on this host lose their reservations, live ones keep them", async (t) => {
    const user = await run(users.createUser({ name: "sweep", credits: 100 }))
    const sql = await db.run(Effect.service(SqlClient))
    const hold = (reservation: string, instance: string, amount: number) =>
      run(Effect.all([
        sql`INSERT INTO credit_reservations (id, user_id, amount, instance_id, purpose)
            VALUES (${reservation}, ${user.userId}, ${amount}, ${instance}, 'tts')`,
        sql`UPDATE users SET credits = credits - ${amount} WHERE id = ${user.userId}`
      ], { discard: true }))
    // Pids above the kernel's pid_max (4194304 at most) never exist.
    await run(sql`INSERT INTO service_instances (id, host_key, pid) VALUES
      ('ins_live', 'elsewhere', 1), ('ins_silent', 'elsewhere', 1), ('ins_gone', ${hostKey()}, 4999999),
      ('ins_neighbour', ${hostKey()}, ${process.pid === 1 ? 2 : 1})`)
    await run(sql`UPDATE service_instances SET last_seen = now() - interval '2 minutes' WHERE id = 'ins_silent'`)
    await hold("rsv_live", "ins_live", 1)
    await hold("rsv_silent", "ins_silent", 2)
    await hold("rsv_gone", "ins_gone", 4)
    await hold("rsv_neighbour", "ins_neighbour", 8)
    await hold("rsv_orphan_new", "ins_unknown", 16)
    const sweep = { instanceId: "ins_test", heartbeatMs: 10_000, staleAfterMs: 60_000, everyoneElse: false }
    const released = await db.run(releaseDeadInstances(sweep))
    t.same([...released.instances].sort(), ["ins_gone", "ins_silent"])
    t.equal(released.credits, 6, "the silent instance's 2 and the dead pid's 4")
    t.equal(await run(credits.reserved(user.userId)), 1 + 8 + 16, "a live instance, a live pid on this host and a fresh orphan keep theirs")
    await run(sql`UPDATE credit_reservations SET created_at = now() - interval '2 minutes' WHERE id = 'rsv_orphan_new'`)
    t.equal((await db.run(releaseDeadInstances(sweep))).credits, 16, "an orphan older than the bound is given back")
    t.same(await books(user.userId), { ledger: 100, balance: 91, reserved: 9 })
    await run(sql`DELETE FROM credit_reservations WHERE id IN ('rsv_live', 'rsv_neighbour')`)
    await run(sql`DELETE FROM service_instances WHERE id IN ('ins_live', 'ins_neighbour')`)
  })

  // ---- the property ---------------------------------------------------------------------------

  type Op =
    | { readonly op: "grant" | "debit" | "refund" | "reserve"; readonly user: number; readonly n: number }
    | { readonly op: "settle" | "resize"; readonly slot: number; readonly n: number }
    | { readonly op: "release"; readonly slot: number }

  const user = fc.integer({ min: 0, max: 1 })
  const amount = fc.integer({ min: 0, max: 40 })
  const slot = fc.nat({ max: 20 })
  const op: fc.Arbitrary<Op> = fc.oneof(
    fc.record({ op: fc.constantFrom("grant", "debit", "refund", "reserve" as const), user, n: amount }),
    fc.record({ op: fc.constantFrom("reserve" as const), user, n: amount }),
    fc.record({ op: fc.constantFrom("settle", "resize" as const), slot, n: amount }),
    fc.record({ op: fc.constant("release" as const), slot })
  )
  const batch = fc.record({ concurrent: fc.boolean(), ops: fc.array(op, { minLength: 1, maxLength: 8 }) })

  t.test("property: ledger sum = balance + reserved, balance never negative", async (t) => {
    let runs = 0
    await fc.assert(
      fc.asyncProperty(fc.array(batch, { minLength: 1, maxLength: 5 }), fc.array(fc.integer({ min: 0, max: 60 }), { minLength: 2, maxLength: 2 }), async (batches, starts) => {
        runs++
        const created = await Promise.all(starts.map((amount) => run(users.createUser({ name: "prop", credits: amount }))))
        const ids = created.map((u) => u.userId)
        const slots: Array<Reservation> = []
        // The model: exact while ops run one at a time; concurrent batches make it unknowable,
        // after which only the invariant is checked.
        let modelValid = true
        const balance = [...starts]
        const open = new Map<string, number>()
        const apply = (o: Op): Effect.Effect<void, unknown> => {
          switch (o.op) {
            case "grant":
            case "refund":
              return Effect.map(o.op === "grant" ? credits.grantCredits(ids[o.user]!, o.n) : credits.refund(ids[o.user]!, o.n), () => {
                balance[o.user]! += o.n
              })
            case "debit":
              return Effect.map(Effect.exit(credits.debit(ids[o.user]!, o.n)), (exit) => {
                if (modelValid && Exit.isSuccess(exit) !== balance[o.user]! >= o.n) throw new Error("debit disagrees with the model")
                if (Exit.isSuccess(exit)) balance[o.user]! -= o.n
              })
            case "reserve":
              return Effect.map(Effect.exit(credits.reserve(ids[o.user]!, o.n)), (exit) => {
                if (modelValid && Exit.isSuccess(exit) !== balance[o.user]! >= o.n) throw new Error("reserve disagrees with the model")
                if (Exit.isSuccess(exit)) {
                  slots.push(exit.value)
                  open.set(exit.value.id, o.n)
                  balance[o.user]! -= o.n
                }
              })
            case "settle":
            case "release":
            case "resize": {
              const r = slots[o.slot % Math.max(1, slots.length)]
              if (r === undefined) return Effect.void
              const u = ids.indexOf(r.userId)
              const held = open.get(r.id)
              if (o.op === "resize") {
                // Resizing an ended reservation takes it again (the swept case); keep to open ones.
                if (held === undefined) return Effect.void
                return Effect.map(Effect.exit(credits.resize(r, o.n)), (exit) => {
                  if (modelValid && Exit.isSuccess(exit) !== balance[u]! >= o.n - held) throw new Error("resize disagrees with the model")
                  if (Exit.isSuccess(exit)) {
                    balance[u]! -= o.n - (open.get(r.id) ?? 0)
                    open.set(r.id, o.n)
                  }
                })
              }
              const charge = o.op === "settle" ? o.n : 0
              return Effect.map(credits.settle(r, charge), (charged) => {
                const before = open.get(r.id)
                if (modelValid && charged !== (before === undefined ? 0 : Math.min(before, charge))) throw new Error("settle disagrees with the model")
                if (before !== undefined) balance[u]! += before - charged
                open.delete(r.id)
              })
            }
          }
        }
        for (const b of batches) {
          if (b.concurrent && b.ops.length > 1) modelValid = false
          // Suspended: each op reads the model when it runs, not when the batch is built.
          await run(Effect.all(b.ops.map((o) => Effect.suspend(() => apply(o))), { concurrency: b.concurrent ? "unbounded" : 1, discard: true }))
          for (const [i, id] of ids.entries()) {
            const now = await books(id)
            if (now.balance < 0) throw new Error(`negative balance ${now.balance}`)
            if (now.ledger !== now.balance + now.reserved) throw new Error(`ledger ${now.ledger} != balance ${now.balance} + reserved ${now.reserved}`)
            if (modelValid && now.balance !== balance[i]) throw new Error(`balance ${now.balance}, model ${balance[i]}`)
          }
        }
        // Ending everything leaves no reservation and a ledger that adds up to the balance.
        await run(Effect.all(slots.map((r) => credits.release(r)), { concurrency: "unbounded", discard: true }))
        for (const id of ids) {
          const end = await books(id)
          if (end.reserved !== 0 || end.ledger !== end.balance) throw new Error(`after release: ${JSON.stringify(end)}`)
        }
      }),
      { numRuns: 60 }
    )
    t.equal(runs >= 60, true, "ran the property")
  })
})

t.test("migration 0003 opens the ledger of existing users with their balance", async (t) => {
  const db = useTestDatabase(t, { migrate: false })
  const upTo = (last: number) =>
    Migrator.make({})({
      loader: Migrator.fromRecord(Object.fromEntries(Object.entries(migrations).filter(([id]) => Number(id.slice(0, 4)) <= last))),
      table: migrationsTable
    })
  await db.run(upTo(2))
  await db.run(Effect.gen(function*() {
    const sql = yield* SqlClient
    yield* sql`INSERT INTO users (id, name, credits) VALUES ('usr_old', 'old', 70), ('usr_empty', 'empty', 0)`
  }))
  await db.run(upTo(3))
  const rows = await db.run(Effect.gen(function*() {
    const sql = yield* SqlClient
    return yield* sql<{ user_id: string; kind: string; amount: string; balance_after: string }>`
      SELECT user_id, kind, amount::text, balance_after::text FROM credit_ledger ORDER BY user_id`
  }))
  t.same(rows.map((r) => [r.user_id, r.kind, Number(r.amount), Number(r.balance_after)]), [["usr_old", "grant", 70, 70]])
})
