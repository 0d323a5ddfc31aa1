/**
 * The site's cookies. The session cookie is HttpOnly (no script reads it), SameSite=Lax (other
 * sites' POSTs do not carry it), Path=/ and Secure when the site is served over https.
 * `svc_login_csrf` is the double-submit token of the sign-in and sign-up forms, which have no
 * session yet to hold a token.
 */
import { SESSION_COOKIE } from "../Authorization.ts"

export const LOGIN_CSRF_COOKIE = "svc_login_csrf"

export interface CookieOptions {
  readonly secure: boolean
  /** Seconds; 0 deletes the cookie. */
  readonly maxAgeS: number
}

export const setCookie = (name: string, value: string, o: CookieOptions): string =>
  `${name}=${value}; Path=/; HttpOnly; SameSite=Lax; Max-Age=${Math.max(0, Math.floor(o.maxAgeS))}${o.secure ? "; Secure" : ""}`

export const sessionCookie = (token: string, o: CookieOptions) => setCookie(SESSION_COOKIE, token, o)
export const clearSessionCookie = (secure: boolean) => setCookie(SESSION_COOKIE, "", { secure, maxAgeS: 0 })
