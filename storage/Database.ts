/**
 * The database of the service, as one Layer providing effect's `SqlClient` and `PgClient`.
 *
 * With a `databaseUrl` it connects to that PostgreSQL. Without one it uses embedded PGlite in
 * `${dataDir}/pglite`, served on a unix socket in `dataDir` (EmbeddedPostgres.ts), and connects
 * @effect/sql-pg to that socket, so both modes run the same SQL through the same driver.
 * Migrations are applied while the layer builds. Closing the layer closes the client, then the
 * socket server, then PGlite.
 *
 * Embedded-mode differences that callers must respect:
 * - one backend runs one request at a time: a transaction blocks all other connections until
 *   it ends, so never wait inside a transaction for another connection's query;
 * - LISTEN/NOTIFY does not cross connections: use in-process notification and bound
 *   staleness between processes (see `Database.crossProcessNotify`).
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Net from "node:net"
import { type Cause, Context, Effect, Layer, Redacted } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import type { MigrationError } from "effect/sql/Migrator"
import { SqlClient } from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import type { DatabaseError } from "./DatabaseError.ts"
import * as EmbeddedPostgres from "./EmbeddedPostgres.ts"
import { runMigrations } from "./Migrations.ts"
import type { EmbeddedRole } from "./PgliteOwnership.ts"

export { DatabaseError } from "./DatabaseError.ts"
export type { EmbeddedRole } from "./PgliteOwnership.ts"

/** A jsonb column's value: pg hands it back parsed, some drivers as text; both are accepted. */
export const jsonbValue = (v: unknown): unknown => (typeof v === "string" ? JSON.parse(v) : v)

export interface DatabaseOptions {
  /** PostgreSQL URL; `undefined` (or "") selects embedded PGlite under `dataDir`. */
  readonly databaseUrl: string | undefined
  /** Directory for the embedded database (created if missing); unused with a URL. */
  readonly dataDir: string
  /**
   * Embedded mode only. "server" (default): owns the directory, waits for an admin tool that
   * holds it for a moment, refuses to share with another server. "tool": uses the running
   * owner's socket, or owns the directory itself for as long as it runs.
   */
  readonly embeddedRole?: EmbeddedRole
  /** Pool size. Default 10 with PostgreSQL; 4 (server) or 2 (tool) embedded, where one backend runs everything. */
  readonly maxConnections?: number
  /** Apply pending migrations while the layer builds (default true). */
  readonly migrate?: boolean
  /** PostgreSQL only: session `search_path` sent at connection start-up (tests use a schema each). */
  readonly searchPath?: string
  /** Embedded mode: how long to wait for another process's database to start or finish, ms (default 30000). */
  readonly ownerWaitMs?: number
  /**
   * PostgreSQL over TCP without TLS: a connection that has sent a statement and hears nothing
   * back for this long is closed, so the statement fails (503) instead of waiting for TCP to give
   * up on a silent peer (minutes). Unset: no bound. TLS connections are not watched.
   */
  readonly responseTimeoutMs?: number
}

export interface DatabaseInfo {
  readonly mode: "postgres" | "embedded"
  /**
   * Whether a NOTIFY sent by another process reaches a LISTEN in this one. False in embedded
   * mode, where every process shares one PGlite backend session.
   */
  readonly crossProcessNotify: boolean
  /** For start-up logs; never contains credentials. */
  readonly description: string
}

/** Which kind of database the layer opened. */
export class Database extends Context.Service<Database, DatabaseInfo>()("speech/storage/Database") {}

const applicationName = "speech-service"

const connectPostgres = (url: string, options: DatabaseOptions) =>
  Effect.gen(function*() {
    const client = yield* PgClient.make({
      url: Redacted.make(url),
      applicationName,
      maxConnections: options.maxConnections ?? 10,
      ...(options.responseTimeoutMs === undefined ? {} : watchedTcp(url, options.responseTimeoutMs)),
      ...(options.searchPath === undefined ? {} : { startupParameters: { search_path: options.searchPath } })
    })
    const where = safeUrlDescription(url)
    return { client, info: { mode: "postgres", crossProcessNotify: true, description: `PostgreSQL ${where}` } satisfies DatabaseInfo }
  })

