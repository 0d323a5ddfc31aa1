/**
 * The debit of one WebSocket chunk (actors/TtsSession.ts): taken just before the chunk's first
 * frame is handed to the socket, so that cancelled or undelivered audio costs nothing.
 *
 * Hazard this closes: the debit is a database round trip, and an interruption (a cancel, the
 * client leaving) that lands during it or right after it used to leave the credits taken and the
 * frame unsent: measured against a real server, 7 of 121 cancels sent 0-120 ms after a flush
 * were charged the whole chunk with no frame before the acknowledgement. So the debit runs
 * uninterruptibly and, if the first frame then does not reach the socket (interrupted while it
 * waits for `drain`, socket gone), the credits are refunded before the failure goes on.
 */
import { Data, Effect, type Fiber } from "effect"
import type { CreditOrigin, CreditsShape } from "../storage/Credits.ts"

/** A chunk's debit failed (out of credits, database down): reported before any of its audio. */
export class Unpaid extends Data.TaggedError("Unpaid")<{ readonly failure: unknown }> {}

export const debitThenSend = <E, R>(
  debit: Effect.Effect<unknown, unknown>,
  refund: Effect.Effect<unknown, unknown>,
  sendFirst: Effect.Effect<void, E, R>
): Effect.Effect<void, Unpaid | E, R> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.andThen(
      Effect.mapError(debit, (failure) => new Unpaid({ failure })),
      restore(sendFirst).pipe(Effect.onExit((exit) => (exit._tag === "Failure" ? Effect.ignore(refund) : Effect.void)))
    ))

/**
 * The early order, for a user whose balance this process heard covers the chunk
 * (`Credits.covers`): the first frame goes out at once and the debit follows it, uninterruptibly,
 * in a fiber the caller joins before the chunk's next frame (or after its last); it fails with
 * Unpaid when the database refuses, and the caller ends the session then. A frame that does not
 * reach the socket is never debited.
 */
export const sendThenDebit = <E, R>(
  debit: Effect.Effect<unknown, unknown>,
  sendFirst: Effect.Effect<void, E, R>
): Effect.Effect<Fiber.Fiber<unknown, Unpaid>, E, R> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.andThen(
      restore(sendFirst),
      Effect.forkChild(Effect.uninterruptible(Effect.mapError(debit, (failure) => new Unpaid({ failure }))), { startImmediately: true })
    ))

/**
 * Pays a chunk with its first frame: early when this process heard the balance covers it, else
 * debit first. Returns the early debit's fiber (join it before the chunk's next frame, or after
 * its last), or undefined when the debit already answered.
 */
export const payWithFirstFrame = <E, R>(
  credits: CreditsShape,
  charge: { readonly userId: string; readonly cost: number; readonly origin: CreditOrigin },
  sendFirst: Effect.Effect<void, E, R>
): Effect.Effect<Fiber.Fiber<unknown, Unpaid> | undefined, Unpaid | E, R> => {
  const { userId, cost, origin } = charge
  const debit = credits.debit(userId, cost, origin)
  return credits.covers(userId, cost)
    ? sendThenDebit(debit, sendFirst)
    : Effect.as(debitThenSend(debit, Effect.suspend(() => credits.refund(userId, cost, origin)), sendFirst), undefined)
}
