/**
 * The webhook-dispatcher actor of one instance: sends the outbox rows (storage/Webhooks.ts)
 * that are due, signed (actors/WebhookSignature.ts), and records each attempt.
 *
 * It wakes on `kick` (a job here just committed a delivery, or a poll saw a terminal job whose
 * delivery is pending), when the earliest retry is due, and every `sweepMs` at the latest, so a
 * row left by an instance that crashed between its commit and its send is picked up by any
 * instance (SPEC 6). Delivery is at-least-once: a receiver may see an event twice (a crash after
 * its 2xx but before we recorded it) and de-duplicates on `event_id`.
 *
 * Failures (network, timeout, any answer but 2xx) are retried after `backoffMs × 4^(n−1)`,
 * ±25 % jitter so receivers coming back up are not hit by every sender at once, never more than
 * 48 h; after `maxAttempts` the row is `dead`. A revoked subscription's pending rows end dead at
 * their next attempt without a send.
 */
import { Context, Effect, Layer } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import { type ClaimedDelivery, WebhookOutbox } from "../storage/Webhooks.ts"
import { signatureHeader } from "./WebhookSignature.ts"

export interface WebhookDispatcherOptions {
  readonly maxAttempts: number
  /** Wait after the first failed attempt, ms; each later wait is four times longer. */
  readonly backoffMs: number
  /** The longest wait between two looks at the outbox, ms. */
  readonly sweepMs: number
  /** How long a claimed row is held by this instance before another may send it, ms (above the send timeout). */
  readonly leaseMs: number
  /** The guarded POST (storage/OutboundPost.ts, given by the composition root); the receiver's status. */
  readonly post: (url: string, body: string, headers: Record<string, string>) => Effect.Effect<number, { readonly message: string }>
  /** Sends at once, ms apart from each other's (default 8). */
  readonly concurrency?: number
}

export interface WebhookDispatcherShape {
  /** A delivery may be due: look now. */
  readonly kick: Effect.Effect<void>
  /** Sends every delivery due now (also what the loop does); how many were attempted. */
  readonly deliverDue: Effect.Effect<number, SqlError>
}

export class WebhookDispatcher extends Context.Service<WebhookDispatcher, WebhookDispatcherShape>()("speech/actors/WebhookDispatcher") {}

const MAX_WAIT_MS = 48 * 3600 * 1000

/** The wait after the `failedAttempts`-th failed attempt (1-based), with jitter. */
export const retryDelayMs = (backoffMs: number, failedAttempts: number, random: number = Math.random()): number => {
  const base = backoffMs * 4 ** Math.min(30, failedAttempts - 1)
  return Math.min(MAX_WAIT_MS, Math.round(base * (0.75 + 0.5 * random)))
}

const BATCH = 32

export const webhookDispatcherLayer = (options: WebhookDispatcherOptions) =>
  Layer.effect(
    WebhookDispatcher,
    Effect.gen(function*() {
      const outbox = yield* WebhookOutbox
      const concurrency = options.concurrency ?? 8

      const attempt = (d: ClaimedDelivery) =>
        Effect.gen(function*() {
          const n = d.attempts + 1
          const log = { eventId: d.eventId, webhookId: d.webhookId, jobId: d.jobId, attempt: n }
          if (d.revoked) {
            yield* outbox.recordFailure(d.eventId, { status: null, error: "the subscription was revoked" }, undefined)
            return yield* Effect.logInfo("webhook delivery dropped: subscription revoked", log)
          }
          const headers = { "vendor-signature": signatureHeader(d.signingSecret, d.body, Date.now() / 1000) }
          const sent = yield* options.post(d.url, d.body, headers).pipe(
            Effect.map((status) => ({ status, error: status >= 200 && status < 300 ? undefined : `the receiver answered ${status}` })),
            Effect.catch((e) => Effect.succeed({ status: null, error: e.message }))
          )
          if (sent.error === undefined) {
            yield* outbox.markDelivered(d.eventId, sent.status!)
            return yield* Effect.logInfo("webhook delivered", { ...log, status: sent.status })
          }
          const retryIn = n >= options.maxAttempts ? undefined : retryDelayMs(options.backoffMs, n)
          yield* outbox.recordFailure(d.eventId, { status: sent.status, error: sent.error }, retryIn)
          yield* retryIn === undefined
            ? Effect.logWarning("webhook delivery dead: no attempts left", { ...log, error: sent.error })
            : Effect.logInfo("webhook delivery failed; will retry", { ...log, error: sent.error, retryInMs: retryIn })
        })

      const deliverDue = Effect.gen(function*() {
        let total = 0
        for (;;) {
          const due = yield* outbox.claimDue(BATCH, options.leaseMs)
          yield* Effect.forEach(due, attempt, { concurrency, discard: true })
          total += due.length
          if (due.length < BATCH) return total
        }
      })

      let wake: (() => void) | undefined
      /** A kick while the loop is busy is kept, so it looks once more before it sleeps. */
      let kicked = false
      const kick = Effect.sync(() => {
        kicked = true
        const w = wake
        wake = undefined
        w?.()
      })

      const loop = Effect.gen(function*() {
        for (;;) {
          kicked = false
          yield* deliverDue
          const next = yield* outbox.msUntilNextDue
          if (kicked) continue
          const waitMs = Math.max(10, Math.min(options.sweepMs, next ?? options.sweepMs))
          yield* Effect.callback<void>((resume) => {
            wake = () => resume(Effect.void)
          }).pipe(Effect.timeoutOption(waitMs))
        }
      }).pipe(
        // The database went away: log, wait a sweep, start again. The loop never ends on its own.
        Effect.catchCause((cause) => Effect.andThen(Effect.logWarning("webhook dispatcher failed; retrying", { cause }), Effect.sleep(options.sweepMs))),
        Effect.forever
      )
      yield* Effect.forkScoped(loop)
      return WebhookDispatcher.of({ kick, deliverDue })
    })
  )
