/**
 * Webhook subscriptions (SPEC 2.8, endpoints 16-18) and the outbox of their deliveries.
 *
 * A subscription belongs to one user; its `signing_secret` is generated here, returned by
 * `create` only, and used by the dispatcher (actors/WebhookDispatcher.ts) to sign each delivery.
 * Revoking sets `revoked_at`: a revoked subscription is neither listed nor delivered to.
 *
 * The outbox (`webhook_deliveries`): `insertDelivery` is called by the job that reached a
 * terminal state, inside the transaction that writes that state, so a delivery exists exactly
 * when the state does. The dispatcher claims due rows, sends them, and records the outcome.
 */
import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import { randomBytes } from "node:crypto"

export interface WebhookSubscription {
  readonly webhookId: string
  readonly userId: string
  readonly url: string
  readonly description: string | null
  readonly createdAt: Date
}

export interface CreatedWebhook extends WebhookSubscription {
  /** Shown once, in the create answer. */
  readonly signingSecret: string
}

export interface WebhooksShape {
  readonly create: (userId: string, url: string, description: string | null) => Effect.Effect<CreatedWebhook, SqlError>
  /** The user's active subscriptions, newest first. */
  readonly list: (userId: string) => Effect.Effect<ReadonlyArray<WebhookSubscription>, SqlError>
  /** The user's active subscription, or undefined (unknown, revoked, or another user's). */
  readonly find: (userId: string, webhookId: string) => Effect.Effect<WebhookSubscription | undefined, SqlError>
  /** True when an active subscription of the user was revoked now. */
  readonly revoke: (userId: string, webhookId: string) => Effect.Effect<boolean, SqlError>
}

export class Webhooks extends Context.Service<Webhooks, WebhooksShape>()("speech/storage/Webhooks") {}

export type DeliveryState = "pending" | "delivered" | "dead"

export interface DeliverySummary {
  readonly eventId: string
  readonly state: DeliveryState
  readonly attempts: number
  readonly lastStatus: number | null
  readonly lastError: string | null
  readonly deliveredAt: Date | null
  readonly nextAttemptAt: Date
}

export const newEventId = (): string => `evt_${randomBytes(12).toString("hex")}`

/** Writes one pending delivery; run it inside the transaction of the state it reports. */
export const insertDelivery = (
  sql: SqlClient,
  delivery: { readonly eventId: string; readonly webhookId: string; readonly jobId: string; readonly body: string }
) =>
  sql`INSERT INTO webhook_deliveries (event_id, webhook_id, job_id, body)
      VALUES (${delivery.eventId}, ${delivery.webhookId}, ${delivery.jobId}, ${delivery.body})`

/** The newest delivery of a job's result, if it has one. */
export const deliveryOfJob = (sql: SqlClient, jobId: string) =>
  sql<{
    event_id: string
    state: DeliveryState
    attempts: number
    last_status: number | null
    last_error: string | null
    delivered_at: Date | null
    next_attempt_at: Date
  }>`SELECT event_id, state, attempts, last_status, last_error, delivered_at, next_attempt_at
     FROM webhook_deliveries WHERE job_id = ${jobId} ORDER BY created_at DESC LIMIT 1`

/** A due delivery, claimed for one attempt: what the dispatcher needs to send it. */
export interface ClaimedDelivery {
  readonly eventId: string
  readonly webhookId: string
  readonly jobId: string | null
  readonly body: string
  /** Attempts made before this one. */
  readonly attempts: number
  readonly url: string
  readonly signingSecret: string
  /** The subscription was revoked after the event was queued: the delivery ends dead. */
  readonly revoked: boolean
}

export interface OutboxShape {
  /**
   * Up to `limit` pending deliveries that are due, oldest first. Each is leased for `leaseMs`
   * (its `next_attempt_at` moves forward) under `FOR UPDATE SKIP LOCKED`, so two instances
   * sweeping at once never send the same row at the same time; an instance that dies mid-send
   * leaves the row to be sent again after the lease (at-least-once).
   */
  readonly claimDue: (limit: number, leaseMs: number) => Effect.Effect<ReadonlyArray<ClaimedDelivery>, SqlError>
  readonly markDelivered: (eventId: string, status: number) => Effect.Effect<void, SqlError>
  /**
   * One failed attempt. `retryInMs` undefined ends the delivery `dead`; otherwise it stays
   * pending and is due again after that long.
   */
  readonly recordFailure: (
    eventId: string,
    failure: { readonly status: number | null; readonly error: string },
    retryInMs: number | undefined
  ) => Effect.Effect<void, SqlError>
  /** Milliseconds until the earliest pending delivery is due (0 when one is due now), or undefined. */
  readonly msUntilNextDue: Effect.Effect<number | undefined, SqlError>
}

export class WebhookOutbox extends Context.Service<WebhookOutbox, OutboxShape>()("speech/storage/WebhookOutbox") {}

const newWebhookId = (): string => `wh_${randomBytes(12).toString("hex")}`
/** 32 random bytes, in the `whsec_` form receivers of Stripe-style webhooks recognise. */
const newSigningSecret = (): string => `whsec_${randomBytes(32).toString("base64url")}`

