/**
 * The one failure of users (storage/Users.ts), API keys (storage/ApiKeys.ts) and credits
 * (storage/Credits.ts). protocol/ApiError.ts maps each `AccountsError.<reason>` to its HTTP
 * answer (401, 402, 404), so the tag and the reasons are part of the API: do not rename them.
 */
import { Data, Effect } from "effect"

export class AccountsError extends Data.TaggedError("AccountsError")<{
  readonly reason: "InvalidKey" | "UserNotFound" | "KeyNotFound" | "InsufficientCredits" | "EmailTaken"
  readonly message: string
}> {}

export const userNotFound = (userId: string) => new AccountsError({ reason: "UserNotFound", message: `no user ${userId}` })

/**
 * Amounts come from our own code and the CLI, which validates first: anything else is a bug.
 * `operation` names the method, e.g. "Credits.debit".
 */
export const requireAmount = (operation: string, amount: number): Effect.Effect<void> =>
  Number.isSafeInteger(amount) && amount >= 0
    ? Effect.void
    : Effect.die(new RangeError(`${operation}: amount must be a non-negative safe integer, got ${amount}`))
