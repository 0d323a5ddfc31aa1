/**
 * Server-side sessions of the site (migration 0007): a signed-in browser holds a random token in
 * an HttpOnly cookie; the table keeps its sha256, the user, a per-session CSRF token and the
 * expiry. Sessions end at expiry, at sign-out, or all at once with `endAll` (sign out everywhere,
 * a password change).
 */
import { Context, Effect, Layer, Schedule } from "effect"
import { SqlClient } from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import { createHash, randomBytes } from "node:crypto"

export interface WebSession {
  readonly userId: string
  readonly csrfToken: string
  readonly expiresAt: Date
}

export interface NewWebSession extends WebSession {
  /** The cookie's value: shown to the browser once, stored only hashed. */
  readonly token: string
}

export class WebSessions extends Context.Service<WebSessions, {
  /** `lifetimeMs` overrides the configured lifetime (in-process callers: tests of expiry). */
  readonly start: (userId: string, lifetimeMs?: number) => Effect.Effect<NewWebSession, SqlError>
  /** The live session of a cookie token; undefined when unknown, ended or expired. */
  readonly find: (token: string) => Effect.Effect<WebSession | undefined, SqlError>
  readonly end: (token: string) => Effect.Effect<void, SqlError>
  /** Ends every session of the user, except the one of `keepToken` when given. */
  readonly endAll: (userId: string, keepToken?: string) => Effect.Effect<number, SqlError>
}>()("speech/storage/WebSessions") {}

const tokenHash = (token: string) => createHash("sha256").update(token, "utf8").digest()
/** A token is 32 random bytes in base64url (43 characters); anything else is not looked up. */
const WELL_FORMED = /^[A-Za-z0-9_-]{43}$/u

export interface WebSessionsOptions {
  /** How long a session lasts from sign-in, ms. */
  readonly lifetimeMs: number
}

export const webSessionsLayer = (options: WebSessionsOptions): Layer.Layer<WebSessions, never, SqlClient> =>
  Layer.effect(WebSessions, Effect.gen(function*() {
    const sql = yield* SqlClient
    // Expired rows are refused on read; this only keeps the table small.
    const sweep = sql`DELETE FROM web_sessions WHERE expires_at < now()`.pipe(
      Effect.asVoid,
      Effect.catchCause((cause) => Effect.logWarning("expired web sessions not swept", cause))
    )
    yield* Effect.forkScoped(Effect.repeat(sweep, Schedule.spaced("1 hour")))

    const start = Effect.fn("WebSessions.start")(function*(userId: string, lifetimeMs?: number) {
      const token = randomBytes(32).toString("base64url")
      const csrfToken = randomBytes(24).toString("base64url")
      const expiresAt = new Date(Date.now() + (lifetimeMs ?? options.lifetimeMs))
      yield* sql`INSERT INTO web_sessions (token_hash, user_id, csrf_token, expires_at)
                 VALUES (${tokenHash(token)}, ${userId}, ${csrfToken}, ${expiresAt})`
      return { token, userId, csrfToken, expiresAt } satisfies NewWebSession
    })

    const find = Effect.fn("WebSessions.find")(function*(token: string) {
      if (!WELL_FORMED.test(token)) return undefined
      const rows = yield* sql<{ user_id: string; csrf_token: string; expires_at: Date }>`
        SELECT user_id, csrf_token, expires_at FROM web_sessions
        WHERE token_hash = ${tokenHash(token)} AND expires_at > now()`
      const row = rows[0]
      return row === undefined ? undefined : { userId: row.user_id, csrfToken: row.csrf_token, expiresAt: new Date(row.expires_at) } satisfies WebSession
    })

    const end = Effect.fn("WebSessions.end")(function*(token: string) {
      if (WELL_FORMED.test(token)) yield* sql`DELETE FROM web_sessions WHERE token_hash = ${tokenHash(token)}`
    })

    const endAll = Effect.fn("WebSessions.endAll")(function*(userId: string, keepToken?: string) {
      const rows = keepToken === undefined
        ? yield* sql`DELETE FROM web_sessions WHERE user_id = ${userId} RETURNING 1`
        : yield* sql`DELETE FROM web_sessions WHERE user_id = ${userId} AND token_hash <> ${tokenHash(keepToken)} RETURNING 1`
      return rows.length
    })

    return WebSessions.of({ start, find, end, endAll })
  }))
