/**
 * Storage of the OAuth 2.1 authorization server (migration 0008): clients, grants, codes, opaque
 * tokens and ID-token signing keys. Every secret is kept as its sha256; every state change is one
 * conditional statement, so two instances racing on one code or one refresh token cannot both win.
 *
 * Lifetimes: codes 5 minutes, access tokens 1 hour (OAUTH_ACCESS_TTL_S), refresh tokens 30 days (rotated on every use;
 * a rotated one presented again revokes its whole family). A grant is what the user consented to
 * for a client; revoking it revokes every token issued under it, at once (tokens are looked up on
 * every request, never trusted from a signature).
 *
 * Registration is anonymous, so a client no user ever granted anything (no row in oauth_grants,
 * live or revoked) is deleted `UNUSED_CLIENT_TTL_S` after it registered: every instance sweeps
 * hourly (the DELETE is safe to run concurrently). A client someone consented to is kept.
 */
import { Context, Effect, Layer, Schedule } from "effect"
import { SqlClient } from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import { createHash, randomBytes, timingSafeEqual } from "node:crypto"
import { jsonbValue } from "./Database.ts"

export const CODE_TTL_S = 300
/** Default lifetime of an access token, s (OAUTH_ACCESS_TTL_S). */
export const ACCESS_TTL_S = 3600
export const REFRESH_TTL_S = 30 * 24 * 3600
/** How long a registered client may go without any user granting it access before it is deleted, s. */
export const UNUSED_CLIENT_TTL_S = 24 * 3600
/** How often each instance sweeps unused clients, ms. */
const SWEEP_EVERY_MS = 3600_000
/** A rotated refresh token presented again within this many seconds is a race, not a theft. */
const REUSE_GRACE_S = 2

export const ACCESS_PREFIX = "oat_"
const REFRESH_PREFIX = "ort_"

export interface OAuthClient {
  readonly clientId: string
  readonly name: string
  readonly redirectUris: ReadonlyArray<string>
  /** `none` (public, PKCE only) or `client_secret_basic` / `client_secret_post`. */
  readonly authMethod: string
  readonly secretHash: Uint8Array | undefined
}

export interface CodeData {
  readonly grantId: string
  readonly userId: string
  readonly clientId: string
  readonly redirectUri: string
  readonly codeChallenge: string
  readonly scopes: string
  readonly nonce: string | undefined
  readonly codeHash: Uint8Array
}

export type Redeemed =
  | { readonly _tag: "Ok"; readonly code: CodeData }
  | { readonly _tag: "Unknown" }
  /** Used before or expired; a used code's tokens have just been revoked. */
  | { readonly _tag: "Spent" }

export interface IssuedTokens {
  readonly accessToken: string
  readonly refreshToken: string | undefined
  readonly expiresIn: number
  readonly scopes: string
}

export interface TokenInfo {
  readonly userId: string
  readonly clientId: string
  readonly grantId: string
  readonly scopes: ReadonlyArray<string>
}

export interface GrantInfo {
  readonly grantId: string
  readonly clientId: string
  readonly clientName: string
  readonly scopes: ReadonlyArray<string>
  readonly createdAt: Date
}

export type Refreshed =
  | { readonly _tag: "Ok"; readonly tokens: IssuedTokens; readonly info: TokenInfo }
  | { readonly _tag: "Invalid" }
  /** A rotated token was presented again: the family is revoked. */
  | { readonly _tag: "Reused" }
  /** The scope asked is wider than the refresh token's; the token is left unspent. */
  | { readonly _tag: "InvalidScope" }

export const secretHash = (secret: string) => createHash("sha256").update(secret, "utf8").digest()
const random = (prefix: string, bytes = 32) => `${prefix}${randomBytes(bytes).toString("base64url")}`
const split = (scopes: string) => scopes.split(" ").filter((s) => s !== "")

