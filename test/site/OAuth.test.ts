/**
 * The OAuth 2.1 authorization server against a client written by others (`openid-client` v6):
 * discovery, dynamic registration, the PKCE code flow with the sign-in and consent pages driven
 * in Debian's chromium, the ID token (verified by openid-client against our JWKS), userinfo,
 * refresh with rotation, revocation; the access token on the API with and without each scope,
 * and the account page's revoke button. Then the attacks: PKCE missing / plain / wrong verifier,
 * code replay, redirect mismatch (no open redirect), refresh-token reuse, a token of user A on
 * user B's voice, consent denied, a consent form without its CSRF token, a revoked token.
 */
import { Effect } from "effect"
import * as fs from "node:fs"
import * as client from "openid-client"
import { chromium, type Page } from "playwright-core"
import t from "tap"
import { hashPassword } from "../../storage/Passwords.ts"
import { LIBRIVOX_WAV } from "../support/librivoxSpeech.ts"
import { consentedTokens, loopbackCallback, registerPublicClient, tokenRequest } from "../support/oauthFlow.ts"
import { startTestService } from "../support/service.ts"

const service = await startTestService(t, { WORKERS: "1" })
const site = service.siteUrl
const password = "oauth test password"
const makeUser = async (email: string) =>
  Effect.runPromise(service.users.createUserWithKey({ name: email.split("@")[0]!, email, passwordHash: await Effect.runPromise(hashPassword(password)), credits: 100_000 }))
const ann = await makeUser("ann@example.com")
const ben = await makeUser("ben@example.com")

// The client's redirect target: a loopback listener that just says "ok".
const redirectUri = await loopbackCallback(t)

const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"] })
t.teardown(() => browser.close())

const insecure = { execute: [client.allowInsecureRequests] }
const register = (auth: "none" | "client_secret_basic" = "none") =>
  client.dynamicClientRegistration(new URL(site), { redirect_uris: [redirectUri], client_name: "Test Agent <b>", token_endpoint_auth_method: auth }, undefined, insecure)

/** Signs `page` in (when asked) and answers the consent page; the URL the browser ended on. */
const authorizeInBrowser = async (page: Page, url: URL, decision: "Allow" | "Deny" | undefined) => {
  await page.goto(url.href)
  if (page.url().includes("/sign-in")) {
    await page.getByLabel("E-mail").fill("ann@example.com")
    await page.getByLabel("Password").fill(password)
    await page.getByRole("button", { name: "Sign in" }).click()
    await page.waitForLoadState()
  }
  if (decision !== undefined) {
    await page.getByRole("button", { name: decision }).click()
  }
  await page.waitForURL(/127\.0\.0\.1:\d+\/callback/u)
  return new URL(page.url())
}

const bearer = (token: string, path: string, init: RequestInit = {}) =>
  fetch(`${site}/api/v1${path}`, { ...init, headers: { ...(init.headers as Record<string, string> ?? {}), authorization: `Bearer ${token}` } })

