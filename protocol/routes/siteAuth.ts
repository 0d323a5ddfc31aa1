/**
 * Signing in and out of the site, and signing up when the operator opened it (SIGNUP=open).
 *
 * - Sign-in checks the e-mail and password (argon2id, storage/Passwords.ts); a wrong e-mail and
 *   a wrong password get the same answer in the same time: both take the same steps in the same
 *   order (the address limit, one lookup, the account limit, one argon2 verify, the failure
 *   counted), an unknown e-mail against a decoy hash of the same parameters made at start-up, and
 *   a hash of older parameters is replaced on its next sign-in so users' hashes cost what the
 *   decoy costs. Limits (token buckets, `SignInLimits`), checked before the password: every
 *   attempt per client address; failed attempts per account, keyed by the account found (so
 *   spellings the database folds together, "İ" and "i", share one bucket), or by the e-mail as
 *   typed when there is none. A success costs the account nothing, so a stranger's failures
 *   slow its owner to one attempt every 12 s but never lock them out for longer.
 * - The sign-in and sign-up forms carry a double-submit CSRF token (a cookie and a field), so
 *   another site cannot sign a browser into an account of its choosing.
 * - A session is a random token in an HttpOnly, SameSite=Lax cookie (Secure on https), stored
 *   hashed (storage/WebSessions.ts). Sign-out ends it; the account page can end all of them.
 */
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import { cookieValue } from "../Authorization.ts"
import type { Reply, RequestContext, Route } from "../Http.ts"
import type { RateLimiter } from "../RateLimiter.ts"
import { clearSessionCookie, LOGIN_CSRF_COOKIE, sessionCookie, setCookie } from "../site/Cookies.ts"
import { contentSecurityPolicy, csrfField, esc, htmlReply, message, page, redirect } from "../site/Html.ts"
import { redirectUriProblem } from "../oauth/OAuthRequests.ts"
import { checkCsrf, readForm, safeNext, signedIn } from "../site/SiteSession.ts"
import { decoyHash, hashPassword, needsRehash, passwordProblem, prepareDecoy, verifyPassword } from "../../storage/Passwords.ts"
import { Users } from "../../storage/Users.ts"
import { WebSessions } from "../../storage/WebSessions.ts"

export interface SignInLimits {
  /** Failed-or-not sign-in attempts per e-mail address. */
  readonly perAccount: RateLimiter
  /** Per client address (many accounts tried from one place). */
  readonly perAddress: RateLimiter
}

export interface SiteAuthOptions {
  readonly secureCookies: boolean
  readonly sessionTtlS: number
  readonly signup: "open" | "closed"
  readonly limits: SignInLimits
  /** Credits of a self-registered user (INITIAL_CREDITS). */
  readonly initialCredits: number
}