interface WebhookRow {
  id: string
  user_id: string
  url: string
  description: string | null
  created_at: Date
}

const subscription = (row: WebhookRow): WebhookSubscription => ({
  webhookId: row.id,
  userId: row.user_id,
  url: row.url,
  description: row.description,
  createdAt: new Date(row.created_at)
})

export const webhooksLayer: Layer.Layer<Webhooks | WebhookOutbox, never, SqlClient> = Layer.effectContext(
  Effect.gen(function*() {
    const sql = yield* SqlClient
    const webhooks = Webhooks.of({
      create: (userId, url, description) =>
        Effect.gen(function*() {
          const secret = newSigningSecret()
          const rows = yield* sql<WebhookRow>`INSERT INTO webhooks (id, user_id, url, description, signing_secret)
            VALUES (${newWebhookId()}, ${userId}, ${url}, ${description}, ${secret})
            RETURNING id, user_id, url, description, created_at`
          return { ...subscription(rows[0]!), signingSecret: secret }
        }),
      list: (userId) =>
        sql<WebhookRow>`SELECT id, user_id, url, description, created_at FROM webhooks
          WHERE user_id = ${userId} AND revoked_at IS NULL ORDER BY created_at DESC, id DESC`.pipe(
          Effect.map((rows) => rows.map(subscription))
        ),
      find: (userId, webhookId) =>
        sql<WebhookRow>`SELECT id, user_id, url, description, created_at FROM webhooks
          WHERE id = ${webhookId} AND user_id = ${userId} AND revoked_at IS NULL`.pipe(
          Effect.map((rows) => (rows[0] === undefined ? undefined : subscription(rows[0])))
        ),
      revoke: (userId, webhookId) =>
        sql`UPDATE webhooks SET revoked_at = now()
          WHERE id = ${webhookId} AND user_id = ${userId} AND revoked_at IS NULL RETURNING id`.pipe(
          Effect.map((rows) => rows.length > 0)
        )
    })
    const outbox = WebhookOutbox.of({
      claimDue: (limit, leaseMs) =>
        sql<{
          event_id: string
          webhook_id: string
          job_id: string | null
          body: string
          attempts: number
          url: string
          signing_secret: string
          revoked_at: Date | null
        }>`WITH due AS (
             SELECT event_id FROM webhook_deliveries
             WHERE state = 'pending' AND next_attempt_at <= now()
             ORDER BY next_attempt_at LIMIT ${limit}
             FOR UPDATE SKIP LOCKED
           )
           UPDATE webhook_deliveries d
           SET next_attempt_at = now() + ${leaseMs} * interval '1 millisecond'
           FROM due, webhooks w
           WHERE d.event_id = due.event_id AND w.id = d.webhook_id
           RETURNING d.event_id, d.webhook_id, d.job_id, d.body, d.attempts, w.url, w.signing_secret, w.revoked_at`.pipe(
          Effect.map((rows) =>
            rows.map((r) => ({
              eventId: r.event_id,
              webhookId: r.webhook_id,
              jobId: r.job_id,
              body: r.body,
              attempts: r.attempts,
              url: r.url,
              signingSecret: r.signing_secret,
              revoked: r.revoked_at !== null
            }))
          )
        ),
      markDelivered: (eventId, status) =>
        sql`UPDATE webhook_deliveries
          SET state = 'delivered', attempts = attempts + 1, last_status = ${status}, last_error = NULL, delivered_at = now()
          WHERE event_id = ${eventId} AND state = 'pending'`.pipe(Effect.asVoid),
      recordFailure: (eventId, failure, retryInMs) =>
        (retryInMs === undefined
          ? sql`UPDATE webhook_deliveries
              SET state = 'dead', attempts = attempts + 1, last_status = ${failure.status}, last_error = ${failure.error.slice(0, 500)}
              WHERE event_id = ${eventId} AND state = 'pending'`
          : sql`UPDATE webhook_deliveries
              SET attempts = attempts + 1, last_status = ${failure.status}, last_error = ${failure.error.slice(0, 500)},
                  next_attempt_at = now() + ${Math.round(retryInMs)} * interval '1 millisecond'
              WHERE event_id = ${eventId} AND state = 'pending'`).pipe(Effect.asVoid),
      // Clamped here, not with GREATEST in SQL: GREATEST skips NULLs, so an empty outbox read as
      // "due now" and every instance's dispatcher polled the database every 10 ms while idle.
      msUntilNextDue: sql<{ ms: number | string | null }>`SELECT
          EXTRACT(EPOCH FROM (min(next_attempt_at) - now())) * 1000 AS ms
          FROM webhook_deliveries WHERE state = 'pending'`.pipe(
        Effect.map((rows) => (rows[0]?.ms === null || rows[0]?.ms === undefined ? undefined : Math.max(0, Math.ceil(Number(rows[0].ms)))))
      )
    })
    return Context.make(Webhooks, webhooks).pipe(Context.add(WebhookOutbox, outbox))
  })
)
