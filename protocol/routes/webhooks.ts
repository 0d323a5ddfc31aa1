/**
 * Webhook subscriptions (SPEC 2.8, endpoints 16-18): a user registers an https address and gets
 * its signing secret once; deliveries (actors/WebhookDispatcher.ts) are signed with it. The
 * address must pass the outbound address guard now, and passes it again at every delivery
 * (a name can be pointed inward after it was registered).
 */
import { Effect } from "effect"
import type { OutboundGuard } from "../../storage/OutboundAddress.ts"
import { postUrlProblem } from "../../storage/OutboundPost.ts"
import { type WebhookSubscription, Webhooks } from "../../storage/Webhooks.ts"
import { ApiError, notFound } from "../ApiError.ts"
import { decodeJsonBody } from "../decode.ts"
import { Reply, type Route } from "../Http.ts"
import { ErrorBody } from "../schemas/ErrorBody.ts"
import { CreatedWebhook, CreateWebhookRequest, RevokedWebhook, WebhookList } from "../schemas/Webhooks.ts"

export interface WebhookRouteOptions {
  readonly apiBase: string
  readonly maxJsonBodyBytes: number
  /** The same guard every outbound connection passes. */
  readonly guard: OutboundGuard
}

const errorDoc = (description: string) => ({ description, schema: ErrorBody })

const invalidUrl = (message: string) => new ApiError({ status: 400, code: "invalid_webhook_url", message })

const wire = (w: WebhookSubscription) => ({
  webhook_id: w.webhookId,
  url: w.url,
  description: w.description,
  created_at: w.createdAt.toISOString()
})

export const webhookRoutes = (options: WebhookRouteOptions): ReadonlyArray<Route<Webhooks>> => [
  {
    method: "POST",
    path: `${options.apiBase}/webhooks`,
    auth: "key",
    operationId: "createWebhook",
    summary: "Register an https address for job results; the answer carries its signing secret, shown only here",
    tags: ["webhooks"],
    requestBody: { contentType: "application/json", schema: CreateWebhookRequest, required: true },
    responses: {
      201: { description: "registered", schema: CreatedWebhook },
      400: errorDoc("malformed body, or a URL that is not https or does not resolve to public addresses"),
      401: errorDoc("no valid credential")
    },
    handler: (ctx) =>
      Effect.gen(function*() {
        const body = yield* decodeJsonBody(CreateWebhookRequest, ctx, options.maxJsonBodyBytes)
        const url = body.url.trim()
        const problem = postUrlProblem(url)
        if (problem !== undefined) return yield* invalidUrl(`webhook url: ${problem}`)
        // One answer for refused and unresolvable names: which one it was is for the log.
        yield* options.guard.check(new URL(url).hostname).pipe(
          Effect.tapError((e) => Effect.logInfo("webhook URL refused", { reason: e.reason, detail: e.message })),
          Effect.mapError(() => invalidUrl("webhook url must resolve to public addresses only"))
        )
        const created = yield* (yield* Webhooks).create(ctx.principal!.userId, url, body.description ?? null)
        return Reply.json(201, { ...wire(created), signing_secret: created.signingSecret })
      })
  },
  {
    method: "GET",
    path: `${options.apiBase}/webhooks`,
    auth: "key",
    operationId: "listWebhooks",
    summary: "The caller's active webhook subscriptions, newest first (without secrets)",
    tags: ["webhooks"],
    responses: { 200: { description: "subscriptions", schema: WebhookList }, 401: errorDoc("no valid credential") },
    handler: (ctx) =>
      Effect.gen(function*() {
        const list = yield* (yield* Webhooks).list(ctx.principal!.userId)
        return Reply.json(200, { webhooks: list.map(wire) })
      })
  },
  {
    method: "DELETE",
    path: `${options.apiBase}/webhooks/{webhook_id}`,
    auth: "key",
    operationId: "deleteWebhook",
    summary: "Revoke a subscription: nothing more is delivered to it, pending deliveries included",
    tags: ["webhooks"],
    responses: { 200: { description: "revoked", schema: RevokedWebhook }, 401: errorDoc("no valid credential"), 404: errorDoc("not the caller's active subscription") },
    handler: (ctx) =>
      Effect.gen(function*() {
        const id = ctx.params.webhook_id!
        const revoked = yield* (yield* Webhooks).revoke(ctx.principal!.userId, id)
        if (!revoked) return yield* notFound(`no webhook ${id}`, "webhook_not_found")
        return Reply.json(200, { webhook_id: id, revoked: true })
      })
  }
]
