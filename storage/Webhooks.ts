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
import { Context, type Effect } from "effect"
import type { SqlClient } from "effect/sql/SqlClient"
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
