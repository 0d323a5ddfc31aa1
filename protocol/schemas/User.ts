/**
 * The account as the ElevenLabs SDKs parse it (`User`, `SubscriptionResponse`): every field
 * their parsers require is present. A self-hosted account has a balance and no billing period,
 * so `character_limit − character_count` is the remaining balance with `character_count` 0.
 */
import { Schema } from "effect"

export const SubscriptionSummary = Schema.Struct({
  tier: Schema.String,
  character_count: Schema.Finite,
  character_limit: Schema.Finite,
  max_credit_limit_extension: Schema.Finite,
  can_extend_character_limit: Schema.Boolean,
  allowed_to_extend_character_limit: Schema.Boolean,
  voice_slots_used: Schema.Finite,
  professional_voice_slots_used: Schema.Finite,
  professional_voice_slots_used_in_workspace: Schema.Finite,
  voice_limit: Schema.Finite,
  voice_add_edit_counter: Schema.Finite,
  professional_voice_limit: Schema.Finite,
  can_extend_voice_limit: Schema.Boolean,
  can_use_instant_voice_cloning: Schema.Boolean,
  can_use_professional_voice_cloning: Schema.Boolean,
  current_overage: Schema.Struct({ amount: Schema.String, currency: Schema.String }),
  status: Schema.Literal("active")
}).annotate({ identifier: "SubscriptionSummary" })

/** `GET /v1/user/subscription` adds the (always empty) invoice fields. */
export const Subscription = Schema.Struct({
  ...SubscriptionSummary.fields,
  open_invoices: Schema.Array(Schema.Unknown),
  has_open_invoices: Schema.Boolean
}).annotate({ identifier: "Subscription" })

export const UserInfo = Schema.Struct({
  user_id: Schema.String,
  workspace_id: Schema.String,
  first_name: Schema.String,
  subscription: SubscriptionSummary,
  is_new_user: Schema.Boolean,
  can_use_delayed_payment_methods: Schema.Boolean,
  is_onboarding_completed: Schema.Boolean,
  is_onboarding_checklist_completed: Schema.Boolean,
  is_api_key_hashed: Schema.Boolean,
  created_at: Schema.Finite,
  seat_type: Schema.Literal("workspace_admin")
}).annotate({ identifier: "User" })