t.test("openid-client: discovery, registration, PKCE code flow through sign-in and consent, ID token, userinfo, refresh, revocation", async (t) => {
  const config = await register()
  t.match(config.serverMetadata(), { issuer: site, code_challenge_methods_supported: ["S256"] })
  const { client_id } = config.clientMetadata()
  t.match(client_id, /^cli_/u)
  t.equal(config.clientMetadata().client_secret, undefined, "a public client gets no secret")

  const verifier = client.randomPKCECodeVerifier()
  const state = client.randomState()
  const nonce = client.randomNonce()
  const url = client.buildAuthorizationUrl(config, {
    redirect_uri: redirectUri,
    scope: "openid email profile offline_access voices",
    code_challenge: await client.calculatePKCECodeChallenge(verifier),
    code_challenge_method: "S256",
    state,
    nonce
  })
  const context = await browser.newContext()
  t.teardown(() => context.close())
  const page = await context.newPage()
  await page.goto(url.href)
  t.match(page.url(), /\/sign-in\?next=/u, "signed out: sent to sign in first")
  await page.getByLabel("E-mail").fill("ann@example.com")
  await page.getByLabel("Password").fill(password)
  await page.getByRole("button", { name: "Sign in" }).click()
  await page.waitForSelector("#scopes")
  t.match(await page.locator("h1").textContent(), /Allow Test Agent <b>\?/u, "the client's name, as text")
  t.equal(await page.locator("#redirect-host").textContent(), new URL(redirectUri).host)
  t.match(await page.locator("#scopes").textContent(), /offline_access[\s\S]*voices/u)
  await page.getByRole("button", { name: "Allow" }).click()
  await page.waitForURL(/\/callback/u)
  const back = new URL(page.url())
  t.equal(back.searchParams.get("iss"), site, "RFC 9207 iss")

  const tokens = await client.authorizationCodeGrant(config, back, { pkceCodeVerifier: verifier, expectedState: state, expectedNonce: nonce })
  t.match(tokens.access_token, /^oat_/u)
  t.equal(tokens.token_type.toLowerCase(), "bearer")
  t.equal(tokens.expires_in, 3600)
  t.ok(tokens.refresh_token, "offline_access: a refresh token")
  const claims = tokens.claims()!
  t.equal(claims.sub, ann.userId)
  t.equal(claims.email, "ann@example.com")
  const info = await client.fetchUserInfo(config, tokens.access_token, ann.userId)
  t.same({ sub: info.sub, email: info.email, name: info.name }, { sub: ann.userId, email: "ann@example.com", name: "ann" })

  // Scopes on the API: voices granted, tts not.
  t.equal((await bearer(tokens.access_token, "/voices")).status, 200)
  const tts = await bearer(tokens.access_token, "/text-to-speech/mari", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ text: "tere" }) })
  t.equal(tts.status, 403)
  t.equal(tts.headers.get("www-authenticate"), "Bearer error=\"insufficient_scope\", scope=\"tts\"")

  // A second authorization of the same scopes skips the consent page (the grant is remembered).
  const again = client.buildAuthorizationUrl(config, { redirect_uri: redirectUri, scope: "openid voices", code_challenge: await client.calculatePKCECodeChallenge(verifier), code_challenge_method: "S256", state })
  t.ok((await authorizeInBrowser(page, again, undefined)).searchParams.get("code"), "no second consent")
  const signedOut = await browser.newContext()
  t.teardown(() => signedOut.close())
  t.ok((await authorizeInBrowser(await signedOut.newPage(), again, undefined)).searchParams.get("code"), "signed out: sign in, then straight back to the client")

  // Refresh rotates; the old refresh token presented again revokes the whole chain.
  const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token!)
  t.not(refreshed.refresh_token, tokens.refresh_token)
  t.equal((await bearer(refreshed.access_token, "/voices")).status, 200)
  const race = await client.refreshTokenGrant(config, tokens.refresh_token!).then(() => "accepted", (e: unknown) => (e as { error?: string }).error)
  t.equal(race, "invalid_grant", "a rotated refresh token is refused")
  t.equal((await bearer(refreshed.access_token, "/voices")).status, 200, "at once (a client's retry racing itself) the chain survives")
  await new Promise((r) => setTimeout(r, 2200))
  const reuse = await client.refreshTokenGrant(config, tokens.refresh_token!).then(() => "accepted", (e: unknown) => (e as { error?: string }).error)
  t.equal(reuse, "invalid_grant", "later, a rotated refresh token is theft")
  t.equal((await bearer(refreshed.access_token, "/voices")).status, 401, "and its chain is revoked")
  t.equal((await client.refreshTokenGrant(config, refreshed.refresh_token!).then(() => "accepted", (e: unknown) => (e as { error?: string }).error)), "invalid_grant")

  // RFC 7009 revocation.
  const fresh = await client.authorizationCodeGrant(config, await authorizeInBrowser(page, again, undefined), { pkceCodeVerifier: verifier, expectedState: state })
  t.equal((await bearer(fresh.access_token, "/voices")).status, 200)
  await client.tokenRevocation(config, fresh.access_token)
  t.equal((await bearer(fresh.access_token, "/voices")).status, 401, "revoked at once")

  // The account page lists the grant; revoking it stops every token of it.
  const last = await client.authorizationCodeGrant(config, await authorizeInBrowser(page, again, undefined), { pkceCodeVerifier: verifier, expectedState: state })
  await page.goto(`${site}/account`)
  t.match(await page.locator("#grants").textContent(), /Test Agent <b>/u)
  await page.getByRole("button", { name: /Revoke access of Test Agent/u }).click()
  await page.waitForSelector("[role=status]")
  t.equal((await bearer(last.access_token, "/voices")).status, 401, "the revoked grant's token stops")
})

