/**
 * Two RFC details of the token side (issue 38 item 11): a 401 for a bearer token that is
 * refused (revoked, expired, unknown) says `error="invalid_token"` in its challenge (RFC 6750
 * 3.1), while a request without any credential gets the bare challenge; and a refresh-token
 * grant asking for a narrower `scope` gets exactly that scope on its access token, a wider one
 * is `invalid_scope` and leaves the refresh token usable (RFC 6749 6).
 */
import { Effect } from "effect"
import * as http from "node:http"
import t from "tap"
import { consentedTokens, loopbackCallback, registerPublicClient, tokenRequest } from "../support/oauthFlow.ts"
import { startTestService } from "../support/service.ts"

const service = await startTestService(t, { WORKERS: "1" })
const site = service.siteUrl
const user = await Effect.runPromise(service.users.createUserWithKey({ name: "gil", credits: 100 }))
const redirectUri = await loopbackCallback(t)
const clientId = await registerPublicClient(site, redirectUri)
const session = await Effect.runPromise(service.webSessions.start(user.userId))
const tokensFor = (scopes: ReadonlyArray<string>) => consentedTokens(site, { session, clientId, redirectUri, scopes, granted: scopes })
const voices = (headers: Record<string, string>) => fetch(`${site}/api/v1/voices`, { headers })

/** A WebSocket upgrade of stream-input with `authorization`; the refusal's status and challenge. */
const upgrade = (authorization: string) =>
  new Promise<{ status: number; challenge: string | undefined }>((resolve, reject) => {
    const req = http.request(`${site}/api/v1/text-to-speech/mari/stream-input`, {
      headers: { connection: "Upgrade", upgrade: "websocket", "sec-websocket-version": "13", "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==", authorization }
    })
    req.on("response", (res) => {
      res.resume()
      resolve({ status: res.statusCode ?? 0, challenge: res.headers["www-authenticate"] as string | undefined })
    })
    req.on("upgrade", (_res, socket) => {
      socket.destroy()
      reject(new Error("upgraded with a refused token"))
    })
    req.on("error", reject)
    req.end()
  })

t.test("401 challenges: invalid_token for a refused bearer token, the bare challenge without one", async (t) => {
  const issued = await tokensFor(["voices"])
  t.equal((await voices({ authorization: `Bearer ${issued.access_token}` })).status, 200)
  const revoke = await fetch(`${site}/api/auth/mcp/revoke`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: new URLSearchParams({ token: issued.access_token, client_id: clientId }) })
  t.equal(revoke.status, 200)
  const revoked = await voices({ authorization: `Bearer ${issued.access_token}` })
  t.equal(revoked.status, 401, "revoked")
  t.match(revoked.headers.get("www-authenticate"), /^Bearer error="invalid_token", error_description="[^"]+", resource_metadata="[^"]+"$/, "RFC 6750 3.1")
  const unknown = await voices({ authorization: "Bearer oat_nothing" })
  t.equal(unknown.status, 401)
  t.match(unknown.headers.get("www-authenticate"), /error="invalid_token"/, "an unknown token too")
  const socket = await upgrade(`Bearer ${issued.access_token}`)
  t.equal(socket.status, 401, "a WebSocket upgrade with the revoked token")
  t.match(socket.challenge, /^Bearer error="invalid_token"/, "says invalid_token too")
  const none = await fetch(`${site}/api/v1/user/subscription`)
  t.equal(none.status, 401)
  t.notMatch(none.headers.get("www-authenticate"), /error=/, "no credential: no error code (RFC 6750 3.1)")
  t.match(none.headers.get("www-authenticate"), /^Bearer resource_metadata="/)
})

t.test("refresh with a narrower scope gets it; a wider one is invalid_scope and spends nothing", async (t) => {
  const issued = await tokensFor(["voices", "tts", "offline_access"])
  t.equal(issued.scope, "voices tts offline_access")
  const refresh = (refreshToken: string, scope?: string) =>
    tokenRequest(site, { grant_type: "refresh_token", refresh_token: refreshToken, client_id: clientId, ...(scope === undefined ? {} : { scope }) })

  const wider = await refresh(issued.refresh_token, "voices tts summary") as unknown as { error?: string }
  t.equal(wider.error, "invalid_scope", "wider than granted")

  const narrow = await refresh(issued.refresh_token, "voices")
  t.equal(narrow.scope, "voices", "the narrower scope, as asked (the wider ask did not spend the token)")
  t.equal((await voices({ authorization: `Bearer ${narrow.access_token}` })).status, 200, "voices allowed")
  const tts = await fetch(`${service.base}/text-to-speech/mari`, { method: "POST", headers: { authorization: `Bearer ${narrow.access_token}`, "content-type": "application/json" }, body: JSON.stringify({ text: "Tere." }) })
  t.equal(tts.status, 403, "tts dropped from the narrowed access token")

  // The new refresh token keeps the original scope (RFC 6749 6), so the client may widen back.
  const back = await refresh(narrow.refresh_token)
  t.equal(back.scope, "voices tts offline_access", "omitted scope: the refresh token's own")
})
