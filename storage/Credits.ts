/**
 * Credits: grants, debits, refunds, reservations for work in progress, and the ledger. The SQL
 * and its invariant (ledger sum = balance + open reservations) are in storage/CreditLedger.ts;
 * what a piece of work costs is decided above, in actors/CreditPolicy.ts. Balances are read
 * through storage/Users.ts.
 *
 * Credits are never cached: `debit` and `reserve` are one conditional UPDATE, so concurrent
 * spenders cannot overdraw an account, on any number of processes. (`covers` only lets audio go
 * out while that statement runs, from the balance it last returned: storage/BalanceHints.ts.) Work whose cost is known only
 * at its end holds a reservation (`reserve`, then `settle` or `release`), which a crash cannot
 * leave charged: storage/InstanceRegistry.ts gives back reservations of dead processes. Every
 * grant, debit and refund is written to the ledger, listed by `ledger`.
 */
import { Context, Effect, Layer, Schedule } from "effect"
import { SqlClient } from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import { AccountsError, requireAmount, userNotFound } from "./AccountsError.ts"
import {
  addCredits,
  type CreditOrigin,
  insertReservation,
  type LedgerEntry,
  type LedgerPage,
  listLedger,
  newReservationId,
  type Reservation,
  reservedCredits,
  resizeReservation,
  settleReservation,
  takeCredits
} from "./CreditLedger.ts"
import { newInstanceId } from "./InstanceRegistry.ts"
import { makeBalanceHints } from "./BalanceHints.ts"

export type { CreditOrigin, LedgerEntry, LedgerPage, Reservation } from "./CreditLedger.ts"

export interface CreditsShape {
  /** Adds credits; returns the new balance. */
  readonly grantCredits: (userId: string, amount: number, origin?: CreditOrigin) => Effect.Effect<number, AccountsError | SqlError>
  /** Spends credits atomically; returns the remaining balance, or fails with InsufficientCredits. */
  readonly debit: (userId: string, amount: number, origin?: CreditOrigin) => Effect.Effect<number, AccountsError | SqlError>
  /** Gives back credits debited for work that then failed; returns the new balance. */
  readonly refund: (userId: string, amount: number, origin?: CreditOrigin) => Effect.Effect<number, AccountsError | SqlError>
  /**
   * Holds `amount` credits (taken from the balance, InsufficientCredits when short) for work
   * whose cost is known at its end. Uninterruptible: once it ran, its outcome is the caller's.
   * End every reservation with `settle` or `release` (from a finalizer: `Effect.ensuring`,
   * `Effect.onExit`, `Effect.acquireRelease`); one of a process that dies is given back whole.
   */
  readonly reserve: (userId: string, amount: number, origin?: CreditOrigin) => Effect.Effect<Reservation, AccountsError | SqlError>
  /** Makes the reservation hold `amount`; growing needs the balance (InsufficientCredits, unchanged). */
  readonly resize: (reservation: Reservation, amount: number) => Effect.Effect<Reservation, AccountsError | SqlError>
  /**
   * Charges `charged` (at most what is held) as one ledger debit and gives back the rest;
   * returns what was charged. Idempotent: a reservation already ended charges nothing.
   */
  readonly settle: (reservation: Reservation, charged: number) => Effect.Effect<number, SqlError>
  /** Gives the whole reservation back (settle with 0). Idempotent. */
  readonly release: (reservation: Reservation) => Effect.Effect<void, SqlError>
  /** Credits of the user held by open reservations (not part of `Users.balance`). */
  readonly reserved: (userId: string) => Effect.Effect<number, SqlError>
  /**
   * Whether audio worth `amount` may go out before the debit or reservation paying for it has
   * answered: this process heard the user's balance recently and it covers the amount
   * (storage/BalanceHints.ts). The statement must still run; its refusal stops the work.
   */
  readonly covers: (userId: string, amount: number) => boolean
  /** The user's ledger entries, newest first. */
  readonly ledger: (userId: string, page?: LedgerPage) => Effect.Effect<ReadonlyArray<LedgerEntry>, AccountsError | SqlError>
}

export class Credits extends Context.Service<Credits, CreditsShape>()("speech/storage/Credits") {}

export interface CreditsOptions {
  /** The instance that holds this process's reservations (storage/InstanceRegistry.ts). Default: a new id. */
  readonly instanceId?: string
}

const toNumber = (value: bigint | number | string): number => Number(value)

const insufficient = (needed: number, has: number) =>
  new AccountsError({ reason: "InsufficientCredits", message: `this needs ${needed} credits and the account has ${has}` })

