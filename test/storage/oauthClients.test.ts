/**
 * Unused OAuth clients expire (issue 38 item 7): registration is anonymous, so a client no user
 * ever granted anything is deleted a day after it registered, by the sweep every instance runs;
 * a client a user consented to (even one whose grant was later revoked) is kept, and so is a
 * client younger than a day. The sweep is driven directly; ages are set in the database.
 */
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql/SqlClient"
import t from "tap"
import { OAuthStore, oauthStoreLayer, UNUSED_CLIENT_TTL_S } from "../../storage/OAuthStore.ts"
import { Users } from "../../storage/Users.ts"
import { accountLayers } from "../support/accounts.ts"
import { useTestDatabaseWith } from "../support/database.ts"

const db = useTestDatabaseWith(t, Layer.merge(accountLayers(), oauthStoreLayer()))

t.test("the sweep deletes clients no user granted anything after a day, and keeps the rest", async (t) => {
  const { store, users, sql } = await db.run(Effect.all({ store: Effect.service(OAuthStore), users: Effect.service(Users), sql: Effect.service(SqlClient) }))
  const register = (name: string) => db.run(store.registerClient({ name, redirectUris: ["https://app.example/cb"], authMethod: "none" }))
  const unused = await register("never used")
  const consented = await register("consented")
  const revoked = await register("consented, then revoked")
  const young = await register("registered an hour ago")
  const user = await db.run(users.createUser({ name: "hal" }))
  await db.run(store.consent(user.userId, consented.clientId, ["voices"]))
  const grant = await db.run(store.consent(user.userId, revoked.clientId, ["voices"]))
  t.ok(await db.run(store.revokeGrant(user.userId, grant)))

  const age = (clientId: string, seconds: number) =>
    db.run(sql`UPDATE oauth_clients SET created_at = now() - make_interval(secs => ${seconds}) WHERE id = ${clientId}`)
  for (const c of [unused, consented, revoked]) await age(c.clientId, UNUSED_CLIENT_TTL_S + 60)
  await age(young.clientId, 3600)

  t.equal(await db.run(store.sweepUnusedClients()), 1, "one client removed")
  t.equal(await db.run(store.findClient(unused.clientId)), undefined, "the unused one is gone")
  t.ok(await db.run(store.findClient(consented.clientId)), "a consented client is kept")
  t.ok(await db.run(store.findClient(revoked.clientId)), "a client whose grant was revoked is kept: it did complete an authorization")
  t.ok(await db.run(store.findClient(young.clientId)), "a client younger than a day is kept")
  t.equal(await db.run(store.sweepUnusedClients()), 0, "a second sweep finds nothing")
})
