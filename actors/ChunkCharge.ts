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
import { Data, Effect } from "effect"

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