export class OAuthStore extends Context.Service<OAuthStore, {
  readonly registerClient: (c: { name: string; redirectUris: ReadonlyArray<string>; authMethod: string }) => Effect.Effect<{ clientId: string; clientSecret: string | undefined }, SqlError>
  readonly findClient: (clientId: string) => Effect.Effect<OAuthClient | undefined, SqlError>
  /**
   * Deletes clients registered over `olderThanS` seconds ago (by the database clock) that no
   * user ever granted access; how many. Run hourly by the layer; tests call it directly.
   */
  readonly sweepUnusedClients: (olderThanS?: number) => Effect.Effect<number, SqlError>
  /** The live grant of the user for the client (what they consented to before), if any. */
  readonly liveGrant: (userId: string, clientId: string) => Effect.Effect<{ grantId: string; scopes: ReadonlyArray<string> } | undefined, SqlError>
  /** Records consent to `scopes` (added to what the grant had); the grant id. */
  readonly consent: (userId: string, clientId: string, scopes: ReadonlyArray<string>) => Effect.Effect<string, SqlError>
  readonly createCode: (c: Omit<CodeData, "codeHash" | "userId">) => Effect.Effect<string, SqlError>
  readonly redeemCode: (code: string) => Effect.Effect<Redeemed, SqlError>
  readonly issue: (grantId: string, scopes: string, withRefresh: boolean, codeHash?: Uint8Array) => Effect.Effect<IssuedTokens, SqlError>
  readonly accessToken: (token: string) => Effect.Effect<TokenInfo | undefined, SqlError>
  /**
   * RFC 6749 6: `scopes` (the request's `scope`), when given, narrows the new access token; the
   * new refresh token keeps the scope of the one it replaces, so a later refresh may widen back.
   */
  readonly refresh: (token: string, clientId: string, scopes?: ReadonlyArray<string>) => Effect.Effect<Refreshed, SqlError>
  /** RFC 7009: revokes the token (a refresh token: its family) if the client owns it. */
  readonly revoke: (token: string, clientId: string) => Effect.Effect<void, SqlError>
  readonly grants: (userId: string) => Effect.Effect<ReadonlyArray<GrantInfo>, SqlError>
  readonly revokeGrant: (userId: string, grantId: string) => Effect.Effect<boolean, SqlError>
  /** The signing key of new ID tokens (made on first use), and every key verifiers may meet. */
  readonly signingKeys: Effect.Effect<{ current: { kid: string; privateJwk: Record<string, unknown> }; published: ReadonlyArray<Record<string, unknown>> }, SqlError>
  readonly saveSigningKey: (kid: string, privateJwk: Record<string, unknown>, publicJwk: Record<string, unknown>) => Effect.Effect<void, SqlError>
}>()("speech/storage/OAuthStore") {}

export const verifyClientSecret = (client: OAuthClient, secret: string) => {
  if (client.secretHash === undefined) return false
  const presented = secretHash(secret)
  return presented.length === client.secretHash.length && timingSafeEqual(presented, client.secretHash)
}

export interface OAuthStoreOptions {
  /** Access-token lifetime, s. */
  readonly accessTtlS?: number
}