export const makeCredits = (options: CreditsOptions = {}) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient
    const instanceId = options.instanceId ?? newInstanceId()
    const hints = makeBalanceHints()

    /** A statement about the user's balance, with the hints told when it runs and what it reported. */
    const watched = <A, E, R>(userId: string, statement: Effect.Effect<A, E, R>, reported: (a: A) => number | undefined) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.suspend(() => {
          hints.begin(userId)
          return Effect.onExit(restore(statement), (exit) => Effect.sync(() => hints.end(userId, exit._tag === "Success" ? reported(exit.value) : undefined)))
        }))

    /** Why a conditional decrement found nothing to take. */
    const shortOf = (userId: string, amount: number) =>
      Effect.gen(function*() {
        const current = yield* sql<{ credits: bigint }>`SELECT credits FROM users WHERE id = ${userId}`
        if (current[0] === undefined) return yield* Effect.fail(userNotFound(userId))
        return yield* Effect.fail(insufficient(amount, toNumber(current[0].credits)))
      })

    const add = (kind: "grant" | "refund", userId: string, amount: number, origin: CreditOrigin | undefined) =>
      Effect.gen(function*() {
        yield* requireAmount(`Credits.${kind}`, amount)
        const credits = yield* watched(userId, addCredits(sql, kind, userId, amount, origin), (c) => c)
        if (credits === undefined) return yield* Effect.fail(userNotFound(userId))
        return credits
      })

    const grantCredits = Effect.fn("Credits.grantCredits")(function*(userId: string, amount: number, origin?: CreditOrigin) {
      return yield* add("grant", userId, amount, origin)
    })

    const refund = Effect.fn("Credits.refund")(function*(userId: string, amount: number, origin?: CreditOrigin) {
      return yield* add("refund", userId, amount, origin)
    })

    const debit = Effect.fn("Credits.debit")(function*(userId: string, amount: number, origin?: CreditOrigin) {
      yield* requireAmount("Credits.debit", amount)
      const credits = yield* watched(userId, takeCredits(sql, userId, amount, origin), (c) => c)
      if (credits === undefined) return yield* shortOf(userId, amount)
      return credits
    })

    // Uninterruptible as a whole: an interruption between the statement and the return would
    // leave the caller without the reservation it holds, and nobody to end it.
    const reserve = Effect.fn("Credits.reserve")(function*(userId: string, amount: number, origin?: CreditOrigin) {
      yield* requireAmount("Credits.reserve", amount)
      const reservation: Reservation = { id: newReservationId(), userId, amount }
      const credits = yield* watched(userId, insertReservation(sql, reservation, instanceId, origin), (c) => c)
      if (credits === undefined) return yield* shortOf(userId, amount)
      return reservation
    }, Effect.uninterruptible)

    const resize = Effect.fn("Credits.resize")(function*(reservation: Reservation, amount: number) {
      yield* requireAmount("Credits.resize", amount)
      // It reports no balance: the hint is dropped until the user's next statement.
      const done = yield* watched(reservation.userId, resizeReservation(sql, reservation, amount, instanceId), () => undefined)
      if (!done) return yield* shortOf(reservation.userId, amount - reservation.amount)
      return { ...reservation, amount } satisfies Reservation
    }, Effect.uninterruptible)

    // A settle lost to a database hiccup would leave the credits held until this instance stops:
    // try a few times (0.1 + 0.2 + 0.4 + 0.8 s) before giving up and logging it.
    const settle = Effect.fn("Credits.settle")(function*(reservation: Reservation, charged: number) {
      yield* requireAmount("Credits.settle", charged)
      return yield* settleReservation(sql, reservation.id, charged).pipe(
        Effect.retry({ schedule: Schedule.exponential("100 millis"), times: 4 }),
        Effect.tapError((error) => Effect.logWarning("settling a credit reservation failed", { reservation: reservation.id, error }))
      )
    }, Effect.uninterruptible)

    const release = Effect.fn("Credits.release")(function*(reservation: Reservation) {
      yield* settle(reservation, 0)
    })

    const reserved = Effect.fn("Credits.reserved")(function*(userId: string) {
      return yield* reservedCredits(sql, userId)
    })

    const ledger = Effect.fn("Credits.ledger")(function*(userId: string, page?: LedgerPage) {
      const entries = yield* listLedger(sql, userId, page)
      if (entries.length === 0 && (yield* sql`SELECT 1 FROM users WHERE id = ${userId}`).length === 0) {
        return yield* Effect.fail(userNotFound(userId))
      }
      return entries
    })

    return Credits.of({ grantCredits, refund, debit, reserve, resize, settle, release, reserved, covers: hints.covers, ledger })
  })

/** Credits over the `SqlClient` in context; reservations are taken under `instanceId`. */
export const creditsLayer = (options: CreditsOptions = {}): Layer.Layer<Credits, never, SqlClient> =>
  Layer.effect(Credits, makeCredits(options))

/** Credits under a fresh instance id (tests, tools). */
export const CreditsLive: Layer.Layer<Credits, never, SqlClient> = creditsLayer()
