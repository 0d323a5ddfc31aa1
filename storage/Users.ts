/**
 * Users: creating them (with their first API key, for the admin CLI and tests), finding them,
 * and reading their balance. Balances move only through storage/Credits.ts; a new user's
 * starting credits are written to the ledger as a grant in the same statement that creates it.
 */
import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import { AccountsError, requireAmount, userNotFound } from "./AccountsError.ts"
import { randomId } from "./ApiKey.ts"
import { ApiKeys } from "./ApiKeys.ts"

export interface User {
  readonly userId: string
  readonly name: string
  readonly credits: number
  readonly createdAt: Date
  /** The sign-in e-mail; undefined for API-only users. */
  readonly email?: string | undefined
}

/** What signing in needs to know of a user found by e-mail. */
export interface SignInRecord {
  readonly userId: string
  readonly email: string
  /** argon2id PHC string; undefined: no password set, the user cannot sign in. */
  readonly passwordHash: string | undefined
}

export interface NewUser {
  readonly name: string
  readonly credits?: number | undefined
  /** Unique without regard to case; taken: AccountsError EmailTaken. */
  readonly email?: string | undefined
  readonly passwordHash?: string | undefined
}

export interface UserSummary extends User {
  /** Keys not deleted. */
  readonly keyCount: number
}

export interface UsersShape {
  readonly createUser: (input: NewUser) => Effect.Effect<User, AccountsError | SqlError>
  /** A user and its first key ("default"), in one transaction. */
  readonly createUserWithKey: (input: NewUser) => Effect.Effect<{ readonly userId: string; readonly apiKey: string; readonly keyId: string }, AccountsError | SqlError>
  readonly listUsers: () => Effect.Effect<ReadonlyArray<UserSummary>, SqlError>
  readonly balance: (userId: string) => Effect.Effect<number, AccountsError | SqlError>
  /** The user with its current balance. */
  readonly getUser: (userId: string) => Effect.Effect<User, AccountsError | SqlError>
  readonly findByEmail: (email: string) => Effect.Effect<SignInRecord | undefined, SqlError>
  readonly setPasswordHash: (userId: string, passwordHash: string) => Effect.Effect<void, AccountsError | SqlError>
  /** Sets or changes the sign-in e-mail. */
  readonly setEmail: (userId: string, email: string) => Effect.Effect<void, AccountsError | SqlError>
}

export class Users extends Context.Service<Users, UsersShape>()("speech/storage/Users") {}

export interface UsersOptions {
  /** Credits of a user created without an explicit amount (INITIAL_CREDITS). Default 0. */
  readonly initialCredits?: number
}

const toNumber = (value: bigint | number | string): number => Number(value)

/** A unique violation on `users_email_lower` becomes EmailTaken; other SQL errors pass. */
const emailTaken = (email: string | undefined) => <A, R>(effect: Effect.Effect<A, SqlError, R>): Effect.Effect<A, AccountsError | SqlError, R> =>
  Effect.catchIf(effect, (e) => {
    // The constraint's name is in the driver's error, which Effect keeps as the reason's cause.
    const reason = (e as { reason?: { message?: unknown; cause?: { message?: unknown; constraint?: unknown } } }).reason
    return [e.message, reason?.message, reason?.cause?.message, reason?.cause?.constraint].some((m) => String(m).includes("users_email_lower"))
  }, () =>
    Effect.fail(new AccountsError({ reason: "EmailTaken", message: `the e-mail ${email ?? ""} belongs to another account` })))

