/** Wire schemas of webhook subscriptions (SPEC 2.8, endpoints 16-18). */
import { Schema } from "effect"

export const CreateWebhookRequest = Schema.Struct({
  url: Schema.String.check(Schema.isMaxLength(2048)).annotate({ description: "https address that resolves to public addresses" }),
  description: Schema.optional(Schema.NullOr(Schema.String.check(Schema.isMaxLength(500))))
}).annotate({ identifier: "CreateWebhookRequest" })

export const Webhook = Schema.Struct({
  webhook_id: Schema.String,
  url: Schema.String,
  description: Schema.NullOr(Schema.String),
  created_at: Schema.String
}).annotate({ identifier: "Webhook" })

export const CreatedWebhook = Schema.Struct({
  ...Webhook.fields,
  signing_secret: Schema.String.annotate({ description: "shown here only, never again: keep it to verify Vendor-Signature" })
}).annotate({ identifier: "CreatedWebhook" })

export const WebhookList = Schema.Struct({ webhooks: Schema.Array(Webhook) }).annotate({ identifier: "WebhookList" })

export const RevokedWebhook = Schema.Struct({
  webhook_id: Schema.String,
  revoked: Schema.Literal(true)
}).annotate({ identifier: "RevokedWebhook" })
