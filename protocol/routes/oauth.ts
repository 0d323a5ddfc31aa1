/**
 * The OAuth 2.1 authorization server at the paths of SPEC 5 (built on `jose` and the RFCs, not a
 * framework: see the README for why): RFC 8414 metadata (and OIDC discovery), RFC 7591 dynamic
 * registration, the authorization endpoint with the consent page, the token endpoint
 * (authorization_code with PKCE S256, refresh_token with rotation), userinfo, RFC 7009 revocation
 * and the JWKS. Storage: storage/OAuthStore.ts; request checks: protocol/oauth/OAuthRequests.ts.
 */
import { Effect } from "effect"
import { type Reply, Reply as R, type RequestContext, type Route } from "../Http.ts"
import { SCOPES, SCOPE_NAMES } from "../oauth/OAuthScopes.ts"
import { publishedKeys, signIdToken } from "../oauth/IdTokens.ts"
import { checkRegistration, MAX_REGISTRATION_BYTES } from "../oauth/ClientRegistration.ts"
import { checkAuthorization, clientAuthenticated, pkceMatches, presentedClient, redirectWith } from "../oauth/OAuthRequests.ts"
import type { RateLimiter } from "../RateLimiter.ts"
import { bearerToken } from "../Authorization.ts"
import { contentSecurityPolicy, csrfField, esc, htmlReply, message, page, redirect } from "../site/Html.ts"
import { checkCsrf, readForm, signedIn } from "../site/SiteSession.ts"
import { OAuthStore } from "../../storage/OAuthStore.ts"
import { Users } from "../../storage/Users.ts"
import type { WebSessions } from "../../storage/WebSessions.ts"

export const AUTH_BASE = "/api/auth/mcp"
const NO_STORE = { "cache-control": "no-store", pragma: "no-cache" }
const DOC = { tags: ["oauth"], responses: { 200: { description: "see RFC" } } }

const oauthError = (status: number, error: string, description: string, headers: Record<string, string> = {}): Reply =>
  R.json(status, { error, error_description: description }, { ...NO_STORE, ...headers })

export interface OAuthRouteOptions {
  readonly siteUrl: () => string
  /** Client registrations per client address (shared by every instance on the database). */
  readonly registrationLimiter: RateLimiter
}

