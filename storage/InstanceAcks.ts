/**
 * A change every live instance of a deployment must have heard before it counts as done (an API
 * key deletion: storage/ApiKeys.ts). The caller makes the change and announces it with a token
 * (the announcement is the caller's own NOTIFY); each instance acts on it and answers
 * "ack <token> <instance id>" on the same channel; the caller returns once every instance with a
 * heartbeat in `service_instances` (storage/InstanceRegistry.ts) within `liveWithinMs` has
 * answered, or after `timeoutMs`, naming the silent ones in the log.
 *
 * The answers come back on the announcement channel, heard by the LISTEN the process keeps
 * anyway: a LISTEN holds a pool connection for as long as it lasts, and one per change in flight
 * let nine concurrent deletes take every connection of a pool of ten, after which nothing in
 * the process could query.
 * PostgreSQL only: embedded PGlite has one process and no cross-connection NOTIFY.
 */
import type * as PgClient from "@effect/sql-pg/PgClient"
import { Duration, Effect, Latch, Option } from "effect"
import { randomBytes } from "node:crypto"

export interface AckOptions {
  /** The caller's own instance id, not waited for (it made the change itself). */
  readonly self: string
  /** Instances whose heartbeat is older are dead and not waited for, ms. */
  readonly liveWithinMs: number
  /** Longest wait for the answers (and for the listener to be up), ms. */
  readonly timeoutMs: number
  /** What the change was, for the log line about silent instances. */
  readonly what: string
}

interface Pending {
  /** Instances that answered, before or after `waiting` was known. */
  readonly heard: Set<string>
  /** Live instances not heard from yet; undefined until the live set has been read. */
  waiting: Set<string> | undefined
  readonly done: Latch.Latch
}

/**
 * Answers expected by the changes in flight, fed by the caller's own LISTEN (`hear`): the answers
 * share the channel of the announcements, so a process needs no LISTEN (no pool connection held)
 * of its own for them.
 */
export interface AckBook {
  readonly client: PgClient.PgClient
  /** Open while the LISTEN that feeds `hear` is confirmed; kept by that LISTEN's owner. */
  readonly ready: Latch.Latch
  readonly pending: Map<string, Pending>
}

export const makeAckBook = (client: PgClient.PgClient): AckBook => ({ client, ready: Latch.makeUnsafe(false), pending: new Map() })

/** An answer as sent on the announcement channel; `hear` recognises it by the prefix. */
export const acknowledgement = (token: string, instanceId: string): string => `ack ${token} ${instanceId}`

/** Takes a notification payload; true when it was an answer (and so is not an announcement). */
export const hear = (book: AckBook, payload: string): boolean => {
  if (!payload.startsWith("ack ")) return false
  const [, token, from] = payload.split(" ")
  const p = token === undefined || from === undefined ? undefined : book.pending.get(token)
  if (p === undefined) return true
  p.heard.add(from!)
  p.waiting?.delete(from!)
  if (p.waiting?.size === 0) p.done.openUnsafe()
  return true
}

/**
 * Runs `change(token)` (which must announce the token) with its answers already expected, then
 * waits for the live instances' answers. Returns the change's result.
 */
export const changeAcknowledgedByAll = <A, E, R>(
  listener: AckBook,
  options: AckOptions,
  change: (token: string) => Effect.Effect<A, E, R>
) =>
  Effect.gen(function*() {
    // A fresh process (the admin CLI) deletes before its LISTEN is up: answers would go unheard.
    yield* Effect.timeoutOption(listener.ready.await, Duration.millis(options.timeoutMs))
    const token = randomBytes(12).toString("hex")
    const p: Pending = { heard: new Set(), waiting: undefined, done: Latch.makeUnsafe(false) }
    return yield* Effect.acquireUseRelease(
      Effect.sync(() => listener.pending.set(token, p)),
      () =>
        Effect.gen(function*() {
          const result = yield* change(token)
          const live = yield* listener.client<{ id: string }>`
            SELECT id FROM service_instances
            WHERE id <> ${options.self} AND last_seen > now() - ${options.liveWithinMs} * interval '1 millisecond'`
          p.waiting = new Set(live.map((r) => r.id).filter((id) => !p.heard.has(id)))
          if (p.waiting.size === 0) return result
          if (Option.isNone(yield* Effect.timeoutOption(p.done.await, Duration.millis(options.timeoutMs)))) {
            yield* Effect.logWarning(`${options.what}; instances ${[...p.waiting].join(", ")} did not acknowledge within ${options.timeoutMs} ms`)
          }
          return result
        }),
      () => Effect.sync(() => void listener.pending.delete(token))
    )
  })