const connectEmbedded = (options: DatabaseOptions) =>
  Effect.gen(function*() {
    const role = options.embeddedRole ?? "server"
    const endpoint = yield* EmbeddedPostgres.acquire({
      dataDir: options.dataDir,
      role,
      ...(options.ownerWaitMs === undefined ? {} : { waitMs: options.ownerWaitMs })
    })
    const client = yield* PgClient.make({
      path: endpoint.socketPath,
      username: "postgres",
      database: "postgres",
      applicationName,
      maxConnections: options.maxConnections ?? (role === "server" ? 4 : 2),
      // Prepared statements live in the one shared backend and outlive the connection that made
      // them; with pool connections coming and going they would pile up there forever.
      prepare: false
    })
    const how = endpoint.kind === "owner" ? "owned by this process" : `served by pid ${endpoint.ownerPid ?? "?"}`
    return {
      client,
      info: {
        mode: "embedded",
        crossProcessNotify: false,
        description: `embedded PGlite in ${endpoint.dataDir} (${how})`
      } satisfies DatabaseInfo
    }
  })

/**
 * The socket PgClient would open, plus a watchdog: armed by a write, disarmed by any byte read.
 * Every statement is answered by at least one message, so silence past the bound after a write
 * means the peer is gone (or a statement runs longer than the bound: keep it above the slowest
 * query). LISTEN connections write nothing while they wait, so they are never cut. Applies to
 * plain TCP only (unix sockets cannot stall that way; TLS reads bypass the raw socket's events).
 */
const watchedTcp = (url: string, timeoutMs: number): { stream?: () => Net.Socket } => {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return {}
  }
  const ssl = parsed.searchParams.get("sslmode") ?? parsed.searchParams.get("ssl")
  const host = parsed.searchParams.get("host") ?? decodeURIComponent(parsed.hostname)
  if ((ssl !== null && ssl !== "disable" && ssl !== "false") || host === "" || host.startsWith("/") || host.includes(",")) return {}
  const port = Number(parsed.port || 5432)
  return {
    stream: () => {
      const socket = Net.connect({ host: host.replace(/^\[|\]$/g, ""), port, noDelay: true })
      let timer: ReturnType<typeof setTimeout> | undefined
      const write = socket.write
      socket.write = function(this: Net.Socket, ...args: Array<unknown>) {
        timer ??= setTimeout(() => socket.destroy(new Error(`no answer from PostgreSQL for ${timeoutMs} ms`)), timeoutMs)
        return (write as (...a: Array<unknown>) => boolean).apply(this, args)
      } as typeof socket.write
      const disarm = () => {
        clearTimeout(timer)
        timer = undefined
      }
      socket.on("data", disarm)
      socket.on("close", disarm)
      return socket
    }
  }
}

/** Host, port and database of a URL, without user or password. */
const safeUrlDescription = (url: string): string => {
  try {
    const parsed = new URL(url)
    return `${parsed.hostname}${parsed.port ? `:${parsed.port}` : ""}${parsed.pathname}`
  } catch {
    return "(unparsable URL)"
  }
}

/** Opens the database, applies migrations, and closes everything when the layer's scope ends. */
export const databaseLayer = (
  options: DatabaseOptions
): Layer.Layer<Database | PgClient.PgClient | SqlClient, DatabaseError | SqlError | MigrationError> =>
  Layer.effectContext(
    Effect.gen(function*() {
      const { client, info } = options.databaseUrl !== undefined && options.databaseUrl !== ""
        ? yield* connectPostgres(options.databaseUrl, options)
        : yield* connectEmbedded(options)
      if (options.migrate !== false) {
        yield* runMigrations.pipe(Effect.provideService(SqlClient, client))
      }
      return Context.make(PgClient.PgClient, client).pipe(
        Context.add(SqlClient, client),
        Context.add(Database, info)
      )
    })
  ).pipe(Layer.provide(Reactivity.layer))

/** Readiness probe for /readyz: `SELECT 1`, failing when it errs or takes over 2 s. */
export const databaseReady: Effect.Effect<void, SqlError | Cause.TimeoutError, SqlClient> = Effect.gen(function*() {
  const sql = yield* SqlClient
  yield* sql`SELECT 1`
}).pipe(Effect.timeout("2 seconds"))

/** PostgreSQL: one statement on its own short-lived connection (schema creation and removal by tests and benches). */
export const adminStatement = (url: string, statement: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient
    yield* sql.unsafe(statement)
  }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 1 })))
