/**
 * Route authorisation: which credential a route needs, where a client may present one, and the
 * 401 answers (bodies and the WWW-Authenticate challenge). The bridges in runtime/ (HTTP requests,
 * WebSocket upgrades) copy headers out of uWS and call this; they decide nothing about auth.
 *
 * A route declares `auth` (Http.ts `Route`): "key" (a credential is required), "optional"
 * (anonymous allowed, a presented credential must be valid) or "none" (credentials are not
 * looked at). `scope` is for OAuth: a route that names one refuses principals without it (403).
 * No route names one yet; API keys carry every scope (storage/ApiKeys.ts `apiKeyScopes`).
 */
import { Effect } from "effect"
import { timingSafeEqual } from "node:crypto"
import type { Principal } from "../storage/ApiKeys.ts"
import { ApiError, badRequest, unauthorized } from "./ApiError.ts"

/** Who may call a route: a credential required ("key"), optional (anonymous allowed), or none looked at. */
export type AuthMode = "key" | "optional" | "none"

/** What authorisation reads of a route. */
export interface RouteAccess {
  readonly auth: AuthMode
  /** An OAuth scope the principal must hold; absent: any authenticated principal. */
  readonly scope?: string
}

/** Resolves a presented credential (API key or access token) to its principal. */
export type Authenticate = (credential: string) => Effect.Effect<Principal, unknown>

/** The site's session cookie (protocol/site/Cookies.ts sets it). */
export const SESSION_COOKIE = "svc_session"

/** A signed-in browser: who, and the token its state-changing requests must echo. */
export interface BrowserSession {
  readonly principal: Principal
  readonly csrfToken: string
}

/** Resolves a session cookie's token; undefined when unknown, ended or expired. */
export type AuthenticateSession = (token: string) => Effect.Effect<BrowserSession | undefined, unknown>

/** The value of cookie `name` in a Cookie header, if present. */
export const cookieValue = (header: string | undefined, name: string): string | undefined => {
  if (header === undefined) return undefined
  for (const part of header.split(";")) {
    const eq = part.indexOf("=")
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim()
  }
  return undefined
}

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"])

/** Constant-time comparison of a presented token with the expected one. */
export const sameSecret = (presented: string | undefined, expected: string) => {
  if (presented === undefined) return false
  const a = Buffer.from(presented)
  const b = Buffer.from(expected)
  return a.length === b.length && timingSafeEqual(a, b)
}

/**
 * A browser's session cookie as the credential of an API call (the playground, clone previews).
 * The cookie is SameSite=Lax, so other sites cannot send it with a POST; a state-changing call
 * must also carry the session's CSRF token in `x-csrf-token`, so a page that could (a sibling
 * subdomain) still cannot act for the user. Unknown or expired sessions count as no credential.
 */
const sessionPrincipal = (
  method: string,
  headers: Readonly<Record<string, string>>,
  authenticateSession: AuthenticateSession | undefined
): Effect.Effect<Principal | null, unknown> => {
  const token = authenticateSession === undefined ? undefined : cookieValue(headers["cookie"], SESSION_COOKIE)
  if (token === undefined || authenticateSession === undefined) return anonymous
  return Effect.flatMap(authenticateSession(token), (session) => {
    if (session === undefined) return anonymous
    if (!SAFE_METHODS.has(method.toUpperCase()) && !sameSecret(headers["x-csrf-token"], session.csrfToken)) {
      return Effect.fail(new ApiError({ status: 403, code: "csrf_failed", message: "a signed-in browser's request must carry the page's CSRF token in x-csrf-token" }))
    }
    return Effect.succeed(session.principal)
  })
}

/** The token of an `Authorization: Bearer <token>` value. */
export const bearerToken = (auth: string | undefined): string | undefined =>
  auth === undefined ? undefined : /^Bearer\s+(\S+)\s*$/i.exec(auth)?.[1]

