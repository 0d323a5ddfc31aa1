/**
 * Credits of a realtime speech-to-text session: one per started second of RECEIVED audio (the
 * audio the session accepted, decoded or not), ledger purpose `stt_realtime`.
 *
 * Paid ahead through a reservation (README "Credits and the ledger"): before a chunk is
 * accepted, the reservation must hold the credits of all audio accepted with it; it grows a
 * minute ahead (one statement a minute, not one a second), or to exactly what is needed when
 * the balance is shorter than that. When it cannot grow, the chunk is refused (quota_exceeded):
 * the caller is charged for what was accepted before it, never more than its balance.
 * Every minute of audio the reservation is settled (charged) and a new one opened, so a
 * process that dies loses at most a minute of charges; the instance sweep gives a dead
 * process's reservation back whole, so nothing is ever charged twice. `end` settles the rest.
 * A session that accepted no audio reserved nothing and is charged nothing.
 */
import { Effect } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import type { AccountsError } from "../storage/AccountsError.ts"
import type { CreditsShape, Reservation } from "../storage/Credits.ts"
import { CreditPurpose } from "./CreditPolicy.ts"

/** Credits reserved beyond what the accepted audio needs: a minute. */
export const REALTIME_AHEAD_CREDITS = 60
/** Audio between two settlements, ms. */
export const REALTIME_SETTLE_EVERY_MS = 60_000

const isShort = (e: AccountsError | SqlError) => (e as { reason?: unknown }).reason === "InsufficientCredits"

export const makeRealtimeCharge = (credits: CreditsShape, userId: string, reference: string) => {
  const origin = { purpose: CreditPurpose.sttRealtime, reference }
  let held: Reservation | undefined
  let acceptedMs = 0
  /** Credits charged by earlier settlements, and the audio they covered. */
  let charged = 0
  let settledMs = 0
  const owedTotal = (ms: number) => Math.ceil(ms / 1000)

  const hold = (amount: number) => (held === undefined ? credits.reserve(userId, amount, origin) : credits.resize(held, amount))

  /** Pays for `ms` more audio; false when the balance cannot (then nothing changed). */
  const admit = (ms: number): Effect.Effect<boolean, AccountsError | SqlError> =>
    Effect.gen(function*() {
      if (ms <= 0) return true
      const total = acceptedMs + ms
      const owed = owedTotal(total) - charged
      if (held === undefined || held.amount < owed) {
        const grown = yield* hold(owed + REALTIME_AHEAD_CREDITS).pipe(
          // Less than a minute ahead left: exactly what this chunk needs.
          Effect.catchIf(isShort, () => hold(owed)),
          Effect.map((r) => r as Reservation | undefined),
          Effect.catchIf(isShort, () => Effect.succeed(undefined))
        )
        if (grown === undefined) return false
        held = grown
      }
      acceptedMs = total
      if (acceptedMs - settledMs >= REALTIME_SETTLE_EVERY_MS) yield* settleNow
      return true
    }).pipe(Effect.uninterruptible)

  const settleNow = Effect.suspend(() => {
    const reservation = held
    if (reservation === undefined) return Effect.void
    const amount = owedTotal(acceptedMs) - charged
    held = undefined
    charged += amount
    settledMs = acceptedMs
    return Effect.asVoid(credits.settle(reservation, amount))
  })

  return {
    admit,
    /** Charges the accepted audio not yet charged and gives back the rest; idempotent. */
    end: Effect.uninterruptible(Effect.orElseSucceed(settleNow, () => undefined)),
    acceptedMs: () => acceptedMs
  }
}
