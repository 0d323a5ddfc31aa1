/**
 * The account page: the e-mail, changing the password (the current one is asked again; other
 * sessions end), signing out everywhere, and the applications connected through OAuth (filled
 * by the OAuth issue; none can connect yet, so the list is empty and says so).
 */
import { Effect } from "effect"
import type { Route } from "../Http.ts"
import type { RateLimiter } from "../RateLimiter.ts"
import { clearSessionCookie } from "../site/Cookies.ts"
import { csrfField, esc, htmlReply, message, page, redirect } from "../site/Html.ts"
import { checkCsrf, readForm, requireSignedIn, type SignedIn } from "../site/SiteSession.ts"
import { hashPassword, passwordProblem, verifyPassword } from "../../storage/Passwords.ts"
import { Users } from "../../storage/Users.ts"
import { WebSessions } from "../../storage/WebSessions.ts"

const SITE = { auth: "none" as const, tags: ["site"], responses: { 200: { description: "an HTML page" } } }

const accountPage = (s: SignedIn, status: number, note?: { kind: "error" | "notice"; text: string }) => {
  const csrf = s.session.csrfToken
  const body = `<h1>Account</h1>${note !== undefined ? message(note.kind, note.text) : ""}
<section class="card" aria-labelledby="me-h"><h2 id="me-h">You</h2><p>E-mail: <strong id="account-email">${esc(s.user.email ?? "(none)")}</strong></p>
<p>Signed in until ${esc(s.session.expiresAt.toISOString().replace("T", " ").slice(0, 16))} UTC.</p></section>
<section class="card" aria-labelledby="pw-h"><h2 id="pw-h">Change password</h2>
<form method="post" action="/account/password">${csrfField(csrf)}
<label for="current">Current password</label><input id="current" name="current" type="password" autocomplete="current-password" required>
<label for="new">New password (at least 10 characters)</label><input id="new" name="new" type="password" autocomplete="new-password" required minlength="10">
<label for="confirm">New password again</label><input id="confirm" name="confirm" type="password" autocomplete="new-password" required minlength="10">
<button type="submit">Change password</button></form><p>Changing it signs out every other browser.</p></section>
<section class="card" aria-labelledby="out-h"><h2 id="out-h">Sign out everywhere</h2>
<form method="post" action="/account/sign-out-everywhere">${csrfField(csrf)}<button type="submit" class="danger">Sign out of every browser</button></form></section>
<section class="card" aria-labelledby="apps-h"><h2 id="apps-h">Connected applications</h2><p id="grants">No applications are connected to your account.</p></section>`
  return htmlReply(status, page({ title: "Account", user: { email: s.user.email, name: s.user.name }, csrfToken: csrf, body }))
}

export interface SiteAccountOptions {
  readonly secureCookies: boolean
  /** The sign-in limit's per-account buckets: a wrong current password costs a token too. */
  readonly perAccount: RateLimiter
}

export const siteAccountRoutes = (o: SiteAccountOptions): ReadonlyArray<Route<Users | WebSessions>> => [
  { ...SITE, method: "GET", path: "/account", operationId: "siteAccount", summary: "Account page", handler: (ctx) => requireSignedIn(ctx, (s) => Effect.succeed(accountPage(s, 200))) },
  {
    ...SITE,
    method: "POST",
    path: "/account/password",
    operationId: "siteChangePassword",
    summary: "Change the password",
    handler: (ctx) =>
      requireSignedIn(ctx, (s) =>
        Effect.gen(function*() {
          const form = yield* readForm(ctx)
          yield* checkCsrf(form, s.session.csrfToken)
          const users = yield* Users
          const record = s.user.email === undefined ? undefined : yield* users.findByEmail(s.user.email)
          const current = form.get("current") ?? ""
          // A stolen session must not become a password-guessing oracle: the same budget as sign-in.
          const account = `user:${s.user.userId}`
          const allowed = o.perAccount.check(account)
          if (!allowed.allowed) return accountPage(s, 429, { kind: "error", text: `Too many wrong passwords. Try again in ${allowed.retryAfterS} seconds.` })
          if (record?.passwordHash === undefined || !(yield* verifyPassword(record.passwordHash, current.slice(0, 1024)))) {
            o.perAccount.take(account)
            return accountPage(s, 400, { kind: "error", text: "The current password is wrong." })
          }
          const next = form.get("new") ?? ""
          if (next !== (form.get("confirm") ?? "")) return accountPage(s, 400, { kind: "error", text: "The two new passwords differ." })
          const problem = passwordProblem(next)
          if (problem !== undefined) return accountPage(s, 400, { kind: "error", text: `Choose another password: ${problem}.` })
          yield* users.setPasswordHash(s.user.userId, yield* hashPassword(next))
          const ended = yield* (yield* WebSessions).endAll(s.user.userId, s.token)
          yield* Effect.logInfo("password changed", { userId: s.user.userId, sessionsEnded: ended })
          return accountPage(s, 200, { kind: "notice", text: `Password changed. ${ended} other sign-in${ended === 1 ? " was" : "s were"} ended.` })
        }))
  },
  {
    ...SITE,
    method: "POST",
    path: "/account/sign-out-everywhere",
    operationId: "siteSignOutEverywhere",
    summary: "End every session of the user",
    handler: (ctx) =>
      requireSignedIn(ctx, (s) =>
        Effect.gen(function*() {
          const form = yield* readForm(ctx)
          yield* checkCsrf(form, s.session.csrfToken)
          yield* (yield* WebSessions).endAll(s.user.userId)
          return redirect("/sign-in", { "set-cookie": clearSessionCookie(o.secureCookies) })
        }))
  }
]
