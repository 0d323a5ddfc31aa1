/**
 * Single-use tokens (migration 0012; ElevenLabs' `POST /v1/single-use-token/{token_type}`): a
 * server holding an API key (or an OAuth token) mints one and hands it to a browser, which opens
 * one WebSocket session with it in the query (`?token=`), so the key never reaches the page.
 *
 * A token is `sut_` + 32 random bytes in base64url; only its sha256 is stored. It is bound to its
 * type (a `tts_websocket` token opens no realtime transcription and the other way round) and to
 * the user who minted it, whose credits the session spends. It lives TOKEN_TTL_S (ElevenLabs'
 * 15 minutes) and is consumed by one UPDATE (`used_at IS NULL AND expires_at > now()`), so with
 * several instances on one PostgreSQL exactly one upgrade wins it. A wrong-type attempt does not
 * consume it (the WHERE names the type).
 *
 * Revocation: a token dies with its minter. The consuming UPDATE also requires the minting API
 * key not deleted and the minting OAuth grant not revoked, and the principal it returns carries
 * the key id, so a session opened with a token is indexed under that key and closed when it is
 * deleted, like a session opened with the key itself (runtime/WebSocketServer.ts). Sessions
 * opened from OAuth-minted tokens are, like OAuth sessions today, not closed by a later grant
 * revocation; a site session's token (the playground) does not die with a sign-out.
 */
import { Context, Effect, Layer, Schedule } from "effect"
import { SqlClient } from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import { createHash, randomBytes } from "node:crypto"
import type { Principal } from "./ApiKeys.ts"

/** The kinds ElevenLabs mints that this service serves (its `batch_scribe` has no endpoint here). */
export const TOKEN_TYPES = ["realtime_scribe", "tts_websocket"] as const
export type TokenType = (typeof TOKEN_TYPES)[number]

export const isTokenType = (s: string): s is TokenType => (TOKEN_TYPES as ReadonlyArray<string>).includes(s)

/**
 * The OAuth scope a token type needs from its minter, and the one scope its session holds:
 * `tts` for both, since it is the scope of synthesis and of transcription over HTTP today
 * (protocol/oauth/OAuthScopes.ts); the session cannot do anything else with it.
 */
export const TOKEN_SCOPE: Readonly<Record<TokenType, string>> = { realtime_scribe: "tts", tts_websocket: "tts" }

/** Lifetime of an unused token, s: ElevenLabs' 15 minutes. A session opened with it may run longer. */
export const TOKEN_TTL_S = 15 * 60

export const TOKEN_PREFIX = "sut_"
/** Anything else is refused without a query, so garbage in a query string never costs one. */
const WELL_FORMED = /^sut_[A-Za-z0-9_-]{43}$/u

export const isWellFormedToken = (candidate: string): boolean => WELL_FORMED.test(candidate)

const tokenHash = (token: string) => createHash("sha256").update(token, "utf8").digest()

export interface MintedToken {
  /** Shown to the minter once; stored only hashed. */
  readonly token: string
  readonly expiresAt: Date
}

export class SingleUseTokens extends Context.Service<SingleUseTokens, {
  /** A new token of `type` for `principal` (its user, key or grant). `ttlS` overrides TOKEN_TTL_S (tests). */
  readonly mint: (principal: Principal, type: TokenType, ttlS?: number) => Effect.Effect<MintedToken, SqlError>
  /**
   * Uses the token up, once: the principal it acts as (its user, its minting key, the type's one
   * scope), or undefined when it is malformed, unknown, expired, used, of another type, or its
   * minting key or grant is gone. Safe across instances: one UPDATE decides.
   */
  readonly consume: (token: string, type: TokenType) => Effect.Effect<Principal | undefined, SqlError>
}>()("speech/storage/SingleUseTokens") {}

export const singleUseTokensLayer: Layer.Layer<SingleUseTokens, never, SqlClient> = Layer.effect(SingleUseTokens, Effect.gen(function*() {
  const sql = yield* SqlClient
  // Expired rows are refused by the UPDATE anyway; this only keeps the table small.
  const sweep = sql`DELETE FROM single_use_tokens WHERE expires_at < now()`.pipe(
    Effect.asVoid,
    Effect.catchCause((cause) => Effect.logWarning("expired single-use tokens not swept", cause))
  )
  yield* Effect.forkScoped(Effect.repeat(sweep, Schedule.spaced("1 hour")))

  const mint = Effect.fn("SingleUseTokens.mint")(function*(principal: Principal, type: TokenType, ttlS: number = TOKEN_TTL_S) {
    const token = TOKEN_PREFIX + randomBytes(32).toString("base64url")
    const rows = yield* sql<{ expires_at: Date }>`
      INSERT INTO single_use_tokens (token_hash, token_type, user_id, key_id, grant_id, client_id, expires_at)
      VALUES (${tokenHash(token)}, ${type}, ${principal.userId}, ${principal.keyId}, ${principal.grantId ?? null},
              ${principal.clientId ?? null}, now() + make_interval(secs => ${ttlS}))
      RETURNING expires_at`
    return { token, expiresAt: new Date(rows[0]!.expires_at) } satisfies MintedToken
  })

  const consume = Effect.fn("SingleUseTokens.consume")(function*(token: string, type: TokenType) {
    if (!isWellFormedToken(token)) return undefined
    const rows = yield* sql<{ user_id: string; key_id: string | null; grant_id: string | null; client_id: string | null }>`
      UPDATE single_use_tokens t SET used_at = now()
      WHERE t.token_hash = ${tokenHash(token)} AND t.token_type = ${type}
        AND t.used_at IS NULL AND t.expires_at > now()
        AND (t.key_id IS NULL OR EXISTS (SELECT 1 FROM api_keys k WHERE k.id = t.key_id AND k.deleted_at IS NULL))
        AND (t.grant_id IS NULL OR EXISTS (SELECT 1 FROM oauth_grants g WHERE g.id = t.grant_id AND g.revoked_at IS NULL))
      RETURNING t.user_id, t.key_id, t.grant_id, t.client_id`
    const row = rows[0]
    if (row === undefined) return undefined
    return {
      userId: row.user_id,
      keyId: row.key_id,
      scopes: [TOKEN_SCOPE[type]],
      ...(row.client_id === null ? {} : { clientId: row.client_id }),
      ...(row.grant_id === null ? {} : { grantId: row.grant_id })
    } satisfies Principal
  })

  return SingleUseTokens.of({ mint, consume })
}))
