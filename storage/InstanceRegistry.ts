/**
 * Which server processes are alive, so that credits reserved by a dead one come back.
 *
 * Each server registers an instance row (id, host key, pid) at start-up and removes it at a
 * clean shutdown. A reservation (storage/CreditLedger.ts) names the instance that holds it. An
 * instance is dead when:
 * - embedded PGlite: it is not us. Only one server process owns the directory
 *   (storage/PgliteOwnership.ts), so every reservation found at start-up belongs to a process
 *   that ended without settling it;
 * - PostgreSQL, where several instances share the database: its heartbeat (`last_seen`, set to
 *   the database's `now()` every `heartbeatMs`) is older than `staleAfterMs`; or it ran on this
 *   very kernel (same hostname, PID namespace and boot id) and its pid no longer exists, which
 *   a restart on the same host sees at once.
 * Dead instances' reservations are given back at start-up and then, on PostgreSQL, by a sweeper
 * that runs every `heartbeatMs` in every instance. A live instance that falls silent for longer
 * than `staleAfterMs` (stopped, or cut off from the database) loses its open reservations: the
 * work they paid for becomes free when it settles (settling a released reservation charges
 * nothing), it is never charged twice. Its heartbeat registers it again when it comes back.
 */
import { Effect, Layer, Schedule } from "effect"
import { SqlClient } from "effect/sql/SqlClient"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import { releaseWhere } from "./CreditLedger.ts"
import { Database } from "./Database.ts"
import { processAlive } from "./ProcessAlive.ts"

export interface InstanceOptions {
  /** This process's id; reservations are taken under it (CreditsOptions.instanceId, storage/Credits.ts). */
  readonly instanceId: string
  /** How often the heartbeat and the sweeper run (PostgreSQL), ms. */
  readonly heartbeatMs: number
  /** Silence after which an instance counts as dead (PostgreSQL), ms; keep it several heartbeats. */
  readonly staleAfterMs: number
}

export const newInstanceId = (): string => `ins_${randomBytes(10).toString("hex")}`

/** Instances registered by this process (tests run several services in one process). */
const registeredHere = new Set<string>()

const readOr = (file: string, fallback: string): string => {
  try {
    return fs.readFileSync(file, "utf8").trim()
  } catch {
    return fallback
  }
}

const pidNamespace = (): string => {
  try {
    return fs.readlinkSync("/proc/self/ns/pid")
  } catch {
    return "?"
  }
}

/**
 * Two processes with the same key run on one kernel and see each other's pids. Containers have
 * their own PID namespace, so the same hostname in two containers gives different keys.
 */
export const hostKey = (): string =>
  `${os.hostname()} ${pidNamespace()} ${readOr("/proc/sys/kernel/random/boot_id", "?")}`

/**
 * Gives back the reservations of dead instances (everyone else when `everyoneElse`) and forgets
 * those instances. Returns what was released.
 */
export const releaseDeadInstances = (options: InstanceOptions & { readonly everyoneElse: boolean }) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient
    const here = hostKey()
    const others = yield* sql<{ id: string; host_key: string; pid: number; silent: boolean }>`
      SELECT id, host_key, pid, last_seen < now() - ${options.staleAfterMs} * interval '1 millisecond' AS silent
      FROM service_instances WHERE id <> ${options.instanceId}`
    const dead = others
      .filter((o) => options.everyoneElse || o.silent || (o.host_key === here && (o.pid === process.pid ? !registeredHere.has(o.id) : !processAlive(o.pid))))
      .map((o) => o.id)
    // Also reservations of instances without a row (their row was swept while they kept
    // working, and they died before their heartbeat put it back), once older than the bound.
    const orphan = options.everyoneElse
      ? sql`instance_id <> ${options.instanceId}`
      : sql`instance_id NOT IN (SELECT id FROM service_instances)
            AND created_at < now() - ${options.staleAfterMs} * interval '1 millisecond'`
    const where = dead.length === 0 ? orphan : sql`(instance_id IN ${sql.in(dead)} OR (${orphan}))`
    const released = yield* releaseWhere(sql, where)
    if (dead.length > 0) yield* sql`DELETE FROM service_instances WHERE id IN ${sql.in(dead)}`
    if (released.reservations > 0) {
      yield* Effect.logInfo("gave back credits reserved by dead instances", {
        instances: dead.length,
        reservations: released.reservations,
        credits: released.credits
      })
    }
    return { instances: dead, ...released }
  })

const register = (instanceId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient
    yield* sql`
      INSERT INTO service_instances (id, host_key, pid) VALUES (${instanceId}, ${hostKey()}, ${process.pid})
      ON CONFLICT (id) DO UPDATE SET last_seen = now()`
  })

/**
 * For the server only (never the admin CLI, which may run beside a server on the same
 * embedded database): registers this instance, gives back dead instances' reservations before
 * any request is served, then on PostgreSQL keeps a heartbeat and sweeps every `heartbeatMs`.
 * Closing unregisters the instance and gives back anything it still holds.
 */
export const instanceRegistryLayer = (options: InstanceOptions): Layer.Layer<never, unknown, SqlClient | Database> =>
  Layer.effectDiscard(Effect.gen(function*() {
    const sql = yield* SqlClient
    const database = yield* Database
    const embedded = database.mode === "embedded"
    yield* register(options.instanceId)
    registeredHere.add(options.instanceId)
    yield* releaseDeadInstances({ ...options, everyoneElse: embedded })
    yield* Effect.addFinalizer(() =>
      Effect.gen(function*() {
        registeredHere.delete(options.instanceId)
        yield* releaseWhere(sql, sql`instance_id = ${options.instanceId}`)
        yield* sql`DELETE FROM service_instances WHERE id = ${options.instanceId}`
      }).pipe(Effect.catch((error) => Effect.logWarning("unregistering this instance failed", error)))
    )
    if (embedded) return
    const round = Effect.gen(function*() {
      yield* register(options.instanceId)
      yield* releaseDeadInstances({ ...options, everyoneElse: false })
    }).pipe(Effect.catch((error) => Effect.logWarning("instance heartbeat failed; retrying", error)))
    yield* Effect.forkScoped(Effect.repeat(round, Schedule.spaced(options.heartbeatMs)))
  }))
