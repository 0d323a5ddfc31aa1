/**
 * Secrets the instances of one deployment share, made once per database: the first instance to
 * ask inserts a random value, every later one (and every restart) reads the same row. Used for
 * the key of presigned upload addresses, so an address issued by one instance is accepted by
 * another and survives restarts.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql/SqlClient"
import { randomBytes } from "node:crypto"

export const sharedSecret = (name: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient
    yield* sql`INSERT INTO service_secrets (name, value) VALUES (${name}, ${randomBytes(32).toString("base64url")}) ON CONFLICT (name) DO NOTHING`
    const rows = yield* sql<{ value: string }>`SELECT value FROM service_secrets WHERE name = ${name}`
    return rows[0]!.value
  })
