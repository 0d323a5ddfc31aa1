/**
 * The account page: the e-mail, changing the password (the current one is asked again; other
 * sessions end), signing out everywhere, and the applications connected through OAuth (their
 * grants), each with a button that revokes the grant and every token issued under it.
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
import { type GrantInfo, OAuthStore } from "../../storage/OAuthStore.ts"

const SITE = { auth: "none" as const, tags: ["site"], responses: { 200: { description: "an HTML page" } } }

const accountPage = (s: SignedIn, status: number, note?: { kind: "error" | "notice"; text: string }) =>
  Effect.gen(function*() {
    const grants = yield* (yield* OAuthStore).grants(s.user.userId)
    return renderAccount(s, status, grants, note)
  })

const renderAccount = (s: SignedIn, status: number, grants: ReadonlyArray<GrantInfo>, note?: { kind: "error" | "notice"; text: string }) => {
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
<section class="card" aria-labelledby="apps-h"><h2 id="apps-h">Connected applications</h2>
${grants.length === 0 ? `<p id="grants">No applications are connected to your account.</p>` : `<div class="scroll"><table id="grants"><thead><tr><th scope="col">Application</th><th scope="col">May</th><th scope="col">Since</th><th scope="col"><span class="skip">Actions</span></th></tr></thead><tbody>${grants.map((g) => `<tr><td>${esc(g.clientName)}</td><td>${g.scopes.map((x) => `<code>${esc(x)}</code>`).join(" ")}</td><td>${esc(g.createdAt.toISOString().slice(0, 10))}</td>
<td><form method="post" action="/account/grants/${esc(encodeURIComponent(g.grantId))}/revoke" class="inline">${csrfField(csrf)}<button type="submit" class="danger" aria-label="Revoke access of ${esc(g.clientName)}">Revoke</button></form></td></tr>`).join("")}</tbody></table></div>`}
<p>Revoking stops the application's tokens at once.</p></section>`
  return htmlReply(status, page({ title: "Account", user: { email: s.user.email, name: s.user.name }, csrfToken: csrf, body }))
}

export interface SiteAccountOptions {
  readonly secureCookies: boolean
  /** The sign-in limit's per-account buckets: a wrong current password costs a token too. */
  readonly perAccount: RateLimiter
}

export const siteAccountRoutes = (o: SiteAccountOptions): ReadonlyArray<Route<Users | WebSessions | OAuthStore>> => [
  { ...SITE, method: "GET", path: "/account", operationId: "siteAccount", summary: "Account page", handler: (ctx) => requireSignedIn(ctx, (s) => accountPage(s, 200)) },
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
          const allowed = yield* o.perAccount.check(account)
          if (!allowed.allowed) return yield* accountPage(s, 429, { kind: "error", text: `Too many wrong passwords. Try again in ${allowed.retryAfterS} seconds.` })
          if (record?.passwordHash === undefined || !(yield* verifyPassword(record.passwordHash, current.slice(0, 1024)))) {
            yield* o.perAccount.take(account)
            return yield* accountPage(s, 400, { kind: "error", text: "The current password is wrong." })
          }
          const next = form.get("new") ?? ""
          if (next !== (form.get("confirm") ?? "")) return yield* accountPage(s, 400, { kind: "error", text: "The two new passwords differ." })
          const problem = passwordProblem(next)
          if (problem !== undefined) return yield* accountPage(s, 400, { kind: "error", text: `Choose another password: ${problem}.` })
          yield* users.setPasswordHash(s.user.userId, yield* hashPassword(next))
          const ended = yield* (yield* WebSessions).endAll(s.user.userId, s.token)
          yield* Effect.logInfo("password changed", { userId: s.user.userId, sessionsEnded: ended })
          return yield* accountPage(s, 200, { kind: "notice", text: `Password changed. ${ended} other sign-in${ended === 1 ? " was" : "s were"} ended.` })
        }))
  },
  {
    ...SITE,
    method: "POST",
    path: "/account/grants/{grant_id}/revoke",
    operationId: "siteRevokeGrant",
    summary: "Withdraw an application's access",
    handler: (ctx) =>
      requireSignedIn(ctx, (s) =>
        Effect.gen(function*() {
          const form = yield* readForm(ctx)
          yield* checkCsrf(form, s.session.csrfToken)
          const revoked = yield* (yield* OAuthStore).revokeGrant(s.user.userId, ctx.params.grant_id!)
          if (!revoked) return yield* accountPage(s, 404, { kind: "error", text: "No such connected application (it may have been revoked already)." })
          yield* Effect.logInfo("OAuth grant revoked", { userId: s.user.userId, grantId: ctx.params.grant_id })
          return yield* accountPage(s, 200, { kind: "notice", text: "Access withdrawn: the application's tokens stopped working." })
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
