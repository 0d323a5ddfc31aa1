/**
 * `GET /v1/user` and `GET /v1/user/subscription`: the caller's own account, shaped for the
 * ElevenLabs SDKs (beyond the SPEC; many clients check a key or show the remaining quota this
 * way). The balance is `subscription.character_limit` (see protocol/schemas/User.ts).
 */
import { Effect } from "effect"
import { type AccountSummary, accountSummary } from "../../actors/AccountSummary.ts"
import type { VoiceCloning } from "../../actors/VoiceCloning.ts"
import type { Users } from "../../storage/Users.ts"
import { Reply, type Route } from "../Http.ts"
import { ErrorBody } from "../schemas/ErrorBody.ts"
import { Subscription, SubscriptionSummary, UserInfo } from "../schemas/User.ts"

/** No limit on clones here; the SDK's field wants a number. */
const VOICE_LIMIT = 10_000

const subscriptionJson = (a: AccountSummary): typeof SubscriptionSummary.Type => ({
  tier: "self-hosted",
  character_count: 0,
  character_limit: a.credits,
  max_credit_limit_extension: 0,
  can_extend_character_limit: false,
  allowed_to_extend_character_limit: false,
  voice_slots_used: a.clones,
  professional_voice_slots_used: 0,
  professional_voice_slots_used_in_workspace: 0,
  voice_limit: VOICE_LIMIT,
  voice_add_edit_counter: 0,
  professional_voice_limit: 0,
  can_extend_voice_limit: false,
  can_use_instant_voice_cloning: true,
  can_use_professional_voice_cloning: false,
  current_overage: { amount: "0", currency: "usd" },
  status: "active"
})

export const userRoutes = (apiBase: string): ReadonlyArray<Route<Users | VoiceCloning>> => [
  {
    method: "GET",
    path: `${apiBase}/user`,
    auth: "key",
    operationId: "getUser",
    summary: "The caller's account; subscription.character_limit is the remaining credit balance",
    tags: ["user"],
    responses: { 200: { description: "the account", schema: UserInfo }, 404: { description: "the key's user is gone", schema: ErrorBody } },
    handler: (ctx) =>
      Effect.map(accountSummary(ctx.principal!.userId), (a) =>
        Reply.json(200, {
          user_id: a.userId,
          workspace_id: a.userId,
          first_name: a.name,
          subscription: subscriptionJson(a),
          is_new_user: false,
          can_use_delayed_payment_methods: false,
          is_onboarding_completed: true,
          is_onboarding_checklist_completed: true,
          is_api_key_hashed: true,
          created_at: Math.floor(a.createdAt.getTime() / 1000),
          seat_type: "workspace_admin"
        } satisfies typeof UserInfo.Type))
  },
  {
    method: "GET",
    path: `${apiBase}/user/subscription`,
    auth: "key",
    operationId: "getUserSubscription",
    summary: "The caller's quota: character_limit is the remaining credit balance, character_count 0",
    tags: ["user"],
    responses: { 200: { description: "the quota", schema: Subscription }, 404: { description: "the key's user is gone", schema: ErrorBody } },
    handler: (ctx) =>
      Effect.map(accountSummary(ctx.principal!.userId), (a) =>
        Reply.json(200, { ...subscriptionJson(a), open_invoices: [], has_open_invoices: false } satisfies typeof Subscription.Type))
  }
]