t.test("attacks: PKCE, code replay, redirect mismatch, consent denied and CSRF, another user's voice, client secrets", async (t) => {
  const config = await register()
  const { client_id } = config.clientMetadata()
  const session = await Effect.runPromise(service.webSessions.start(ann.userId))
  const cookie = `svc_session=${session.token}`
  const authorize = (params: Record<string, string>) =>
    fetch(`${site}/api/auth/mcp/authorize?${new URLSearchParams({ response_type: "code", client_id, redirect_uri: redirectUri, state: "s1", scope: "voices", ...params })}`, { headers: { cookie }, redirect: "manual" })
  const verifier = client.randomPKCECodeVerifier()
  const challenge = await client.calculatePKCECodeChallenge(verifier)
  const errorOf = async (res: Response) => new URL(res.headers.get("location")!).searchParams.get("error")

  t.equal(await errorOf(await authorize({})), "invalid_request", "no code_challenge")
  t.equal(await errorOf(await authorize({ code_challenge: verifier, code_challenge_method: "plain" })), "invalid_request", "plain refused")
  const mismatch = await authorize({ code_challenge: challenge, code_challenge_method: "S256", redirect_uri: "https://evil.example/callback" })
  t.equal(mismatch.status, 400, "an unregistered redirect URI is an error page")
  t.equal(mismatch.headers.get("location"), null, "never a redirect to it")
  t.equal((await authorize({ code_challenge: challenge, code_challenge_method: "S256", client_id: "cli_unknown" })).status, 400)
  t.equal(await errorOf(await authorize({ code_challenge: challenge, code_challenge_method: "S256", scope: "voices admin" })), "invalid_scope")

  // The consent form: a POST without the session's CSRF token is refused; deny answers access_denied.
  const consent = (fields: Record<string, string>) =>
    fetch(`${site}/api/auth/mcp/authorize`, {
      method: "POST",
      redirect: "manual",
      headers: { cookie, "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ response_type: "code", client_id, redirect_uri: redirectUri, state: "s1", scope: "voices", code_challenge: challenge, code_challenge_method: "S256", grant: "voices", ...fields })
    })
  t.equal((await consent({ decision: "allow" })).status, 403, "no CSRF token")
  t.equal((await consent({ decision: "allow", csrf: "forged" })).status, 403)
  const denied = await consent({ decision: "deny", csrf: session.csrfToken })
  t.equal(await errorOf(denied), "access_denied")
  t.equal(new URL(denied.headers.get("location")!).searchParams.get("state"), "s1")
  t.equal(await errorOf(await consent({ decision: "allow", csrf: session.csrfToken, grant: "" })), "access_denied", "every scope unticked")
  const allowed = await consent({ decision: "allow", csrf: session.csrfToken })
  const code = new URL(allowed.headers.get("location")!).searchParams.get("code")!
  t.match(code, /^oac_/u)

  const exchange = (fields: Record<string, string>) =>
    fetch(`${site}/api/auth/mcp/token`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: new URLSearchParams({ grant_type: "authorization_code", client_id, redirect_uri: redirectUri, ...fields }) })
  const wrong = await exchange({ code, code_verifier: client.randomPKCECodeVerifier() })
  t.equal(wrong.status, 400)
  t.equal(((await wrong.json()) as { error: string }).error, "invalid_grant", "wrong verifier")
  t.equal(((await (await exchange({ code, code_verifier: verifier })).json()) as { error: string }).error, "invalid_grant", "the code died with the failed attempt")

  const second = new URL((await consent({ decision: "allow", csrf: session.csrfToken })).headers.get("location")!).searchParams.get("code")!
  const ok = await exchange({ code: second, code_verifier: verifier })
  const issued = (await ok.json()) as { access_token: string; refresh_token?: string; id_token?: string }
  t.equal(ok.headers.get("cache-control"), "no-store")
  t.equal(issued.refresh_token, undefined, "no offline_access, no refresh token")
  t.equal(issued.id_token, undefined, "no openid, no ID token")
  t.equal((await bearer(issued.access_token, "/voices")).status, 200)
  const replay = await exchange({ code: second, code_verifier: verifier })
  t.equal(((await replay.json()) as { error: string }).error, "invalid_grant", "a code works once")
  t.equal((await bearer(issued.access_token, "/voices")).status, 401, "and its replay revokes what it gave")

  // Ann's token on Ben's clone: not found, as for anyone else.
  const form = new FormData()
  form.append("name", "Ben's voice")
  form.append("files", new Blob([fs.readFileSync(LIBRIVOX_WAV)], { type: "audio/wav" }), "s.wav")
  const benClone = (await (await fetch(`${site}/api/v1/voices/add`, { method: "POST", headers: { "xi-api-key": ben.apiKey }, body: form })).json()) as { voice_id: string }
  const third = new URL((await consent({ decision: "allow", csrf: session.csrfToken })).headers.get("location")!).searchParams.get("code")!
  const annToken = ((await (await exchange({ code: third, code_verifier: verifier })).json()) as { access_token: string }).access_token
  t.equal((await bearer(annToken, `/voices/${benClone.voice_id}`)).status, 404)
  t.equal((await bearer(`oat_${"x".repeat(43)}`, "/voices")).status, 401, "a forged token")

  // A confidential client must authenticate; its secret is stored hashed and checked.
  const confidential = await register("client_secret_basic")
  const secret = confidential.clientMetadata().client_secret as string
  t.match(secret, /^ocs_/u)
  const tokenAs = (authorization: string) =>
    fetch(`${site}/api/auth/mcp/token`, { method: "POST", headers: { authorization, "content-type": "application/x-www-form-urlencoded" }, body: "grant_type=refresh_token&refresh_token=ort_x" })
  const id = confidential.clientMetadata().client_id
  t.equal((await tokenAs(`Basic ${Buffer.from(`${id}:wrong`).toString("base64")}`)).status, 401)
  t.equal(((await (await tokenAs(`Basic ${Buffer.from(`${id}:${secret}`).toString("base64")}`)).json()) as { error: string }).error, "invalid_grant", "authenticated, then the grant is checked")

  // The registered method only: a Basic client sending its secret in the form, Basic naming another id.
  const viaForm = await fetch(`${site}/api/auth/mcp/token`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: new URLSearchParams({ grant_type: "refresh_token", refresh_token: "ort_x", client_id: id, client_secret: secret }) })
  t.equal(viaForm.status, 401, "client_secret_basic means the header")
  const twoIds = await fetch(`${site}/api/auth/mcp/token`, { method: "POST", headers: { authorization: `Basic ${Buffer.from(`${id}:${secret}`).toString("base64")}`, "content-type": "application/x-www-form-urlencoded" }, body: `grant_type=refresh_token&refresh_token=ort_x&client_id=${client_id}` })
  t.equal(twoIds.status, 401, "Basic and a different client_id")
  t.equal(await errorOf(await authorize({ code_challenge: challenge, code_challenge_method: "S256", scope: " " })), "invalid_scope", "an empty scope")
  const sneaky = await authorize({ code_challenge: challenge, code_challenge_method: "S256", redirect_uri: redirectUri.replace("http://", "http://evil@") })
  t.equal(sneaky.status, 400, "loopback with a user part is not the registered URI")
  t.equal((await authorize({ code_challenge: challenge, code_challenge_method: "S256", redirect_uri: `${redirectUri}#frag` })).status, 400)

  // Registration refuses redirect URIs that are neither https nor loopback.
  const bad = await fetch(`${site}/api/auth/mcp/register`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ redirect_uris: ["http://evil.example/cb"] }) })
  t.equal(bad.status, 400)
  t.equal(((await bad.json()) as { error: string }).error, "invalid_redirect_uri")
  t.equal((await fetch(`${site}/api/auth/mcp/register`, { method: "POST", body: "[1]" })).status, 400)
  for (const uri of ["https://evil.com\\@good.com/cb", " https://good.com/cb", "https://good.com/cb\n"]) {
    const odd = await fetch(`${site}/api/auth/mcp/register`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ redirect_uris: [uri] }) })
    t.equal(odd.status, 400, JSON.stringify(uri))
  }
})

