/**
 * The embedded database: PGlite in `${dataDir}/pglite`, served on a unix socket so that every
 * client, in this process or another, speaks the PostgreSQL wire protocol through @effect/sql-pg
 * exactly as it would to a real server.
 *
 * `acquire` either starts PGlite and its socket server (this process owns the directory) or
 * finds the owner's socket (see PgliteOwnership.ts). Closing the scope stops the socket server,
 * lets queued messages finish, closes PGlite and removes the lock, in that order.
 */
import { PGlite } from "@electric-sql/pglite"
import { PGLiteSocketServer } from "@electric-sql/pglite-socket"
import { Effect, type Scope } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { DatabaseError } from "./DatabaseError.ts"
import { PgliteSessionQueue } from "./PgliteSessionQueue.ts"
import { claim, type EmbeddedRole, release, socketPathFor } from "./PgliteOwnership.ts"

export interface EmbeddedEndpoint {
  readonly socketPath: string
  /** "owner": PGlite runs in this process; "guest": another process serves it. */
  readonly kind: "owner" | "guest"
  readonly ownerPid: number | undefined
  readonly dataDir: string
}

export interface EmbeddedOptions {
  readonly dataDir: string
  readonly role: EmbeddedRole
  /** Waiting for an owner that is starting or (for a server) for an admin tool to finish, ms. */
  readonly waitMs?: number
  /**
   * Socket connections the owner accepts. Every process's pool counts, so keep it well above
   * the server pool plus a few admin tools; beyond it the library answers with a bare text line
   * that clients report as a protocol error.
   */
  readonly maxSocketConnections?: number
}

const startFailed = (message: string) => (cause: unknown) =>
  new DatabaseError({
    reason: "StartFailed",
    message: `${message}: ${cause instanceof Error ? cause.message : String(cause)}`,
    cause
  })

/** Replaces the library's message queue, which interleaves requests of different connections. */
const installSessionQueue = (server: PGLiteSocketServer, queue: PgliteSessionQueue): void => {
  const internals = server as unknown as { queryQueue?: unknown }
  if (internals.queryQueue === undefined) {
    // The pinned 0.2.17 has this field; a different version must be checked by hand again.
    throw new Error("PGLiteSocketServer has no queryQueue field: check the pglite-socket version")
  }
  internals.queryQueue = queue
}

export const acquire = (options: EmbeddedOptions): Effect.Effect<EmbeddedEndpoint, DatabaseError, Scope.Scope> =>
  Effect.gen(function*() {
    const dataDir = yield* Effect.try({
      try: () => {
        fs.mkdirSync(options.dataDir, { recursive: true })
        return fs.realpathSync(options.dataDir)
      },
      catch: startFailed(`cannot create DATA_DIR ${options.dataDir}`)
    })
    const socketPath = socketPathFor(dataDir)
    const claimed = yield* Effect.tryPromise({
      try: () => claim({ dataDir, role: options.role, waitMs: options.waitMs ?? 30_000 }),
      catch: (cause) => cause instanceof DatabaseError ? cause : startFailed(`cannot lock ${dataDir}`)(cause)
    })
    if (claimed.kind === "guest") {
      return { socketPath, kind: "guest", ownerPid: claimed.holder?.pid, dataDir } satisfies EmbeddedEndpoint
    }
    yield* Effect.addFinalizer(() => Effect.sync(() => release(dataDir, claimed.lock)))
    // A crashed owner leaves its socket file behind, and listening on it fails with EADDRINUSE.
    fs.rmSync(socketPath, { force: true })

    const pgliteDir = path.join(dataDir, "pglite")
    const db = yield* Effect.acquireRelease(
      Effect.tryPromise({ try: () => PGlite.create(pgliteDir), catch: startFailed(`cannot open PGlite in ${pgliteDir}`) }),
      (db) =>
        Effect.tryPromise(() => db.close()).pipe(
          Effect.catchCause((cause) => Effect.logWarning("closing PGlite failed", cause))
        )
    )
    const queue = new PgliteSessionQueue(db)
    const server = new PGLiteSocketServer({ db, path: socketPath, maxConnections: options.maxSocketConnections ?? 64 })
    yield* Effect.try({ try: () => installSessionQueue(server, queue), catch: startFailed("cannot serve PGlite") })
    yield* Effect.acquireRelease(
      Effect.tryPromise({ try: () => server.start(), catch: startFailed(`cannot listen on ${socketPath}`) }),
      () =>
        Effect.promise(async () => {
          await server.stop()
          // Connections that closed just now queue a rollback; PGlite must outlive it.
          await queue.idle()
        })
    )
    return { socketPath, kind: "owner", ownerPid: process.pid, dataDir } satisfies EmbeddedEndpoint
  })
