/**
 * RFC 7591 registration is anonymous, so it is bounded (issue 38 item 7; an outside probe made
 * 300 clients in 10.5 s, each with ten 2,000-character redirect URIs, all kept): metadata over
 * the size limits is refused with the RFC's errors, the registrations of one address are rate
 * limited (429 with Retry-After), refused registrations do not count, and a real client
 * (openid-client) still registers and completes the code flow. Expiry of unused clients:
 * test/storage/oauthClients.test.ts.
 */
import { Effect } from "effect"
import * as client from "openid-client"
import t from "tap"
import { MAX_CLIENT_NAME_CHARS, MAX_REDIRECT_URI_CHARS, MAX_REDIRECT_URIS, MAX_REGISTRATION_BYTES } from "../../protocol/oauth/ClientRegistration.ts"
import { OAUTH_REGISTRATIONS } from "../../runtime/SiteRoutes.ts"
import { consentedTokens, loopbackCallback } from "../support/oauthFlow.ts"
import { startTestService } from "../support/service.ts"

const service = await startTestService(t, { WORKERS: "1" })
const site = service.siteUrl
const redirectUri = await loopbackCallback(t)

const registerRaw = async (body: string) => {
  const res = await fetch(`${site}/api/auth/mcp/register`, { method: "POST", headers: { "content-type": "application/json" }, body })
  return { status: res.status, retryAfter: res.headers.get("retry-after"), json: await res.json() as { error?: string; error_description?: string; client_id?: string } }
}
const registerWith = (meta: Record<string, unknown>) => registerRaw(JSON.stringify(meta))

t.test("metadata over the limits is refused with RFC 7591 errors", async (t) => {
  const long = `https://app.example/${"a".repeat(MAX_REDIRECT_URI_CHARS)}`
  const cases: Array<[string, string, string]> = [
    [`${MAX_REDIRECT_URIS + 1} redirect URIs`, JSON.stringify({ redirect_uris: Array.from({ length: MAX_REDIRECT_URIS + 1 }, (_, i) => `https://app.example/cb${i}`) }), "invalid_redirect_uri"],
    ["a redirect URI too long", JSON.stringify({ redirect_uris: [long] }), "invalid_redirect_uri"],
    // 20 KB: over the body limit before any URI is looked at.
    ["the probe's ten 2,000-character URIs", JSON.stringify({ redirect_uris: Array.from({ length: 10 }, (_, i) => `https://app.example/${i}${"b".repeat(2000)}`) }), "invalid_client_metadata"],
    ["client_name too long", JSON.stringify({ redirect_uris: [redirectUri], client_name: "n".repeat(MAX_CLIENT_NAME_CHARS + 1) }), "invalid_client_metadata"],
    ["client_name not a string", JSON.stringify({ redirect_uris: [redirectUri], client_name: ["x"] }), "invalid_client_metadata"],
    ["a NUL in client_name", JSON.stringify({ redirect_uris: [redirectUri], client_name: "a\u0000b" }), "invalid_client_metadata"],
    ["a body over the limit", JSON.stringify({ redirect_uris: [redirectUri], logo_uri: "x".repeat(MAX_REGISTRATION_BYTES) }), "invalid_client_metadata"]
  ]
  for (const [what, body, error] of cases) {
    const res = await registerRaw(body)
    t.equal(res.status, 400, what)
    t.equal(res.json.error, error, `${what}: ${error}`)
    t.type(res.json.error_description, "string")
  }
})

t.test("a real client registers and completes the code flow", async (t) => {
  const config = await client.dynamicClientRegistration(new URL(site), { redirect_uris: [redirectUri], client_name: "Real Agent", token_endpoint_auth_method: "none" }, undefined, { execute: [client.allowInsecureRequests] })
  const clientId = config.clientMetadata().client_id
  t.match(clientId, /^cli_/)
  const user = await Effect.runPromise(service.users.createUserWithKey({ name: "ida", credits: 100 }))
  const session = await Effect.runPromise(service.webSessions.start(user.userId))
  const tokens = await consentedTokens(site, { session, clientId, redirectUri, scopes: ["voices"], granted: ["voices"] })
  t.equal((await fetch(`${site}/api/v1/voices`, { headers: { authorization: `Bearer ${tokens.access_token}` } })).status, 200)
})

t.test("registrations of one address are limited: 429 with Retry-After past the burst", async (t) => {
  // The real client above took one; refused registrations took none.
  const statuses: Array<number> = []
  for (let i = 1; i < OAUTH_REGISTRATIONS.burst; i++) statuses.push((await registerWith({ redirect_uris: [redirectUri], client_name: `agent ${i}` })).status)
  t.same(statuses, statuses.map(() => 201), `${OAUTH_REGISTRATIONS.burst} registrations in all are allowed`)
  const over = await registerWith({ redirect_uris: [redirectUri], client_name: "one too many" })
  t.equal(over.status, 429, "the next is refused")
  t.equal(over.json.error, "too_many_requests")
  t.ok(Number(over.retryAfter) >= 1 && Number(over.retryAfter) <= 1 / OAUTH_REGISTRATIONS.perSecond, `Retry-After ${over.retryAfter} s`)
  t.equal((await registerWith({ redirect_uris: ["http://evil.example/cb"] })).status, 400, "an invalid one is still told what is wrong")
})
