/**
 * Paying for speech-to-text before the decoding (actors/Transcription.ts): the reservation is
 * taken for the duration the file declares (engines/media/MediaProbe.ts, a header read of
 * milliseconds), so a caller who cannot pay for it is refused (402) before ffmpeg decodes
 * anything, and the decode is bounded by what the caller can pay in all (the reservation plus
 * the balance left beside it), so a header that understates the length (or a file without
 * one) is stopped as soon as its decoded audio outgrows the balance, instead of being decoded
 * whole and refused afterwards.
 *
 * The declared duration only sizes the reservation. What is charged is unchanged: the
 * transcript's real duration (actors/CreditPolicy.ts `sttCredits`), by resizing the reservation
 * once the decode has measured it and settling it at the end (storage/Credits.ts).
 */
import { Effect } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import { AccountsError } from "../storage/AccountsError.ts"
import type { CreditOrigin, CreditsShape, Reservation } from "../storage/Credits.ts"
import { STT_MIN_CHARGE_CREDITS, sttCredits } from "./CreditPolicy.ts"

export interface Prepaid {
  readonly reservation: Reservation
  /** The most audio the caller can pay for in all, ms: the decode stops past it. */
  readonly budgetMs: number
}

/**
 * Reserves the minimum charge (so a caller whose balance went to 0 meanwhile starts no ffmpeg
 * at all), reads the declared duration, and grows the reservation to its cost (capped at
 * `maxMs`, the longest audio accepted at all). Each reservation taken or grown is handed to
 * `hold` before anything else can happen, so it is always in someone's hands.
 */
export const prepay = <R>(
  credits: CreditsShape,
  balance: (userId: string) => Effect.Effect<number, AccountsError | SqlError>,
  request: {
    readonly userId: string
    /** The duration the file declares, ms, or undefined. */
    readonly declared: Effect.Effect<number | undefined, never, R>
    readonly maxMs: number
    readonly origin: CreditOrigin
    readonly hold: (reservation: Reservation) => Effect.Effect<void>
  }
): Effect.Effect<Prepaid, AccountsError | SqlError, R> =>
  Effect.gen(function*() {
    let reservation = yield* Effect.uninterruptible(Effect.tap(credits.reserve(request.userId, STT_MIN_CHARGE_CREDITS, request.origin), request.hold))
    const declaredMs = yield* request.declared
    const declared = declaredMs === undefined ? undefined : Math.min(declaredMs, request.maxMs)
    const amount = declared === undefined ? STT_MIN_CHARGE_CREDITS : sttCredits(declared)
    if (amount > reservation.amount) {
      reservation = yield* Effect.uninterruptible(Effect.tap(
        credits.resize(reservation, amount).pipe(
          Effect.mapError((e) =>
            e._tag === "AccountsError" && e.reason === "InsufficientCredits"
              ? new AccountsError({
                reason: "InsufficientCredits",
                message: `the file declares ${(declared! / 1000).toFixed(1)} s of audio, which costs ${amount} credits (one per started second); the account has less`
              })
              : e
          )
        ),
        request.hold
      ))
    }
    const left = yield* balance(request.userId)
    return { reservation, budgetMs: (reservation.amount + left) * 1000 }
  })

/** The 402 of a decode stopped because its audio outgrew what the caller can pay. */
export const overBudget = (budgetMs: number) =>
  new AccountsError({
    reason: "InsufficientCredits",
    message: `the audio is longer than the ${Math.floor(budgetMs / 1000)} s the account's credits pay for (one credit per started second); decoding was stopped there`
  })
