/**
 * What a caller may learn about their own account over the API (the ElevenLabs SDKs'
 * `user.get()` and `user.subscription.get()`): balance, clones, creation time. Read-only;
 * granting credits stays with the admin command line.
 */
import { Effect, Option } from "effect"
import { Users } from "../storage/Users.ts"
import { VoiceCloning } from "./VoiceCloning.ts"

export interface AccountSummary {
  readonly userId: string
  readonly name: string
  /** Characters that can still be synthesized (1 credit = 1 character). */
  readonly credits: number
  readonly createdAt: Date
  /** Active voice clones. */
  readonly clones: number
}

export const accountSummary = Effect.fn("AccountSummary")(function*(userId: string) {
  const user = yield* (yield* Users).getUser(userId)
  const cloning = yield* Effect.serviceOption(VoiceCloning)
  const clones = Option.isSome(cloning) ? (yield* cloning.value.listClones(userId)).length : 0
  return { ...user, clones } satisfies AccountSummary
})