t.test("every API route that takes a credential declares its OAuth scope (except /user, which reads the caller)", async (t) => {
  const doc = (await (await fetch(`${site}/api/v1/openapi.json`)).json()) as { paths: Record<string, Record<string, { security?: Array<Record<string, Array<string>>> }>> }
  const missing: Array<string> = []
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const bearer = op.security?.find((s) => "BearerAuth" in s)
      if (bearer === undefined || path.startsWith("/api/v1/user")) continue
      if (bearer.BearerAuth!.length !== 1) missing.push(`${method.toUpperCase()} ${path}`)
    }
  }
  t.same(missing, [], "routes without a scope")
  const meta = (await (await fetch(`${site}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>
  const resource = (await (await fetch(`${site}/.well-known/oauth-protected-resource`)).json()) as Record<string, unknown>
  t.same(resource.authorization_servers, [meta.issuer], "RFC 9728 and RFC 8414 agree")
  t.same([...(resource.scopes_supported as Array<string>)].sort(), [...(meta.scopes_supported as Array<string>)].sort())
  t.same(await (await fetch(`${site}/.well-known/openid-configuration`)).json(), meta)
  const jwks = (await (await fetch(`${site}/api/auth/mcp/jwks`)).json()) as { keys: Array<Record<string, unknown>> }
  t.ok(jwks.keys.length >= 1 && jwks.keys.every((k) => k.kty === "EC" && k.d === undefined), "public keys only")
})

t.test("an access token past its lifetime is refused; its refresh token still works", async (t) => {
  const short = await startTestService(t, { WORKERS: "1", OAUTH_ACCESS_TTL_S: "1" })
  const user = await Effect.runPromise(short.users.createUserWithKey({ name: "fay", credits: 100 }))
  const clientId = await registerPublicClient(short.siteUrl, redirectUri)
  const session = await Effect.runPromise(short.webSessions.start(user.userId))
  const scopes = ["voices", "offline_access"]
  const issued = await consentedTokens(short.siteUrl, { session, clientId, redirectUri, scopes, granted: scopes })
  t.equal(issued.expires_in, 1)
  const use = (access: string) => fetch(`${short.siteUrl}/api/v1/voices`, { headers: { authorization: `Bearer ${access}` } }).then((r) => r.status)
  t.equal(await use(issued.access_token), 200)
  await new Promise((r) => setTimeout(r, 1500))
  t.equal(await use(issued.access_token), 401, "expired")
  const renewed = await tokenRequest(short.siteUrl, { grant_type: "refresh_token", refresh_token: issued.refresh_token, client_id: clientId })
  t.equal(await use(renewed.access_token), 200, "a refreshed token works")
})