const SITE = { auth: "none" as const, tags: ["site"], responses: { 200: { description: "an HTML page" } } }
/** An address without spaces, controls, invisible characters or markup: one look-alike less. */
const EMAIL = /^[^\s@<>"'`\p{C}]{1,64}@[^\s@<>"'`\p{C}]{1,251}\.[^\s@<>"'`\p{C}.]{2,63}$/u

/**
 * Signing in on the way to an OAuth authorization whose grant is remembered ends in a redirect to
 * the client: browsers check that redirect against the sign-in form's CSP form-action, so the
 * client's redirect origin is allowed there. Only an https or loopback origin, and the
 * authorization endpoint still refuses a redirect URI its client did not register.
 */
const returnOrigin = (next: string): Array<string> => {
  if (!next.startsWith("/api/auth/mcp/authorize?")) return []
  const uri = new URLSearchParams(next.slice(next.indexOf("?") + 1)).get("redirect_uri")
  return uri !== null && redirectUriProblem(uri) === undefined ? [new URL(uri).origin] : []
}

/** The sign-in form's token: the cookie's when the browser has one, else a new one to set. */
const loginToken = (ctx: RequestContext) => {
  const existing = cookieValue(ctx.request.headers["cookie"], LOGIN_CSRF_COOKIE)
  return existing !== undefined && /^[A-Za-z0-9_-]{20,64}$/u.test(existing) ? { token: existing, fresh: false } : { token: randomBytes(18).toString("base64url"), fresh: true }
}

export const siteAuthRoutes = (o: SiteAuthOptions): ReadonlyArray<Route<Users | WebSessions>> => {
  // Made now, at start-up, so no sign-in pays for it (storage/Passwords.ts).
  void prepareDecoy()
  const loginCookie = (token: string) => setCookie(LOGIN_CSRF_COOKIE, token, { secure: o.secureCookies, maxAgeS: 3600 })

  const signInPage = (ctx: RequestContext, status: number, problem?: string, email = "") => {
    const { token, fresh } = loginToken(ctx)
    const next = safeNext(ctx.request.query.get("next"))
    const body = `<h1>Sign in</h1>${problem !== undefined ? message("error", problem) : ""}
<form method="post" action="/sign-in?next=${esc(encodeURIComponent(next))}" class="card">${csrfField(token)}
<label for="email">E-mail</label><input id="email" name="email" type="email" autocomplete="username" required value="${esc(email)}">
<label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password" required>
<button type="submit">Sign in</button></form>
${o.signup === "open" ? `<p>No account yet? <a href="/sign-up">Sign up</a>.</p>` : `<p>Accounts are made by the operator of this service.</p>`}`
    return htmlReply(status, page({ title: "Sign in", body }), {
      ...(fresh ? { "set-cookie": loginCookie(token) } : {}),
      "content-security-policy": contentSecurityPolicy(returnOrigin(next))
    })
  }

  const startSession = (userId: string, next: string) =>
    Effect.gen(function*() {
      const session = yield* (yield* WebSessions).start(userId)
      return redirect(next, { "set-cookie": sessionCookie(session.token, { secure: o.secureCookies, maxAgeS: o.sessionTtlS }) })
    })

  const signInPost = (ctx: RequestContext): Effect.Effect<Reply, unknown, Users | WebSessions> =>
    Effect.gen(function*() {
      const form = yield* readForm(ctx)
      yield* checkCsrf(form, cookieValue(ctx.request.headers["cookie"], LOGIN_CSRF_COOKIE))
      const email = (form.get("email") ?? "").trim().slice(0, 320)
      const password = form.get("password") ?? ""
      const byAddress = yield* o.limits.perAddress.take(`addr:${ctx.request.remoteAddress}`)
      const user = byAddress.allowed ? yield* (yield* Users).findByEmail(email) : undefined
      const account = user !== undefined ? `user:${user.userId}` : `email:${email.normalize("NFKC").toLowerCase()}`
      const byAccount = yield* o.limits.perAccount.check(account)
      if (!byAccount.allowed || !byAddress.allowed) {
        const wait = Math.max(byAccount.allowed ? 0 : byAccount.retryAfterS, byAddress.allowed ? 0 : byAddress.retryAfterS)
        return signInPage(ctx, 429, `Too many sign-in attempts. Try again in ${wait} seconds.`, email)
      }
      const phc = user?.passwordHash ?? (yield* decoyHash())
      const ok = (yield* verifyPassword(phc, password.slice(0, 1024))) && user?.passwordHash !== undefined
      if (!ok || user === undefined) {
        yield* o.limits.perAccount.take(account)
        yield* Effect.logInfo("sign-in refused", { address: ctx.request.remoteAddress })
        return signInPage(ctx, 401, "That e-mail and password do not match an account.", email)
      }
      // Only the right password gets here, so this extra work tells nothing about which e-mails exist.
      if (needsRehash(user.passwordHash!)) yield* (yield* Users).setPasswordHash(user.userId, yield* hashPassword(password))
      yield* Effect.logInfo("signed in", { userId: user.userId })
      return yield* startSession(user.userId, safeNext(ctx.request.query.get("next")))
    })

  const signUpPage = (ctx: RequestContext, status: number, problem?: string, email = "") => {
    const { token, fresh } = loginToken(ctx)
    const body = `<h1>Sign up</h1>${problem !== undefined ? message("error", problem) : ""}
<form method="post" action="/sign-up" class="card">${csrfField(token)}
<label for="email">E-mail</label><input id="email" name="email" type="email" autocomplete="username" required value="${esc(email)}">
<label for="password">Password (at least 10 characters)</label><input id="password" name="password" type="password" autocomplete="new-password" required minlength="10">
<button type="submit">Create account</button></form>`
    return htmlReply(status, page({ title: "Sign up", body }), fresh ? { "set-cookie": loginCookie(token) } : {})
  }

  const routes: Array<Route<Users | WebSessions>> = [
    { ...SITE, method: "GET", path: "/sign-in", operationId: "siteSignInPage", summary: "Sign-in page", handler: (ctx) => Effect.sync(() => signInPage(ctx, 200)) },
    { ...SITE, method: "POST", path: "/sign-in", operationId: "siteSignIn", summary: "Sign in", handler: signInPost },
    {
      ...SITE,
      method: "POST",
      path: "/sign-out",
      operationId: "siteSignOut",
      summary: "Sign out of this browser",
      handler: (ctx) =>
        Effect.gen(function*() {
          const form = yield* readForm(ctx)
          const current = yield* signedIn(ctx)
          // Without a session there is nothing to end, and the cookie is left alone: a form on
          // another site (which cannot send the SameSite=Lax cookie) must not sign anyone out.
          if (current === undefined) return redirect("/")
          yield* checkCsrf(form, current.session.csrfToken)
          yield* (yield* WebSessions).end(current.token)
          return redirect("/", { "set-cookie": clearSessionCookie(o.secureCookies) })
        })
    }
  ]
  if (o.signup === "open") {
    routes.push(
      { ...SITE, method: "GET", path: "/sign-up", operationId: "siteSignUpPage", summary: "Sign-up page", handler: (ctx) => Effect.sync(() => signUpPage(ctx, 200)) },
      {
        ...SITE,
        method: "POST",
        path: "/sign-up",
        operationId: "siteSignUp",
        summary: "Create an account",
        handler: (ctx) =>
          Effect.gen(function*() {
            const form = yield* readForm(ctx)
            yield* checkCsrf(form, cookieValue(ctx.request.headers["cookie"], LOGIN_CSRF_COOKIE))
            const email = (form.get("email") ?? "").trim()
            const password = form.get("password") ?? ""
            const byAddress = yield* o.limits.perAddress.take(`addr:${ctx.request.remoteAddress}`)
            if (!byAddress.allowed) return signUpPage(ctx, 429, `Too many attempts. Try again in ${byAddress.retryAfterS} seconds.`, email)
            if (!EMAIL.test(email)) return signUpPage(ctx, 400, "Enter an e-mail address.", email)
            const problem = passwordProblem(password)
            if (problem !== undefined) return signUpPage(ctx, 400, `Choose another password: ${problem}.`, email)
            const created = yield* (yield* Users).createUser({ name: email.split("@")[0]!, email, passwordHash: yield* hashPassword(password), credits: o.initialCredits }).pipe(
              Effect.catchTag("AccountsError", () => Effect.succeed(undefined))
            )
            if (created === undefined) return signUpPage(ctx, 409, "An account with that e-mail exists already: sign in instead.", email)
            yield* Effect.logInfo("signed up", { userId: created.userId })
            return yield* startSession(created.userId, "/developer")
          })
      }
    )
  }
  return routes
}
