/**
 * RFC 7591 dynamic client registration: the metadata a client sends, checked and bounded, as a
 * plain function (the route in routes/oauth.ts stores the result and limits the rate).
 *
 * Registration is anonymous (MCP clients register themselves), so everything it stores is
 * bounded here: the body, the number and length of redirect URIs, and the name. The bounds are
 * far above what real clients send (one or two redirect URIs under 100 characters, a short
 * name) and refuse, rather than truncate, what is over them, so a client learns its metadata
 * was not taken as sent (RFC 7591 3.2.2: `invalid_client_metadata`, `invalid_redirect_uri`).
 */
import { parseJson } from "../decode.ts"
import { redirectUriProblem } from "./OAuthRequests.ts"

/** Bytes of one registration request. */
export const MAX_REGISTRATION_BYTES = 8 * 1024
/** Redirect URIs of one client. */
export const MAX_REDIRECT_URIS = 5
/** Characters of one redirect URI (the authorization endpoint compares them as stored). */
export const MAX_REDIRECT_URI_CHARS = 512
/** Characters of `client_name` (shown on the consent page and the account page). */
export const MAX_CLIENT_NAME_CHARS = 100

export const AUTH_METHODS = ["none", "client_secret_basic", "client_secret_post"] as const

export type Registration =
  | { readonly _tag: "Ok"; readonly name: string; readonly redirectUris: ReadonlyArray<string>; readonly authMethod: string }
  | { readonly _tag: "Refused"; readonly error: "invalid_client_metadata" | "invalid_redirect_uri"; readonly description: string }

const refused = (error: "invalid_client_metadata" | "invalid_redirect_uri", description: string): Registration => ({ _tag: "Refused", error, description })

/** The registration body's text (already within MAX_REGISTRATION_BYTES) checked into what is stored. */
export const checkRegistration = (text: string): Registration => {
  const parsed = parseJson(text)
  if (!parsed.ok) return refused("invalid_client_metadata", `the body must be a JSON object of client metadata (RFC 7591): ${parsed.message}`)
  const meta = parsed.value
  if (typeof meta !== "object" || meta === null || Array.isArray(meta)) return refused("invalid_client_metadata", "the body must be a JSON object of client metadata (RFC 7591)")
  const m = meta as Record<string, unknown>
  const uris = m.redirect_uris
  if (!Array.isArray(uris) || uris.length === 0 || uris.length > MAX_REDIRECT_URIS) {
    return refused("invalid_redirect_uri", `redirect_uris: one to ${MAX_REDIRECT_URIS} URIs`)
  }
  for (const u of uris) {
    if (typeof u === "string" && u.length > MAX_REDIRECT_URI_CHARS) return refused("invalid_redirect_uri", `a redirect URI has at most ${MAX_REDIRECT_URI_CHARS} characters`)
    const problem = redirectUriProblem(u)
    if (problem !== undefined) return refused("invalid_redirect_uri", problem)
  }
  const method = m.token_endpoint_auth_method ?? "client_secret_basic"
  if (typeof method !== "string" || !(AUTH_METHODS as ReadonlyArray<string>).includes(method)) {
    return refused("invalid_client_metadata", `token_endpoint_auth_method is ${AUTH_METHODS.join(", ")}`)
  }
  const rawName = m.client_name
  if (rawName !== undefined && rawName !== null && typeof rawName !== "string") return refused("invalid_client_metadata", "client_name is a string")
  const name = typeof rawName === "string" ? rawName.trim() : ""
  if (name.length > MAX_CLIENT_NAME_CHARS) return refused("invalid_client_metadata", `client_name has at most ${MAX_CLIENT_NAME_CHARS} characters`)
  return { _tag: "Ok", name: name === "" ? "Unnamed application" : name, redirectUris: [...new Set(uris as Array<string>)], authMethod: method }
}
