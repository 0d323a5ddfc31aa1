/**
 * Migrations apply on a brand-new PGlite directory (a real initdb, no template) and, when
 * DATABASE_URL is set, on that PostgreSQL in a schema of their own; re-running and concurrent
 * runs apply nothing twice.
 */
import { Effect, Exit, Layer, ManagedRuntime } from "effect"
import { SqlClient } from "effect/sql/SqlClient"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import t, { type Test } from "tap"
import { databaseLayer } from "../../storage/Database.ts"
import { migrationsTable, runMigrations } from "../../storage/Migrations.ts"
import { testDatabaseLayer } from "../support/database.ts"

const columnsOf = (table: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient
    const rows = yield* sql<{ column_name: string }>`
      SELECT column_name FROM information_schema.columns
      WHERE table_schema = current_schema() AND table_name = ${table}
      ORDER BY ordinal_position`
    return rows.map((r) => r.column_name)
  })

/**
 * Every file in storage/migrations as [id, name], read from the directory rather than from the
 * registry in Migrations.ts: a migration written but not registered fails here.
 */
const everyMigration = fs.readdirSync(path.join(import.meta.dirname, "../../storage/migrations"))
  .flatMap((file) => {
    const match = /^(\d{4})_(\w+)\.ts$/.exec(file)
    return match ? [[Number(match[1]), match[2]] as const] : []
  })
  .sort((a, b) => a[0] - b[0])

/** The same checks on whichever database the layer opens (built with migrate: false). */
const checkMigrations = async (t: Test, layer: Layer.Layer<SqlClient, unknown>) => {
  const runtime = ManagedRuntime.make(layer)
  t.teardown(() => runtime.dispose())
  // Instances of a deployment start together: two runs race on a fresh database.
  const both = await runtime.runPromise(Effect.all([runMigrations, runMigrations], { concurrency: 2 }))
  t.same([...both[0], ...both[1]], everyMigration, "of two concurrent first runs, one applies everything")
  t.same(await runtime.runPromise(runMigrations), [], "a later run applies nothing")

  t.same(await runtime.runPromise(columnsOf("users")), ["id", "name", "created_at", "credits", "summary_template_id", "email", "password_hash"])
  t.same(await runtime.runPromise(columnsOf("job_summaries")), ["id", "seq", "job_id", "template_id", "engine", "sections", "text", "created_at"])
  t.same(
    await runtime.runPromise(columnsOf("api_keys")),
    ["id", "user_id", "name", "key_hash", "key_prefix", "created_at", "deleted_at", "last_used_at", "key_suffix"]
  )
  const recorded = await runtime.runPromise(Effect.gen(function*() {
    const sql = yield* SqlClient
    return yield* sql<{ migration_id: number; name: string }>`SELECT migration_id, name FROM ${sql(migrationsTable)}`
  }))
  t.same(recorded.map((r) => [r.migration_id, r.name]), everyMigration)

  const negative = await runtime.runPromise(Effect.exit(Effect.gen(function*() {
    const sql = yield* SqlClient
    yield* sql`INSERT INTO users (id, name, credits) VALUES ('usr_x', 'x', -1)`
  })))
  t.ok(Exit.isFailure(negative), "credits cannot go below zero")
}

t.test("on a fresh PGlite directory", async (t) => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "speech-migrations-"))
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }))
  await t.test("migrations apply", (t) => checkMigrations(t, databaseLayer({ databaseUrl: undefined, dataDir, migrate: false })))
  t.ok(fs.existsSync(path.join(dataDir, "pglite", "PG_VERSION")), "PGlite lives in DATA_DIR/pglite")

  await t.test("reopened after closing, with start-up migrations: nothing left to apply", async (t) => {
    const runtime = ManagedRuntime.make(databaseLayer({ databaseUrl: undefined, dataDir }))
    t.teardown(() => runtime.dispose())
    t.same(await runtime.runPromise(runMigrations), [])
    const users = await runtime.runPromise(Effect.gen(function*() {
      const sql = yield* SqlClient
      return yield* sql`SELECT count(*)::int AS n FROM users`
    }))
    t.same(users, [{ n: 0 }])
  })
})

const databaseUrl = process.env.DATABASE_URL
t.test("on PostgreSQL (DATABASE_URL)", { skip: databaseUrl ? false : "DATABASE_URL is not set" }, async (t) => {
  await checkMigrations(t, testDatabaseLayer({ migrate: false }))
})