export const oauthRoutes = (o: OAuthRouteOptions): ReadonlyArray<Route<OAuthStore | Users | WebSessions>> => {
  const endpoint = (name: string) => `${o.siteUrl()}${AUTH_BASE}/${name}`
  const metadata = () => ({
    issuer: o.siteUrl(),
    authorization_endpoint: endpoint("authorize"),
    token_endpoint: endpoint("token"),
    registration_endpoint: endpoint("register"),
    revocation_endpoint: endpoint("revoke"),
    userinfo_endpoint: endpoint("userinfo"),
    jwks_uri: endpoint("jwks"),
    scopes_supported: SCOPE_NAMES,
    response_types_supported: ["code"],
    response_modes_supported: ["query"],
    grant_types_supported: ["authorization_code", "refresh_token"],
    code_challenge_methods_supported: ["S256"],
    token_endpoint_auth_methods_supported: ["none", "client_secret_basic", "client_secret_post"],
    revocation_endpoint_auth_methods_supported: ["none", "client_secret_basic", "client_secret_post"],
    id_token_signing_alg_values_supported: ["ES256"],
    subject_types_supported: ["public"],
    claims_supported: ["sub", "iss", "aud", "exp", "iat", "nonce", "email", "name"],
    authorization_response_iss_parameter_supported: true
  })

  /** The consent page: who asks, where it returns, what it may do. */
  const consentPage = (ctx: RequestContext, csrf: string, user: { email: string | undefined; name: string }, req: ReturnType<typeof checkAuthorization> & { _tag: "Ok" }) => {
    const r = req.request
    const hidden = ["client_id", "redirect_uri", "state", "scope", "code_challenge", "code_challenge_method", "nonce", "response_type"]
      .map((k) => [k, ctx.request.query.get(k)] as const)
      .filter(([, v]) => v !== null)
      .map(([k, v]) => `<input type="hidden" name="${k}" value="${esc(v)}">`).join("")
    const body = `<h1>Allow ${esc(r.client.name)}?</h1>
<section class="card"><p><strong>${esc(r.client.name)}</strong> wants to use your account. After you answer, you go back to <strong id="redirect-host">${esc(new URL(r.redirectUri).host)}</strong>.</p>
<form method="post" action="${AUTH_BASE}/authorize">${csrfField(csrf)}${hidden}
<fieldset><legend>It asks to (untick what you do not want to allow):</legend><ul id="scopes">${r.scopes.map((s) => `<li><input type="checkbox" name="grant" value="${esc(s)}" id="grant-${esc(s)}" checked> <label for="grant-${esc(s)}" class="inline"><code>${esc(s)}</code>: ${esc(SCOPES[s] ?? s)}</label></li>`).join("")}</ul></fieldset>
<button type="submit" name="decision" value="allow">Allow</button><button type="submit" name="decision" value="deny" class="secondary">Deny</button></form>
<p>You can withdraw this later on your <a href="/account">account page</a>.</p></section>`
    return htmlReply(200, page({ title: "Allow access", user, csrfToken: csrf, body }), { "content-security-policy": contentSecurityPolicy([new URL(r.redirectUri).origin]) })
  }

  const errorPage = (status: number, text: string) =>
    htmlReply(status, page({ title: "Authorization failed", body: `<h1>Authorization failed</h1>${message("error", text)}` }))

  /** Issues a code for an allowed request and sends the browser back to the client. */
  const approve = (userId: string, req: ReturnType<typeof checkAuthorization> & { _tag: "Ok" }, granted: ReadonlyArray<string>) =>
    Effect.gen(function*() {
      const store = yield* OAuthStore
      const r = req.request
      const grantId = yield* store.consent(userId, r.client.clientId, granted)
      const code = yield* store.createCode({ grantId, clientId: r.client.clientId, redirectUri: r.redirectUri, codeChallenge: r.codeChallenge, scopes: granted.join(" "), nonce: r.nonce })
      return redirect(redirectWith(r.redirectUri, { code, state: r.state, iss: o.siteUrl() }))
    })

  const authorize = (ctx: RequestContext, params: URLSearchParams, decision: string | undefined, form: URLSearchParams | undefined) =>
    Effect.gen(function*() {
      const store = yield* OAuthStore
      const client = yield* store.findClient(params.get("client_id") ?? "")
      const check = checkAuthorization(params, client)
      if (check._tag === "Fatal") return errorPage(400, check.message)
      if (check._tag === "Redirect") return redirect(redirectWith(check.redirectUri, { error: check.error, error_description: check.description, state: check.state, iss: o.siteUrl() }))
      const s = yield* signedIn(ctx)
      if (s === undefined) return redirect(`/sign-in?next=${encodeURIComponent(`${AUTH_BASE}/authorize?${params}`)}`)
      const user = { email: s.user.email, name: s.user.name }
      if (form !== undefined) {
        yield* checkCsrf(form, s.session.csrfToken)
        if (decision === "deny") {
          return redirect(redirectWith(check.request.redirectUri, { error: "access_denied", error_description: "the user denied access", state: check.request.state, iss: o.siteUrl() }))
        }
        // The user may untick scopes; the code carries only what was left ticked.
        const granted = check.request.scopes.filter((x) => form.getAll("grant").includes(x))
        if (decision === "allow" && granted.length === 0) {
          return redirect(redirectWith(check.request.redirectUri, { error: "access_denied", error_description: "the user allowed no scope", state: check.request.state, iss: o.siteUrl() }))
        }
        if (decision === "allow") return yield* approve(s.user.userId, check, granted)
      }
      // A grant remembered from an earlier consent that covers every scope asked: no page.
      const remembered = yield* store.liveGrant(s.user.userId, check.request.client.clientId)
      if (remembered !== undefined && check.request.scopes.every((x) => remembered.scopes.includes(x))) return yield* approve(s.user.userId, check, check.request.scopes)
      return consentPage(ctx, s.session.csrfToken, user, check)
    })

  /** The client of a token or revocation request, authenticated by its registered method. */
  const authenticatedClient = (ctx: RequestContext, form: URLSearchParams) =>
    Effect.gen(function*() {
      const presented = presentedClient(ctx.request.headers["authorization"], form)
      const client = presented.id === undefined ? undefined : yield* (yield* OAuthStore).findClient(presented.id)
      return client !== undefined && clientAuthenticated(client, presented) ? client : undefined
    })

  const invalidClient = oauthError(401, "invalid_client", "client authentication failed", { "www-authenticate": "Basic realm=\"oauth\"" })

  const formOrError = (ctx: RequestContext) =>
    readForm(ctx).pipe(Effect.map((f) => ({ form: f })), Effect.catch(() => Effect.succeed({ form: undefined })))

  const tokenResponse = (tokens: { accessToken: string; refreshToken: string | undefined; expiresIn: number; scopes: string }, idToken: string | undefined) =>
    R.json(200, {
      access_token: tokens.accessToken,
      token_type: "Bearer",
      expires_in: tokens.expiresIn,
      scope: tokens.scopes,
      ...(tokens.refreshToken !== undefined ? { refresh_token: tokens.refreshToken } : {}),
      ...(idToken !== undefined ? { id_token: idToken } : {})
    }, NO_STORE)

  const idTokenFor = (userId: string, clientId: string, scopes: ReadonlyArray<string>, nonce: string | undefined) =>
    Effect.gen(function*() {
      if (!scopes.includes("openid")) return undefined
      const user = yield* (yield* Users).getUser(userId)
      return yield* signIdToken({
        issuer: o.siteUrl(),
        subject: userId,
        audience: clientId,
        nonce,
        extra: { ...(scopes.includes("email") && user.email !== undefined ? { email: user.email } : {}), ...(scopes.includes("profile") ? { name: user.name } : {}) }
      })
    })

  const token = (ctx: RequestContext) =>
    Effect.gen(function*() {
      const { form } = yield* formOrError(ctx)
      if (form === undefined) return oauthError(400, "invalid_request", "send the token request as application/x-www-form-urlencoded")
      const client = yield* authenticatedClient(ctx, form)
      if (client === undefined) return invalidClient
      const store = yield* OAuthStore
      const grantType = form.get("grant_type")
      if (grantType === "authorization_code") {
        const redeemed = yield* store.redeemCode(form.get("code") ?? "")
        if (redeemed._tag !== "Ok") return oauthError(400, "invalid_grant", redeemed._tag === "Spent" ? "the code was used already or expired; tokens issued from it are revoked" : "unknown code")
        const c = redeemed.code
        if (c.clientId !== client.clientId) return oauthError(400, "invalid_grant", "the code was issued to another client")
        if (form.get("redirect_uri") !== c.redirectUri) return oauthError(400, "invalid_grant", "redirect_uri differs from the authorization request's")
        if (!pkceMatches(form.get("code_verifier") ?? "", c.codeChallenge)) return oauthError(400, "invalid_grant", "code_verifier does not match the code_challenge")
        const scopes = c.scopes.split(" ")
        const tokens = yield* store.issue(c.grantId, c.scopes, scopes.includes("offline_access"), c.codeHash)
        return tokenResponse(tokens, yield* idTokenFor(c.userId, client.clientId, scopes, c.nonce))
      }
      if (grantType === "refresh_token") {
        // RFC 6749 6: a `scope` may narrow the new access token, never widen it.
        const asked = form.get("scope")
        const scopes = asked === null ? undefined : asked.split(" ").filter((x) => x !== "")
        if (scopes !== undefined && scopes.length === 0) return oauthError(400, "invalid_scope", "scope is empty: leave it out to keep the granted scope")
        const refreshed = yield* store.refresh(form.get("refresh_token") ?? "", client.clientId, scopes)
        if (refreshed._tag === "InvalidScope") return oauthError(400, "invalid_scope", "the scope asked is wider than the refresh token's")
        if (refreshed._tag === "Reused") return oauthError(400, "invalid_grant", "this refresh token was used already: every token of its chain is revoked")
        if (refreshed._tag === "Invalid") return oauthError(400, "invalid_grant", "unknown, expired or revoked refresh token")
        return tokenResponse(refreshed.tokens, yield* idTokenFor(refreshed.info.userId, client.clientId, refreshed.info.scopes, undefined))
      }
      return oauthError(400, "unsupported_grant_type", "grant_type is authorization_code or refresh_token")
    })

  /**
   * RFC 7591. Anonymous, so bounded (ClientRegistration.ts) and limited per address; only a
   * registration that would be stored takes from the limit, a refused one costs nothing.
   */
  const register = (ctx: RequestContext) =>
    Effect.gen(function*() {
      const read = yield* Effect.result(ctx.body.bytes(MAX_REGISTRATION_BYTES))
      if (read._tag === "Failure") {
        if (read.failure.status !== 413) return yield* Effect.fail(read.failure)
        return oauthError(400, "invalid_client_metadata", `the registration body is over ${MAX_REGISTRATION_BYTES} bytes`)
      }
      const checked = checkRegistration(new TextDecoder().decode(read.success))
      if (checked._tag === "Refused") return oauthError(400, checked.error, checked.description)
      const decision = yield* o.registrationLimiter.take(`addr:${ctx.request.remoteAddress}`)
      if (!decision.allowed) {
        yield* Effect.logInfo("OAuth registration refused: rate limit", { address: ctx.request.remoteAddress })
        const { perSecond, burst } = o.registrationLimiter.options
        return oauthError(429, "too_many_requests", `at most ${burst} registrations from one address, then one every ${Math.round(1 / perSecond)} s; retry in ${decision.retryAfterS} s`, { "retry-after": String(decision.retryAfterS) })
      }
      const { name, redirectUris, authMethod } = checked
      const made = yield* (yield* OAuthStore).registerClient({ name, redirectUris, authMethod })
      yield* Effect.logInfo("OAuth client registered", { clientId: made.clientId, name })
      return R.json(201, {
        client_id: made.clientId,
        ...(made.clientSecret !== undefined ? { client_secret: made.clientSecret, client_secret_expires_at: 0 } : {}),
        client_id_issued_at: Math.floor(Date.now() / 1000),
        client_name: name,
        redirect_uris: redirectUris,
        token_endpoint_auth_method: authMethod,
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"]
      }, NO_STORE)
    })

  return [
    { ...DOC, method: "GET", path: "/.well-known/oauth-authorization-server", auth: "none", operationId: "oauthMetadata", summary: "RFC 8414 metadata", handler: () => Effect.sync(() => R.json(200, metadata())) },
    { ...DOC, method: "GET", path: "/.well-known/openid-configuration", auth: "none", operationId: "oidcDiscovery", summary: "OpenID discovery", handler: () => Effect.sync(() => R.json(200, metadata())) },
    { ...DOC, method: "POST", path: `${AUTH_BASE}/register`, auth: "none", operationId: "oauthRegister", summary: "RFC 7591 dynamic client registration", handler: register },
    { ...DOC, method: "GET", path: `${AUTH_BASE}/authorize`, auth: "none", operationId: "oauthAuthorize", summary: "Authorization endpoint (consent page)", handler: (ctx) => authorize(ctx, ctx.request.query, undefined, undefined) },
    {
      ...DOC,
      method: "POST",
      path: `${AUTH_BASE}/authorize`,
      auth: "none",
      operationId: "oauthConsent",
      summary: "The consent form's answer",
      handler: (ctx) => Effect.flatMap(readForm(ctx), (form) => authorize(ctx, form, form.get("decision") ?? undefined, form))
    },
    { ...DOC, method: "POST", path: `${AUTH_BASE}/token`, auth: "none", operationId: "oauthToken", summary: "Token endpoint", handler: token },
    {
      ...DOC,
      method: "POST",
      path: `${AUTH_BASE}/revoke`,
      auth: "none",
      operationId: "oauthRevoke",
      summary: "RFC 7009 revocation",
      handler: (ctx) =>
        Effect.gen(function*() {
          const { form } = yield* formOrError(ctx)
          if (form === undefined) return oauthError(400, "invalid_request", "send the revocation request as application/x-www-form-urlencoded")
          const client = yield* authenticatedClient(ctx, form)
          if (client === undefined) return invalidClient
          yield* (yield* OAuthStore).revoke(form.get("token") ?? "", client.clientId)
          // RFC 7009 2.2: 200 whether or not the token was known.
          return R.bytes(200, "", NO_STORE)
        })
    },
    {
      ...DOC,
      method: "GET",
      path: `${AUTH_BASE}/userinfo`,
      auth: "none",
      operationId: "oauthUserinfo",
      summary: "OpenID userinfo",
      handler: (ctx) =>
        Effect.gen(function*() {
          const info = yield* (yield* OAuthStore).accessToken(bearerToken(ctx.request.headers["authorization"]) ?? "")
          if (info === undefined) return oauthError(401, "invalid_token", "a valid access token is required", { "www-authenticate": "Bearer error=\"invalid_token\"" })
          if (!info.scopes.includes("openid")) return oauthError(403, "insufficient_scope", "userinfo needs the openid scope", { "www-authenticate": "Bearer error=\"insufficient_scope\", scope=\"openid\"" })
          const user = yield* (yield* Users).getUser(info.userId)
          return R.json(200, {
            sub: user.userId,
            ...(info.scopes.includes("email") && user.email !== undefined ? { email: user.email } : {}),
            ...(info.scopes.includes("profile") ? { name: user.name } : {})
          }, NO_STORE)
        })
    },
    { ...DOC, method: "GET", path: `${AUTH_BASE}/jwks`, auth: "none", operationId: "oauthJwks", summary: "ID-token signing keys", handler: () => Effect.map(publishedKeys, (keys) => R.json(200, { keys })) }
  ]
}