export const makeUsers = (options: UsersOptions = {}) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient
    const keys = yield* ApiKeys
    const initialCredits = options.initialCredits ?? 0

    const insertUser = (name: string, credits: number, email?: string, passwordHash?: string) =>
      Effect.gen(function*() {
        yield* requireAmount("Users.createUser", credits)
        const rows = yield* sql<{ id: string; name: string; credits: bigint; created_at: Date }>`
          WITH u AS (
            INSERT INTO users (id, name, credits, email, password_hash)
            VALUES (${randomId("usr")}, ${name}, ${credits}, ${email ?? null}, ${passwordHash ?? null})
            RETURNING id, name, credits, created_at
          ), l AS (
            INSERT INTO credit_ledger (user_id, kind, amount, balance_after, purpose)
            SELECT id, 'grant', credits, credits, 'new user' FROM u WHERE credits > 0
          )
          SELECT id, name, credits, created_at FROM u`
        const row = rows[0]!
        return { userId: row.id, name: row.name, credits: toNumber(row.credits), createdAt: row.created_at, email } satisfies User
      }).pipe(emailTaken(email))

    const createUser = Effect.fn("Users.createUser")(function*(input: NewUser) {
      return yield* insertUser(input.name, input.credits ?? initialCredits, input.email?.trim(), input.passwordHash)
    })

    const createUserWithKey = Effect.fn("Users.createUserWithKey")(function*(input: NewUser) {
      return yield* sql.withTransaction(Effect.gen(function*() {
        const user = yield* insertUser(input.name, input.credits ?? initialCredits, input.email?.trim(), input.passwordHash)
        // Same SqlClient, same fiber: the key's INSERT runs inside this transaction.
        const key = yield* keys.mintKey(user.userId, "default").pipe(
          Effect.catchTag("AccountsError", () => Effect.die(new Error("user vanished inside its own transaction")))
        )
        return { userId: user.userId, apiKey: key.apiKey, keyId: key.keyId }
      }))
    })

    const listUsers = Effect.fn("Users.listUsers")(function*() {
      const rows = yield* sql<{ id: string; name: string; credits: bigint; created_at: Date; key_count: bigint }>`
        SELECT u.id, u.name, u.credits, u.created_at,
               count(k.id) FILTER (WHERE k.deleted_at IS NULL) AS key_count
        FROM users u LEFT JOIN api_keys k ON k.user_id = u.id
        GROUP BY u.id
        ORDER BY u.created_at, u.id`
      return rows.map((row): UserSummary => ({
        userId: row.id,
        name: row.name,
        credits: toNumber(row.credits),
        createdAt: row.created_at,
        keyCount: toNumber(row.key_count)
      }))
    })

    const balance = Effect.fn("Users.balance")(function*(userId: string) {
      const rows = yield* sql<{ credits: bigint }>`SELECT credits FROM users WHERE id = ${userId}`
      const row = rows[0]
      if (row === undefined) return yield* userNotFound(userId)
      return toNumber(row.credits)
    })

    const getUser = Effect.fn("Users.getUser")(function*(userId: string) {
      const rows = yield* sql<{ id: string; name: string; credits: bigint; created_at: Date; email: string | null }>`
        SELECT id, name, credits, created_at, email FROM users WHERE id = ${userId}`
      const row = rows[0]
      if (row === undefined) return yield* userNotFound(userId)
      return { userId: row.id, name: row.name, credits: toNumber(row.credits), createdAt: row.created_at, email: row.email ?? undefined } satisfies User
    })

    const findByEmail = Effect.fn("Users.findByEmail")(function*(email: string) {
      const rows = yield* sql<{ id: string; email: string; password_hash: string | null }>`
        SELECT id, email, password_hash FROM users WHERE lower(email) = lower(${email.trim()})`
      const row = rows[0]
      return row === undefined ? undefined : { userId: row.id, email: row.email, passwordHash: row.password_hash ?? undefined } satisfies SignInRecord
    })

    const setPasswordHash = Effect.fn("Users.setPasswordHash")(function*(userId: string, passwordHash: string) {
      const rows = yield* sql`UPDATE users SET password_hash = ${passwordHash} WHERE id = ${userId} RETURNING 1`
      if (rows.length === 0) return yield* userNotFound(userId)
    })

    const setEmail = Effect.fn("Users.setEmail")(function*(userId: string, email: string) {
      const rows = yield* sql`UPDATE users SET email = ${email.trim()} WHERE id = ${userId} RETURNING 1`.pipe(emailTaken(email))
      if (rows.length === 0) return yield* userNotFound(userId)
    })

    return Users.of({ createUser, createUserWithKey, listUsers, balance, getUser, findByEmail, setPasswordHash, setEmail })
  })

/** Users over the `SqlClient` in context; `createUserWithKey` mints through the `ApiKeys` in context. */
export const usersLayer = (options: UsersOptions = {}): Layer.Layer<Users, never, SqlClient | ApiKeys> =>
  Layer.effect(Users, makeUsers(options))

/** Users with default options (new users start with 0 credits unless told otherwise). */
export const UsersLive: Layer.Layer<Users, never, SqlClient | ApiKeys> = usersLayer()
