/**
 * A fresh, migrated database for one test, isolated from every other test, in whichever mode the
 * environment selects:
 * - `DATABASE_URL` set: a new schema `test_<random>` in that PostgreSQL, made the connections'
 *   search_path at start-up and dropped (CASCADE) when the layer closes, so test files can run in
 *   parallel on one shared database;
 * - unset: embedded PGlite in a new temporary directory, removed when the layer closes.
 *
 * PGlite's initdb takes 5-9 s, so embedded databases are copied from a template directory made
 * once per machine (under the OS temp dir, keyed by the PGlite version); a copy opens in ~0.5 s.
 *
 * Usage:
 *   const db = useTestDatabase(t)            // registers t.teardown
 *   await db.run(Effect.gen(function*() { const sql = yield* SqlClient; ... }))
 * or build your own runtime from `testDatabaseLayer()`.
 */
import { PGlite } from "@electric-sql/pglite"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Effect, Layer, ManagedRuntime, Redacted } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import { SqlClient } from "effect/sql/SqlClient"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as os from "node:os"
import * as path from "node:path"
import { adminStatement, type Database, databaseLayer, type DatabaseOptions } from "../../storage/Database.ts"

export type TestDatabaseServices = Database | PgClient.PgClient | SqlClient

export interface TestDatabaseOptions {
  /** Apply migrations (default true). */
  readonly migrate?: boolean
  readonly maxConnections?: number
}

export const testDatabaseMode = (): "postgres" | "embedded" =>
  process.env.DATABASE_URL !== undefined && process.env.DATABASE_URL !== "" ? "postgres" : "embedded"


const pgliteVersion = (): string => {
  // package.json is not among the package's exports: find it next to the resolved entry point.
  let dir = path.dirname(createRequire(import.meta.url).resolve("@electric-sql/pglite"))
  while (!fs.existsSync(path.join(dir, "package.json"))) dir = path.dirname(dir)
  return (JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")) as { version: string }).version
}

/** An initdb'd, never-migrated PGlite directory to copy; built once, atomically (rename). */
const pgliteTemplate = async (): Promise<string> => {
  const template = path.join(os.tmpdir(), `speech-test-pglite-${pgliteVersion()}`)
  if (fs.existsSync(path.join(template, "PG_VERSION"))) return template
  const building = `${template}.building-${process.pid}-${randomBytes(4).toString("hex")}`
  const db = await PGlite.create(building)
  await db.close()
  try {
    fs.renameSync(building, template)
  } catch {
    // Another test process finished first; its template is as good as ours.
    fs.rmSync(building, { recursive: true, force: true })
  }
  return template
}

/**
 * A new temporary DATA_DIR whose `pglite` directory is a copy of the template (initdb done, no
 * migrations). The caller removes it; for tests that need embedded mode whatever the environment.
 */
export const freshEmbeddedDataDir = async (): Promise<string> => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "speech-test-db-"))
  fs.cpSync(await pgliteTemplate(), path.join(dataDir, "pglite"), { recursive: true })
  return dataDir
}

/** A migrated database of its own; everything it created is removed when the layer closes. */
export const testDatabaseLayer = (
  options: TestDatabaseOptions = {}
): Layer.Layer<TestDatabaseServices, unknown> =>
  Layer.unwrap(
    Effect.gen(function*() {
      const common: Omit<DatabaseOptions, "databaseUrl" | "dataDir"> = {
        ...(options.migrate === undefined ? {} : { migrate: options.migrate }),
        ...(options.maxConnections === undefined ? {} : { maxConnections: options.maxConnections })
      }
      const url = process.env.DATABASE_URL
      if (url !== undefined && url !== "") {
        const schema = `test_${randomBytes(6).toString("hex")}`
        yield* adminStatement(url, `CREATE SCHEMA ${schema}`)
        yield* Effect.addFinalizer(() => adminStatement(url, `DROP SCHEMA ${schema} CASCADE`).pipe(Effect.ignore))
        return databaseLayer({ ...common, databaseUrl: url, dataDir: os.tmpdir(), searchPath: schema })
      }
      const dataDir = yield* Effect.promise(freshEmbeddedDataDir)
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dataDir, { recursive: true, force: true })))
      return databaseLayer({ ...common, databaseUrl: undefined, dataDir })
    })
  ).pipe(Layer.provide(Reactivity.layer))

/**
 * PostgreSQL only: a new schema and a copy of `url` whose connections use it (through the URL's
 * `options` parameter), for child processes that read DATABASE_URL. Dropped in the teardown.
 */
export const isolatedDatabaseUrl = async (t: { teardown: (fn: () => unknown) => void }, url: string): Promise<string> => {
  const schema = `test_${randomBytes(6).toString("hex")}`
  await Effect.runPromise(adminStatement(url, `CREATE SCHEMA ${schema}`))
  t.teardown(() => Effect.runPromise(adminStatement(url, `DROP SCHEMA ${schema} CASCADE`).pipe(Effect.ignore)))
  const isolated = new URL(url)
  isolated.searchParams.set("options", `-c search_path=${schema}`)
  return isolated.toString()
}

export interface TestDatabase {
  readonly mode: "postgres" | "embedded"
  readonly runtime: ManagedRuntime.ManagedRuntime<TestDatabaseServices, unknown>
  readonly run: <A, E>(effect: Effect.Effect<A, E, TestDatabaseServices>) => Promise<A>
}

/** A test database whose lifetime is the given tap test's (closed in its teardown). */
export const useTestDatabase = (
  t: { teardown: (fn: () => unknown) => void },
  options: TestDatabaseOptions = {}
): TestDatabase => {
  const runtime = ManagedRuntime.make(testDatabaseLayer(options))
  t.teardown(() => runtime.dispose())
  return { mode: testDatabaseMode(), runtime, run: (effect) => runtime.runPromise(effect) }
}

/** Same, plus extra layers built on top of the database (e.g. `AccountsLive`). */
export const useTestDatabaseWith = <A, E>(
  t: { teardown: (fn: () => unknown) => void },
  extra: Layer.Layer<A, E, TestDatabaseServices>,
  options: TestDatabaseOptions = {}
) => {
  const runtime = ManagedRuntime.make(extra.pipe(Layer.provideMerge(testDatabaseLayer(options))))
  t.teardown(() => runtime.dispose())
  return {
    mode: testDatabaseMode(),
    runtime,
    run: <B, E2>(effect: Effect.Effect<B, E2, A | TestDatabaseServices>) => runtime.runPromise(effect)
  }
}
