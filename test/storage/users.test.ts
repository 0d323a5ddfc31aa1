/**
 * Users (storage/Users.ts) against a fresh database of the mode the environment selects:
 * creation (with INITIAL_CREDITS, with a first key), listing, balance reads.
 */
import { Effect, Exit } from "effect"
import t from "tap"
import { ApiKeys } from "../../storage/ApiKeys.ts"
import { Users } from "../../storage/Users.ts"
import { accountLayers } from "../support/accounts.ts"
import { useTestDatabaseWith } from "../support/database.ts"

const reasonOf = <A, E>(exit: Exit.Exit<A, E>): string | undefined => {
  if (Exit.isSuccess(exit)) return undefined
  const failure = exit.cause.reasons.find((r) => r._tag === "Fail") as { error?: { reason?: string } } | undefined
  return failure?.error?.reason ?? "not a failure"
}

t.test("users", async (t) => {
  const db = useTestDatabaseWith(t, accountLayers({ initialCredits: 100 }))
  const users = await db.run(Effect.service(Users))
  const keys = await db.run(Effect.service(ApiKeys))
  const run = <A, E>(effect: Effect.Effect<A, E, never>) => db.run(effect)
  const exitOf = <A, E>(effect: Effect.Effect<A, E, never>) => db.run(Effect.exit(effect))

  t.test("createUser", async (t) => {
    const user = await run(users.createUser({ name: "alice" }))
    t.match(user.userId, /^usr_[0-9a-f]{20}$/)
    t.equal(user.credits, 100, "INITIAL_CREDITS applies when no amount is given")
    t.match(await run(users.getUser(user.userId)), { userId: user.userId, name: "alice", credits: 100 })
  })

  t.test("createUserWithKey", async (t) => {
    const created = await run(users.createUserWithKey({ name: "bob", credits: 5 }))
    t.equal(await run(users.balance(created.userId)), 5)
    t.equal((await run(keys.authenticate(created.apiKey))).keyId, created.keyId)
    const listed = (await run(users.listUsers())).find((u) => u.userId === created.userId)
    t.match(listed, { name: "bob", credits: 5, keyCount: 1 })
  })

  t.test("unknown users", async (t) => {
    t.equal(reasonOf(await exitOf(users.balance("usr_missing"))), "UserNotFound")
    t.equal(reasonOf(await exitOf(users.getUser("usr_missing"))), "UserNotFound")
  })
})
