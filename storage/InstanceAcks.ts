/**
 * A change every live instance of a deployment must have heard before it counts as done (an API
 * key deletion: storage/ApiKeys.ts). The caller LISTENs on an acknowledgement channel, makes the
 * change and announces it with a token (the announcement is the caller's own NOTIFY); each
 * instance acts on it and answers "<token> <instance id>" on that channel; the caller returns
 * once every instance with a heartbeat in `service_instances` (storage/InstanceRegistry.ts)
 * within `liveWithinMs` has answered, or after `timeoutMs`, naming the silent ones in the log.
 * PostgreSQL only: embedded PGlite has one process and no cross-connection NOTIFY.
 */
import type * as PgClient from "@effect/sql-pg/PgClient"
import { Duration, Effect, Option, Queue } from "effect"
import { randomBytes } from "node:crypto"

export interface AckOptions {
  /** Channel the instances answer on. */
  readonly ackChannel: string
  /** The caller's own instance id, not waited for (it made the change itself). */
  readonly self: string
  /** Instances whose heartbeat is older are dead and not waited for, ms. */
  readonly liveWithinMs: number
  /** Longest wait for the answers, ms. */
  readonly timeoutMs: number
  /** What the change was, for the log line about silent instances. */
  readonly what: string
}

/** The answer an instance sends for `token`. */
export const acknowledgement = (token: string, instanceId: string): string => `${token} ${instanceId}`

/**
 * Runs `change(token)` (which must announce the token) with the answer channel already heard,
 * then waits for the live instances' answers. Returns the change's result.
 */
export const changeAcknowledgedByAll = <A, E, R>(
  client: PgClient.PgClient,
  options: AckOptions,
  change: (token: string) => Effect.Effect<A, E, R>
) =>
  Effect.scoped(Effect.gen(function*() {
    // Listening before the change: no answer can come before we hear.
    const answers = yield* client.listen(options.ackChannel)
    const token = randomBytes(12).toString("hex")
    const result = yield* change(token)
    const live = yield* client<{ id: string }>`
      SELECT id FROM service_instances
      WHERE id <> ${options.self} AND last_seen > now() - ${options.liveWithinMs} * interval '1 millisecond'`
    const waiting = new Set(live.map((r) => r.id))
    const heard = Effect.gen(function*() {
      while (waiting.size > 0) {
        const [answer, from] = (yield* Queue.take(answers)).payload.split(" ")
        if (answer === token && from !== undefined) waiting.delete(from)
      }
    })
    if (Option.isNone(yield* Effect.timeoutOption(heard, Duration.millis(options.timeoutMs)))) {
      yield* Effect.logWarning(`${options.what}; instances ${[...waiting].join(", ")} did not acknowledge within ${options.timeoutMs} ms`)
    }
    return result
  }))