export const oauthStoreLayer = (options: OAuthStoreOptions = {}): Layer.Layer<OAuthStore, never, SqlClient> => Layer.effect(OAuthStore, Effect.gen(function*() {
  const accessTtlS = options.accessTtlS ?? ACCESS_TTL_S
  const sql = yield* SqlClient

  const tokenInfo = (r: { user_id: string; client_id: string; grant_id: string; scopes: string }): TokenInfo =>
    ({ userId: r.user_id, clientId: r.client_id, grantId: r.grant_id, scopes: split(r.scopes) })

  /** `refreshScopes`: the new refresh token's, when it differs from the access token's (a narrowed refresh). */
  const issue = Effect.fn("OAuthStore.issue")(function*(grantId: string, scopes: string, withRefresh: boolean, codeHash?: Uint8Array, family?: string, refreshScopes?: string) {
    const fam = family ?? random("fam_", 12)
    const accessToken = random(ACCESS_PREFIX)
    yield* sql`INSERT INTO oauth_tokens (token_hash, kind, grant_id, family, code_hash, scopes, expires_at)
               VALUES (${secretHash(accessToken)}, 'access', ${grantId}, ${fam}, ${codeHash ?? null}, ${scopes}, now() + make_interval(secs => ${accessTtlS}))`
    let refreshToken: string | undefined
    if (withRefresh) {
      refreshToken = random(REFRESH_PREFIX)
      yield* sql`INSERT INTO oauth_tokens (token_hash, kind, grant_id, family, code_hash, scopes, expires_at)
                 VALUES (${secretHash(refreshToken)}, 'refresh', ${grantId}, ${fam}, ${codeHash ?? null}, ${refreshScopes ?? scopes}, now() + make_interval(secs => ${REFRESH_TTL_S}))`
    }
    return { accessToken, refreshToken, expiresIn: accessTtlS, scopes } satisfies IssuedTokens
  })

  const revokeFamily = (family: string) => sql`UPDATE oauth_tokens SET revoked_at = now() WHERE family = ${family} AND revoked_at IS NULL`

  const sweepUnusedClients = Effect.fn("OAuthStore.sweepUnusedClients")(function*(olderThanS: number = UNUSED_CLIENT_TTL_S) {
    const gone = yield* sql`
      DELETE FROM oauth_clients c
      WHERE c.created_at < now() - make_interval(secs => ${olderThanS})
        AND NOT EXISTS (SELECT 1 FROM oauth_grants g WHERE g.client_id = c.id)
      RETURNING c.id`
    if (gone.length > 0) yield* Effect.logInfo("unused OAuth clients removed", { count: gone.length })
    return gone.length
  })
  yield* Effect.forkScoped(Effect.repeat(
    sweepUnusedClients().pipe(Effect.catchCause((cause) => Effect.logWarning("sweeping unused OAuth clients failed", { reason: String(cause).split("\n", 1)[0] }))),
    Schedule.spaced(SWEEP_EVERY_MS)
  ))

  return OAuthStore.of({
    sweepUnusedClients: (olderThanS) => sweepUnusedClients(olderThanS),
    registerClient: Effect.fn("OAuthStore.registerClient")(function*(c) {
      const clientId = random("cli_", 16)
      const clientSecret = c.authMethod === "none" ? undefined : random("ocs_")
      yield* sql`INSERT INTO oauth_clients (id, secret_hash, name, redirect_uris, auth_method)
                 VALUES (${clientId}, ${clientSecret === undefined ? null : secretHash(clientSecret)}, ${c.name}, ${JSON.stringify(c.redirectUris)}::jsonb, ${c.authMethod})`
      return { clientId, clientSecret }
    }),
    findClient: Effect.fn("OAuthStore.findClient")(function*(clientId) {
      const rows = yield* sql<{ id: string; name: string; redirect_uris: unknown; auth_method: string; secret_hash: Uint8Array | null }>`
        SELECT id, name, redirect_uris, auth_method, secret_hash FROM oauth_clients WHERE id = ${clientId}`
      const r = rows[0]
      return r === undefined ? undefined : {
        clientId: r.id,
        name: r.name,
        redirectUris: jsonbValue(r.redirect_uris) as Array<string>,
        authMethod: r.auth_method,
        secretHash: r.secret_hash === null ? undefined : Buffer.from(r.secret_hash)
      } satisfies OAuthClient
    }),
    liveGrant: Effect.fn("OAuthStore.liveGrant")(function*(userId, clientId) {
      const rows = yield* sql<{ id: string; scopes: string }>`
        SELECT id, scopes FROM oauth_grants WHERE user_id = ${userId} AND client_id = ${clientId} AND revoked_at IS NULL`
      return rows[0] === undefined ? undefined : { grantId: rows[0].id, scopes: split(rows[0].scopes) }
    }),
    consent: Effect.fn("OAuthStore.consent")(function*(userId, clientId, scopes) {
      return yield* sql.withTransaction(Effect.gen(function*() {
        const rows = yield* sql<{ id: string; scopes: string }>`
          SELECT id, scopes FROM oauth_grants WHERE user_id = ${userId} AND client_id = ${clientId} AND revoked_at IS NULL FOR UPDATE`
        const existing = rows[0]
        if (existing === undefined) {
          const id = random("grt_", 12)
          yield* sql`INSERT INTO oauth_grants (id, user_id, client_id, scopes) VALUES (${id}, ${userId}, ${clientId}, ${[...new Set(scopes)].join(" ")})`
          return id
        }
        const merged = [...new Set([...split(existing.scopes), ...scopes])].join(" ")
        yield* sql`UPDATE oauth_grants SET scopes = ${merged} WHERE id = ${existing.id}`
        return existing.id
      }))
    }),
    createCode: Effect.fn("OAuthStore.createCode")(function*(c) {
      const code = random("oac_")
      yield* sql`INSERT INTO oauth_codes (code_hash, grant_id, client_id, redirect_uri, code_challenge, scopes, nonce, expires_at)
                 VALUES (${secretHash(code)}, ${c.grantId}, ${c.clientId}, ${c.redirectUri}, ${c.codeChallenge}, ${c.scopes}, ${c.nonce ?? null}, now() + make_interval(secs => ${CODE_TTL_S}))`
      return code
    }),
    redeemCode: Effect.fn("OAuthStore.redeemCode")(function*(code) {
      const hash = secretHash(code)
      const won = yield* sql<{ grant_id: string; client_id: string; redirect_uri: string; code_challenge: string; scopes: string; nonce: string | null; user_id: string }>`
        UPDATE oauth_codes c SET used_at = now() FROM oauth_grants g
        WHERE c.code_hash = ${hash} AND c.used_at IS NULL AND c.expires_at > now() AND g.id = c.grant_id AND g.revoked_at IS NULL
        RETURNING c.grant_id, c.client_id, c.redirect_uri, c.code_challenge, c.scopes, c.nonce, g.user_id`
      const r = won[0]
      if (r !== undefined) {
        return { _tag: "Ok", code: { grantId: r.grant_id, userId: r.user_id, clientId: r.client_id, redirectUri: r.redirect_uri, codeChallenge: r.code_challenge, scopes: r.scopes, nonce: r.nonce ?? undefined, codeHash: hash } } satisfies Redeemed
      }
      const known = yield* sql`SELECT 1 FROM oauth_codes WHERE code_hash = ${hash}`
      if (known.length === 0) return { _tag: "Unknown" } satisfies Redeemed
      // RFC 6749 4.1.2 / OAuth 2.1: a code used twice revokes what it was exchanged for.
      yield* sql`UPDATE oauth_tokens SET revoked_at = now() WHERE code_hash = ${hash} AND revoked_at IS NULL`
      return { _tag: "Spent" } satisfies Redeemed
    }),
    issue: (grantId, scopes, withRefresh, codeHash) => issue(grantId, scopes, withRefresh, codeHash),
    accessToken: Effect.fn("OAuthStore.accessToken")(function*(token) {
      if (!token.startsWith(ACCESS_PREFIX)) return undefined
      const rows = yield* sql<{ user_id: string; client_id: string; grant_id: string; scopes: string }>`
        SELECT g.user_id, g.client_id, t.grant_id, t.scopes FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id
        WHERE t.token_hash = ${secretHash(token)} AND t.kind = 'access' AND t.revoked_at IS NULL AND t.expires_at > now() AND g.revoked_at IS NULL`
      return rows[0] === undefined ? undefined : tokenInfo(rows[0])
    }),
    refresh: Effect.fn("OAuthStore.refresh")(function*(token, clientId, asked) {
      const hash = secretHash(token)
      if (asked !== undefined) {
        // Checked before the token is spent: a refused scope must not cost the client its chain.
        // A token's scopes never change, so reading them apart from the UPDATE below races nothing.
        const held = yield* sql<{ scopes: string }>`
          SELECT t.scopes FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id
          WHERE t.token_hash = ${hash} AND t.kind = 'refresh' AND g.client_id = ${clientId}`
        if (held[0] !== undefined && !asked.every((x) => split(held[0]!.scopes).includes(x))) return { _tag: "InvalidScope" } satisfies Refreshed
      }
      const won = yield* sql<{ user_id: string; client_id: string; grant_id: string; scopes: string; family: string }>`
        UPDATE oauth_tokens t SET used_at = now() FROM oauth_grants g
        WHERE t.token_hash = ${hash} AND t.kind = 'refresh' AND t.used_at IS NULL AND t.revoked_at IS NULL AND t.expires_at > now()
          AND g.id = t.grant_id AND g.revoked_at IS NULL AND g.client_id = ${clientId}
        RETURNING g.user_id, g.client_id, t.grant_id, t.scopes, t.family`
      const r = won[0]
      if (r !== undefined) {
        // The old access tokens of the family stay valid until they expire; the old refresh token is spent.
        const scopes = asked === undefined ? r.scopes : [...new Set(asked)].join(" ")
        const tokens = yield* issue(r.grant_id, scopes, true, undefined, r.family, r.scopes)
        return { _tag: "Ok", tokens, info: tokenInfo({ ...r, scopes }) } satisfies Refreshed
      }
      const seen = yield* sql<{ family: string; used_at: Date | null; recent: boolean }>`
        SELECT t.family, t.used_at, t.used_at > now() - make_interval(secs => ${REUSE_GRACE_S}) AS recent
        FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id
        WHERE t.token_hash = ${hash} AND t.kind = 'refresh' AND g.client_id = ${clientId}`
      // A client that sent the same refresh twice at once (a retry) loses the race, not the user's
      // sign-in: reuse within a few seconds is refused without revoking the chain.
      if (seen[0]?.recent === true) return { _tag: "Invalid" } satisfies Refreshed
      if (seen[0]?.used_at != null) {
        yield* revokeFamily(seen[0].family)
        return { _tag: "Reused" } satisfies Refreshed
      }
      return { _tag: "Invalid" } satisfies Refreshed
    }),
    revoke: Effect.fn("OAuthStore.revoke")(function*(token, clientId) {
      const rows = yield* sql<{ family: string; kind: string }>`
        SELECT t.family, t.kind FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id
        WHERE t.token_hash = ${secretHash(token)} AND g.client_id = ${clientId}`
      const r = rows[0]
      if (r === undefined) return
      if (r.kind === "refresh") yield* revokeFamily(r.family)
      else yield* sql`UPDATE oauth_tokens SET revoked_at = now() WHERE token_hash = ${secretHash(token)} AND revoked_at IS NULL`
    }),
    grants: Effect.fn("OAuthStore.grants")(function*(userId) {
      const rows = yield* sql<{ id: string; client_id: string; name: string; scopes: string; created_at: Date }>`
        SELECT g.id, g.client_id, c.name, g.scopes, g.created_at FROM oauth_grants g JOIN oauth_clients c ON c.id = g.client_id
        WHERE g.user_id = ${userId} AND g.revoked_at IS NULL ORDER BY g.created_at, g.id`
      return rows.map((r) => ({ grantId: r.id, clientId: r.client_id, clientName: r.name, scopes: split(r.scopes), createdAt: r.created_at }))
    }),
    revokeGrant: Effect.fn("OAuthStore.revokeGrant")(function*(userId, grantId) {
      return yield* sql.withTransaction(Effect.gen(function*() {
        const rows = yield* sql`UPDATE oauth_grants SET revoked_at = now() WHERE id = ${grantId} AND user_id = ${userId} AND revoked_at IS NULL RETURNING 1`
        if (rows.length === 0) return false
        yield* sql`UPDATE oauth_tokens SET revoked_at = now() WHERE grant_id = ${grantId} AND revoked_at IS NULL`
        return true
      }))
    }),
    signingKeys: Effect.gen(function*() {
      const rows = yield* sql<{ kid: string; private_jwk: unknown; public_jwk: unknown; retired_at: Date | null }>`
        SELECT kid, private_jwk, public_jwk, retired_at FROM oauth_signing_keys ORDER BY created_at DESC, kid`
      const current = rows.find((r) => r.retired_at === null)
      return {
        current: current === undefined ? { kid: "", privateJwk: {} } : { kid: current.kid, privateJwk: jsonbValue(current.private_jwk) as Record<string, unknown> },
        published: rows.map((r) => jsonbValue(r.public_jwk) as Record<string, unknown>)
      }
    }),
    saveSigningKey: Effect.fn("OAuthStore.saveSigningKey")(function*(kid, privateJwk, publicJwk) {
      // A newer key retires the older ones (they stay published for verifiers of old ID tokens).
      yield* sql`UPDATE oauth_signing_keys SET retired_at = now() WHERE retired_at IS NULL`
      yield* sql`INSERT INTO oauth_signing_keys (kid, private_jwk, public_jwk) VALUES (${kid}, ${JSON.stringify(privateJwk)}::jsonb, ${JSON.stringify(publicJwk)}::jsonb)`
    })
  })
}))
