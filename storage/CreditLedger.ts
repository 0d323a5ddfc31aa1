/**
 * Every movement of credits, as SQL: grants, debits, refunds, and reservations for work in
 * progress. storage/Credits.ts exposes these as a service; this module holds the statements and
 * their invariants.
 *
 * Invariant, per user, at every commit: sum(credit_ledger.amount) = users.credits + the amounts
 * of the user's open credit_reservations. Each function keeps it in one statement (a chain of
 * data-modifying CTEs, atomic like any statement) or one transaction:
 * - grant / refund: credits += n, ledger +n;
 * - debit: credits -= n only where credits >= n (the row lock of the UPDATE serialises
 *   concurrent spenders, so the balance never goes below zero), ledger -n;
 * - reserve: the same conditional decrement, plus a reservation row; no ledger row yet;
 * - settle(charged): deletes the reservation, gives back what was not used, ledger -charged;
 * - release: settle(0). A reservation deleted first by someone else (the sweeper of a dead
 *   instance, or an earlier settle) makes settle/release do nothing: both are idempotent, and
 *   the credits can never come back twice, because only the DELETE that removed the row gives
 *   them back.
 * Zero amounts write no ledger row.
 */
import { Effect, References } from "effect"
import type { SqlClient } from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import type { Fragment } from "effect/sql/Statement"
import { randomBytes } from "node:crypto"

/** Credits held for one piece of work; `amount` is what was held when this value was made. */
export interface Reservation {
  readonly id: string
  readonly userId: string
  readonly amount: number
}

/** What a movement was for, shown on the usage page. */
export interface CreditOrigin {
  /** e.g. "tts", "tts_stream", "tts_ws", "stt", "admin". */
  readonly purpose?: string | undefined
  /** Request or job id; defaults to the `requestId` log annotation of the calling fiber. */
  readonly reference?: string | undefined
}

export interface LedgerEntry {
  readonly id: number
  readonly userId: string
  readonly kind: "grant" | "debit" | "refund"
  /** Signed: positive adds to the balance. */
  readonly amount: number
  readonly balanceAfter: number
  readonly purpose: string | null
  readonly reference: string | null
  readonly createdAt: Date
}

export const newReservationId = (): string => `rsv_${randomBytes(10).toString("hex")}`

const toNumber = (value: bigint | number | string): number => Number(value)

/** The origin with its reference filled from the fiber's request id when the caller gave none. */
export const resolveOrigin = (origin: CreditOrigin | undefined) =>
  Effect.map(References.CurrentLogAnnotations, (annotations) => {
    const requestId = annotations.requestId
    return {
      purpose: origin?.purpose ?? null,
      reference: origin?.reference ?? (typeof requestId === "string" ? requestId : null)
    }
  })

/** credits += amount with a ledger row of `kind`; the new balance, or undefined without such user. */
export const addCredits = (sql: SqlClient, kind: "grant" | "refund", userId: string, amount: number, origin?: CreditOrigin) =>
  Effect.gen(function*() {
    const { purpose, reference } = yield* resolveOrigin(origin)
    const rows = yield* sql<{ credits: bigint }>`
      WITH u AS (
        UPDATE users SET credits = credits + ${amount} WHERE id = ${userId} RETURNING id, credits
      ), l AS (
        INSERT INTO credit_ledger (user_id, kind, amount, balance_after, purpose, reference)
        SELECT id, ${kind}::text, ${amount}::bigint, credits, ${purpose}::text, ${reference}::text FROM u WHERE ${amount}::bigint > 0
      )
      SELECT credits FROM u`
    return rows[0] === undefined ? undefined : toNumber(rows[0].credits)
  })

/** credits -= amount where enough is there, with a ledger row; the new balance, or undefined. */
export const takeCredits = (sql: SqlClient, userId: string, amount: number, origin?: CreditOrigin) =>
  Effect.gen(function*() {
    const { purpose, reference } = yield* resolveOrigin(origin)
    const rows = yield* sql<{ credits: bigint }>`
      WITH u AS (
        UPDATE users SET credits = credits - ${amount}
        WHERE id = ${userId} AND credits >= ${amount}
        RETURNING id, credits
      ), l AS (
        INSERT INTO credit_ledger (user_id, kind, amount, balance_after, purpose, reference)
        SELECT id, 'debit', -${amount}::bigint, credits, ${purpose}::text, ${reference}::text FROM u WHERE ${amount}::bigint > 0
      )
      SELECT credits FROM u`
    return rows[0] === undefined ? undefined : toNumber(rows[0].credits)
  })

/** Holds `amount` where enough is there; the new balance, or undefined (short, or no such user). */
export const insertReservation = (
  sql: SqlClient,
  reservation: Reservation,
  instanceId: string,
  origin?: CreditOrigin
) =>
  Effect.gen(function*() {
    const { purpose, reference } = yield* resolveOrigin(origin)
    const rows = yield* sql<{ credits: bigint }>`
      WITH u AS (
        UPDATE users SET credits = credits - ${reservation.amount}
        WHERE id = ${reservation.userId} AND credits >= ${reservation.amount}
        RETURNING id, credits
      ), r AS (
        INSERT INTO credit_reservations (id, user_id, amount, instance_id, purpose, reference)
        SELECT ${reservation.id}::text, id, ${reservation.amount}::bigint, ${instanceId}::text, ${purpose ?? "unspecified"}::text, ${reference}::text FROM u
      )
      SELECT credits FROM u`
    return rows[0] === undefined ? undefined : toNumber(rows[0].credits)
  })