/** Pulls the credential from `xi-api-key` or `Authorization: Bearer` (lower-cased header names). */
export const presentedCredential = (headers: Readonly<Record<string, string>>): string | undefined => {
  const key = headers["xi-api-key"]
  if (key !== undefined && key.length > 0) return key.trim()
  return bearerToken(headers["authorization"])
}

/**
 * Both credential headers naming different keys: refused like a repeated one (400), rather than
 * silently using one of them (a proxy's Basic authorization is not a second credential).
 */
export const conflictingCredentials = (headers: Readonly<Record<string, string>>): ApiError | undefined => {
  const key = headers["xi-api-key"]?.trim()
  const bearer = key === undefined ? undefined : bearerToken(headers["authorization"])
  return key !== undefined && key !== "" && bearer !== undefined && bearer !== key
    ? badRequest("xi-api-key and Authorization: Bearer name different credentials; send one", "invalid_request")
    : undefined
}

/** Credential headers: sent twice, they are refused (the bridge sees repeats while copying headers). */
export const isCredentialHeader = (name: string): boolean => name === "xi-api-key" || name === "authorization"

/** The 401 for a request that presented no credential where one is required. */
export const credentialRequired = () =>
  unauthorized(
  "an API key is required: send it in the xi-api-key header or as Authorization: Bearer",
  "needs_authorization"
)

/** The same for a WebSocket upgrade, which may also carry the key in the query. */
export const socketCredentialRequired = () =>
  unauthorized(
  "an API key is required: send it in the xi-api-key header, as Authorization: Bearer, or as the xi_api_key query parameter (a browser: a single-use token as the token query parameter)",
  "needs_authorization"
)

/**
 * The WWW-Authenticate value of every 401 (SPEC 7: it points at the protected-resource metadata
 * when the site's URL is known). `tokenRefused`: the request carried a bearer token and it was
 * refused (unknown, revoked, expired), which RFC 6750 3.1 says as `error="invalid_token"`, so
 * a client knows to refresh or authorize again rather than that it forgot the header.
 */
export const authenticateChallenge = (resourceMetadataUrl: string | undefined, tokenRefused = false): string => {
  const params = [
    ...(tokenRefused ? ["error=\"invalid_token\"", "error_description=\"the access token is unknown, revoked or expired\""] : []),
    ...(resourceMetadataUrl === undefined ? [] : [`resource_metadata="${resourceMetadataUrl}"`])
  ]
  return params.length === 0 ? "Bearer" : `Bearer ${params.join(", ")}`
}

const anonymous = Effect.succeed(null)

/** 403 with the RFC 6750 challenge naming the scope to ask for. */
export const insufficientScope = (scope: string) =>
  new ApiError({
    status: 403,
    code: "insufficient_scope",
    message: `this credential lacks the "${scope}" scope`,
    headers: { "www-authenticate": `Bearer error="insufficient_scope", scope="${scope}"` }
  })

/**
 * The principal a request acts as (null: anonymous), or the refusal. A credential that is
 * presented but wrong is refused even on optional routes: silently treating it as anonymous would
 * hide a client's mistake.
 */
export const authorizeRoute = (
  route: RouteAccess,
  headers: Readonly<Record<string, string>>,
  authenticate: Authenticate,
  method = "GET",
  authenticateSession?: AuthenticateSession
): Effect.Effect<Principal | null, unknown> => {
  if (route.auth === "none") return anonymous
  const credential = presentedCredential(headers)
  const principal = credential !== undefined
    ? authenticate(credential)
    : Effect.flatMap(sessionPrincipal(method, headers, authenticateSession), (p) =>
      p !== null || route.auth === "optional" ? Effect.succeed(p) : Effect.fail(credentialRequired()))
  const scope = route.scope
  if (scope === undefined) return principal
  return Effect.flatMap(principal, (p) => (p === null || p.scopes.includes(scope) ? Effect.succeed(p) : Effect.fail(insufficientScope(scope))))
}
