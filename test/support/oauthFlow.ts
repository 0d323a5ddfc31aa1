/**
 * OAuth in tests without a browser: a loopback redirect target, a public client registered over
 * HTTP, and tokens got by answering the consent form as a signed-in session would (the tests that
 * need the pages themselves drive chromium instead).
 */
import { createHash } from "node:crypto"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import type { NewWebSession } from "../../storage/WebSessions.ts"

/** A loopback listener that answers "ok" (an OAuth client's redirect target); its URI. */
export const loopbackCallback = async (t: { teardown: (fn: () => unknown) => void }, path = "/callback"): Promise<string> => {
  const callback = http.createServer((_req, res) => res.end("ok"))
  await new Promise<void>((r) => callback.listen(0, "127.0.0.1", r))
  t.teardown(() => callback.close())
  return `http://127.0.0.1:${(callback.address() as AddressInfo).port}${path}`
}

export const registerPublicClient = async (site: string, redirectUri: string): Promise<string> => {
  const res = await fetch(`${site}/api/auth/mcp/register`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ redirect_uris: [redirectUri], token_endpoint_auth_method: "none" }) })
  return ((await res.json()) as { client_id: string }).client_id
}

export interface TokenAnswer {
  readonly access_token: string
  readonly refresh_token: string
  readonly expires_in: number
  readonly scope: string
}

/** The token endpoint with a form; its JSON answer. */
export const tokenRequest = (site: string, fields: Record<string, string>) =>
  fetch(`${site}/api/auth/mcp/token`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: new URLSearchParams(fields) })
    .then((r) => r.json() as Promise<TokenAnswer>)

/** Asks for `scopes`, allows `granted` on the consent form as `session`, exchanges the code. */
export const consentedTokens = async (
  site: string,
  o: { session: NewWebSession; clientId: string; redirectUri: string; scopes: ReadonlyArray<string>; granted: ReadonlyArray<string> }
): Promise<TokenAnswer> => {
  const verifier = "v".repeat(43)
  const body = new URLSearchParams({
    response_type: "code",
    client_id: o.clientId,
    redirect_uri: o.redirectUri,
    scope: o.scopes.join(" "),
    code_challenge: createHash("sha256").update(verifier).digest("base64url"),
    code_challenge_method: "S256",
    decision: "allow",
    csrf: o.session.csrfToken
  })
  for (const g of o.granted) body.append("grant", g)
  const consent = await fetch(`${site}/api/auth/mcp/authorize`, { method: "POST", redirect: "manual", headers: { cookie: `svc_session=${o.session.token}`, "content-type": "application/x-www-form-urlencoded" }, body })
  const code = new URL(consent.headers.get("location")!).searchParams.get("code")!
  return tokenRequest(site, { grant_type: "authorization_code", code, redirect_uri: o.redirectUri, client_id: o.clientId, code_verifier: verifier })
}
