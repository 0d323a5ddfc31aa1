/**
 * Checks of OAuth requests, as plain functions: redirect URIs (https, or loopback on any port as
 * RFC 8252 7.3 allows native apps), authorization requests (code + PKCE S256 only), client
 * authentication at the token and revocation endpoints (Basic, post, or none for public
 * clients), and the PKCE verifier. Nothing here touches storage.
 */
import { createHash, timingSafeEqual } from "node:crypto"
import type { OAuthClient } from "../../storage/OAuthStore.ts"
import { verifyClientSecret } from "../../storage/OAuthStore.ts"
import { SCOPE_NAMES } from "./OAuthScopes.ts"

const LOOPBACK = new Set(["127.0.0.1", "[::1]", "localhost"])

/** Why a redirect URI cannot be registered; undefined when it can. */
export const redirectUriProblem = (raw: unknown): string | undefined => {
  if (typeof raw !== "string" || raw.length > 2000) return "a redirect URI is a string of at most 2000 characters"
  // Stored and compared as given, so it must already be in the form browsers will send back.
  if (/[\s\\\p{C}]/u.test(raw)) return "a redirect URI has no spaces, backslashes or control characters"
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return `${JSON.stringify(raw)} is not an absolute URL`
  }
  if (url.hash !== "") return "a redirect URI has no fragment"
  if (url.username !== "" || url.password !== "") return "a redirect URI carries no credentials"
  if (url.protocol === "https:") return undefined
  if (url.protocol === "http:" && LOOPBACK.has(url.hostname)) return undefined
  return `${raw} must be https, or http on a loopback address (127.0.0.1, [::1], localhost)`
}

/** Exact match, except that a loopback URI matches on any port (RFC 8252 7.3). */
export const redirectUriMatches = (registered: ReadonlyArray<string>, presented: string): boolean => {
  if (registered.includes(presented)) return true
  // The loopback port wildcard applies only to URIs registration itself would accept.
  if (redirectUriProblem(presented) !== undefined) return false
  let p: URL
  try {
    p = new URL(presented)
  } catch {
    return false
  }
  if (p.protocol !== "http:" || !LOOPBACK.has(p.hostname)) return false
  return registered.some((r) => {
    const u = new URL(r)
    return u.protocol === "http:" && u.hostname === p.hostname && u.pathname === p.pathname && u.search === p.search
  })
}

export interface AuthorizationRequest {
  readonly client: OAuthClient
  readonly redirectUri: string
  readonly state: string | undefined
  readonly scopes: ReadonlyArray<string>
  readonly codeChallenge: string
  readonly nonce: string | undefined
}

/**
 * `Fatal`: the client or redirect URI is wrong; show the user an error, never redirect (an open
 * redirect otherwise). `Redirect`: tell the client through its redirect URI (RFC 6749 4.1.2.1).
 */
export type AuthorizationCheck =
  | { readonly _tag: "Ok"; readonly request: AuthorizationRequest }
  | { readonly _tag: "Fatal"; readonly message: string }
  | { readonly _tag: "Redirect"; readonly redirectUri: string; readonly state: string | undefined; readonly error: string; readonly description: string }

export const checkAuthorization = (params: URLSearchParams, client: OAuthClient | undefined): AuthorizationCheck => {
  if (client === undefined) return { _tag: "Fatal", message: "This application is not registered here (unknown client_id)." }
  const redirectUri = params.get("redirect_uri") ?? (client.redirectUris.length === 1 ? client.redirectUris[0]! : "")
  if (!redirectUriMatches(client.redirectUris, redirectUri)) {
    return { _tag: "Fatal", message: "The application asked to return to an address it did not register (redirect_uri mismatch)." }
  }
  const state = params.get("state") ?? undefined
  const fail = (error: string, description: string): AuthorizationCheck => ({ _tag: "Redirect", redirectUri, state, error, description })
  if (params.get("response_type") !== "code") return fail("unsupported_response_type", "only response_type=code is supported")
  const challenge = params.get("code_challenge")
  if (challenge === null || challenge === "") return fail("invalid_request", "PKCE is required: send code_challenge with code_challenge_method=S256")
  if (params.get("code_challenge_method") !== "S256") return fail("invalid_request", "only code_challenge_method=S256 is supported (plain is refused)")
  if (!/^[A-Za-z0-9_-]{43}$/u.test(challenge)) return fail("invalid_request", "code_challenge must be the base64url SHA-256 of the verifier (43 characters)")
  const scopes = [...new Set((params.get("scope") ?? "openid").split(" ").filter((s) => s !== ""))]
  if (scopes.length === 0) return fail("invalid_scope", "ask for at least one scope")
  const unknown = scopes.filter((s) => !SCOPE_NAMES.includes(s))
  if (unknown.length > 0) return fail("invalid_scope", `unknown scope ${unknown.join(" ")}; known: ${SCOPE_NAMES.join(" ")}`)
  const nonce = params.get("nonce") ?? undefined
  return { _tag: "Ok", request: { client, redirectUri, state, scopes, codeChallenge: challenge, nonce } }
}

/** The client's redirect URI with the response parameters added (RFC 9207: with `iss`). */
export const redirectWith = (redirectUri: string, params: Record<string, string | undefined>): string => {
  const url = new URL(redirectUri)
  for (const [k, v] of Object.entries(params)) if (v !== undefined) url.searchParams.set(k, v)
  return url.toString()
}

/** RFC 7636 S256: base64url(sha256(verifier)) equals the challenge, in constant time. */
export const pkceMatches = (verifier: string, challenge: string): boolean => {
  if (!/^[A-Za-z0-9._~-]{43,128}$/u.test(verifier)) return false
  const computed = Buffer.from(createHash("sha256").update(verifier, "ascii").digest("base64url"))
  const expected = Buffer.from(challenge)
  return computed.length === expected.length && timingSafeEqual(computed, expected)
}

/** The client id and secret a token or revocation request presents (Basic, or form fields). */
export const presentedClient = (authorization: string | undefined, form: URLSearchParams): { id: string | undefined; secret: string | undefined; basic: boolean } => {
  const basic = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/iu.exec(authorization ?? "")
  // Basic plus a different client_id in the form names two clients: refused (an unknown id).
  const formId = form.get("client_id") ?? undefined
  if (basic !== null) {
    const decoded = Buffer.from(basic[1]!, "base64").toString("utf8")
    const colon = decoded.indexOf(":")
    if (colon > 0) {
      const dec = (s: string) => {
        try {
          return decodeURIComponent(s.replace(/\+/gu, " "))
        } catch {
          return s
        }
      }
      const id = dec(decoded.slice(0, colon))
      return { id: formId !== undefined && formId !== id ? "" : id, secret: dec(decoded.slice(colon + 1)), basic: true }
    }
  }
  if (authorization !== undefined && /^Basic\b/iu.test(authorization)) return { id: "", secret: undefined, basic: true }
  return { id: form.get("client_id") ?? undefined, secret: form.get("client_secret") ?? undefined, basic: false }
}

/**
 * Whether the presented credentials authenticate `client` by its registered method (RFC 6749
 * 2.3: one method per client): a public client sends no secret, a `client_secret_basic` one uses
 * the Authorization header, a `client_secret_post` one the form.
 */
export const clientAuthenticated = (client: OAuthClient, presented: { secret: string | undefined; basic: boolean }): boolean => {
  if (client.authMethod === "none") return presented.secret === undefined
  if (presented.secret === undefined || presented.basic !== (client.authMethod === "client_secret_basic")) return false
  return verifyClientSecret(client, presented.secret)
}
