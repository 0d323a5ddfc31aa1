/**
 * Users: creating them (with their first API key, for the admin CLI and tests), finding them,
 * and reading their balance. Balances move only through storage/Credits.ts; a new user's
 * starting credits are written to the ledger as a grant in the same statement that creates it.
 */
import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import { type AccountsError, requireAmount, userNotFound } from "./AccountsError.ts"
import { randomId } from "./ApiKey.ts"
import { ApiKeys } from "./ApiKeys.ts"

export interface User {
  readonly userId: string
  readonly name: string
  readonly credits: number
  readonly createdAt: Date
}

export interface UserSummary extends User {
  /** Keys not deleted. */
  readonly keyCount: number
}

export interface UsersShape {
  readonly createUser: (input: { readonly name: string; readonly credits?: number | undefined }) => Effect.Effect<User, SqlError>
  /** A user and its first key ("default"), in one transaction. */
  readonly createUserWithKey: (input: {
    readonly name: string
    readonly credits?: number | undefined
  }) => Effect.Effect<{ readonly userId: string; readonly apiKey: string; readonly keyId: string }, SqlError>
  readonly listUsers: () => Effect.Effect<ReadonlyArray<UserSummary>, SqlError>
  readonly balance: (userId: string) => Effect.Effect<number, AccountsError | SqlError>
  /** The user with its current balance. */
  readonly getUser: (userId: string) => Effect.Effect<User, AccountsError | SqlError>
}

export class Users extends Context.Service<Users, UsersShape>()("speech/storage/Users") {}

export interface UsersOptions {
  /** Credits of a user created without an explicit amount (INITIAL_CREDITS). Default 0. */
  readonly initialCredits?: number
}

const toNumber = (value: bigint | number | string): number => Number(value)

export const makeUsers = (options: UsersOptions = {}) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient
    const keys = yield* ApiKeys
    const initialCredits = options.initialCredits ?? 0

    const insertUser = (name: string, credits: number) =>
      Effect.gen(function*() {
        yield* requireAmount("Users.createUser", credits)
        const rows = yield* sql<{ id: string; name: string; credits: bigint; created_at: Date }>`
          WITH u AS (
            INSERT INTO users (id, name, credits) VALUES (${randomId("usr")}, ${name}, ${credits})
            RETURNING id, name, credits, created_at
          ), l AS (
            INSERT INTO credit_ledger (user_id, kind, amount, balance_after, purpose)
            SELECT id, 'grant', credits, credits, 'new user' FROM u WHERE credits > 0
          )
          SELECT id, name, credits, created_at FROM u`
        const row = rows[0]!
        return { userId: row.id, name: row.name, credits: toNumber(row.credits), createdAt: row.created_at } satisfies User
      })

    const createUser = Effect.fn("Users.createUser")(function*(input: { readonly name: string; readonly credits?: number | undefined }) {
      return yield* insertUser(input.name, input.credits ?? initialCredits)
    })

    const createUserWithKey = Effect.fn("Users.createUserWithKey")(function*(input: {
      readonly name: string
      readonly credits?: number | undefined
    }) {
      return yield* sql.withTransaction(Effect.gen(function*() {
        const user = yield* insertUser(input.name, input.credits ?? initialCredits)
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
      const rows = yield* sql<{ id: string; name: string; credits: bigint; created_at: Date }>`
        SELECT id, name, credits, created_at FROM users WHERE id = ${userId}`
      const row = rows[0]
      if (row === undefined) return yield* userNotFound(userId)
      return { userId: row.id, name: row.name, credits: toNumber(row.credits), createdAt: row.created_at } satisfies User
    })

    return Users.of({ createUser, createUserWithKey, listUsers, balance, getUser })
  })

/** Users over the `SqlClient` in context; `createUserWithKey` mints through the `ApiKeys` in context. */
export const usersLayer = (options: UsersOptions = {}): Layer.Layer<Users, never, SqlClient | ApiKeys> =>
  Layer.effect(Users, makeUsers(options))

/** Users with default options (new users start with 0 credits unless told otherwise). */
export const UsersLive: Layer.Layer<Users, never, SqlClient | ApiKeys> = usersLayer()