/**
 * Makes the reservation hold `amount` (more or less than before). Growing takes the difference
 * only where the balance has it: false when it does not (the reservation is left as it was).
 * A reservation the sweeper already gave back is taken again, whole. One transaction, with the
 * reservation row locked first so that a concurrent sweep cannot interleave.
 */
export const resizeReservation = (
  sql: SqlClient,
  reservation: Reservation,
  amount: number,
  instanceId: string
): Effect.Effect<boolean, SqlError> =>
  sql.withTransaction(Effect.gen(function*() {
    const held = yield* sql<{ amount: bigint; purpose: string; reference: string | null }>`
      SELECT amount, purpose, reference FROM credit_reservations WHERE id = ${reservation.id} FOR UPDATE`
    const before = held[0] === undefined ? 0 : toNumber(held[0].amount)
    const more = amount - before
    const users = yield* sql`
      UPDATE users SET credits = credits - ${more}
      WHERE id = ${reservation.userId} AND credits >= ${Math.max(0, more)}
      RETURNING credits`
    if (users.length === 0) return false
    if (held[0] === undefined) {
      const { purpose, reference } = yield* resolveOrigin(undefined)
      yield* sql`
        INSERT INTO credit_reservations (id, user_id, amount, instance_id, purpose, reference)
        VALUES (${reservation.id}, ${reservation.userId}, ${amount}, ${instanceId}, ${purpose ?? "unspecified"}, ${reference})`
    } else {
      yield* sql`UPDATE credit_reservations SET amount = ${amount} WHERE id = ${reservation.id}`
    }
    return true
  }))

/**
 * Ends a reservation: `charged` (at most what it holds) goes to the ledger as a debit, the rest
 * back to the balance. Returns what was charged; 0 when the reservation was already gone.
 */
export const settleReservation = (sql: SqlClient, reservationId: string, charged: number) =>
  Effect.gen(function*() {
    const rows = yield* sql<{ charged: bigint }>`
      WITH r AS (
        DELETE FROM credit_reservations WHERE id = ${reservationId}
        RETURNING user_id, amount, LEAST(amount, ${charged}::bigint) AS charged, purpose, reference
      ), u AS (
        UPDATE users SET credits = users.credits + r.amount - r.charged FROM r
        WHERE users.id = r.user_id
        RETURNING users.id, users.credits, r.charged, r.purpose, r.reference
      ), l AS (
        INSERT INTO credit_ledger (user_id, kind, amount, balance_after, purpose, reference)
        SELECT id, 'debit', -charged, credits, purpose, reference FROM u WHERE charged > 0
      )
      SELECT charged FROM u`
    return rows[0] === undefined ? 0 : toNumber(rows[0].charged)
  })

/**
 * Gives back, whole, every reservation matching `where` (a condition on `credit_reservations`):
 * one statement, so each reservation is given back at most once whoever else settles or sweeps.
 */
export const releaseWhere = (sql: SqlClient, where: Fragment) =>
  Effect.gen(function*() {
    const rows = yield* sql<{ reservations: bigint; credits: bigint | null }>`
      WITH r AS (
        DELETE FROM credit_reservations WHERE ${where} RETURNING user_id, amount
      ), s AS (
        SELECT user_id, sum(amount) AS amount FROM r GROUP BY user_id
      ), u AS (
        UPDATE users SET credits = users.credits + s.amount FROM s WHERE users.id = s.user_id RETURNING users.id
      )
      SELECT (SELECT count(*) FROM r) AS reservations, (SELECT sum(amount) FROM r) AS credits`
    return { reservations: toNumber(rows[0]?.reservations ?? 0), credits: toNumber(rows[0]?.credits ?? 0) }
  })

/** Credits of the user held by open reservations. */
export const reservedCredits = (sql: SqlClient, userId: string) =>
  Effect.map(
    sql<{ total: bigint | null }>`SELECT sum(amount) AS total FROM credit_reservations WHERE user_id = ${userId}`,
    (rows) => toNumber(rows[0]?.total ?? 0)
  )

export interface LedgerPage {
  /** Entries to return, newest first. Default 50, at most 500. */
  readonly limit?: number | undefined
  /** Only entries older than this entry id (the last id of the previous page). */
  readonly before?: number | undefined
}

export const listLedger = (sql: SqlClient, userId: string, page: LedgerPage = {}) =>
  Effect.gen(function*() {
    const limit = Math.min(500, Math.max(1, Math.floor(page.limit ?? 50)))
    const rows = yield* sql<{
      id: bigint
      user_id: string
      kind: LedgerEntry["kind"]
      amount: bigint
      balance_after: bigint
      purpose: string | null
      reference: string | null
      created_at: Date
    }>`
      SELECT id, user_id, kind, amount, balance_after, purpose, reference, created_at FROM credit_ledger
      WHERE user_id = ${userId} ${page.before === undefined ? sql`` : sql`AND id < ${page.before}`}
      ORDER BY id DESC LIMIT ${limit}`
    return rows.map((row): LedgerEntry => ({
      id: toNumber(row.id),
      userId: row.user_id,
      kind: row.kind,
      amount: toNumber(row.amount),
      balanceAfter: toNumber(row.balance_after),
      purpose: row.purpose,
      reference: row.reference,
      createdAt: row.created_at
    }))
  })
