/**
 * Who is signed in on a page request, and the checks of the site's forms: the session from the
 * cookie (with its user), form bodies (`application/x-www-form-urlencoded`), and the CSRF token
 * every state-changing form carries (the session's own; before sign-in the double-submit
 * cookie's). A page that needs a user sends a signed-out browser to sign in and back.
 */
import { Effect } from "effect"
import { cookieValue, sameSecret, SESSION_COOKIE } from "../Authorization.ts"
import { ApiError } from "../ApiError.ts"
import type { Reply, RequestContext } from "../Http.ts"
import { type User, Users } from "../../storage/Users.ts"
import { type WebSession, WebSessions } from "../../storage/WebSessions.ts"
import { redirect } from "./Html.ts"

export interface SignedIn {
  readonly user: User
  readonly session: WebSession
  readonly token: string
}

/** The signed-in user of this request, or undefined. */
export const signedIn = (ctx: RequestContext) =>
  Effect.gen(function*() {
    const token = cookieValue(ctx.request.headers["cookie"], SESSION_COOKIE)
    if (token === undefined) return undefined
    const session = yield* (yield* WebSessions).find(token)
    if (session === undefined) return undefined
    const user = yield* (yield* Users).getUser(session.userId).pipe(Effect.catchTag("AccountsError", () => Effect.succeed(undefined)))
    return user === undefined ? undefined : ({ user, session, token } satisfies SignedIn)
  })

/** A relative path on this site to return to after sign-in; anything else becomes /developer. */
export const safeNext = (next: string | null | undefined): string =>
  next !== null && next !== undefined && /^\/(?![/\\])[\x21-\x7e]*$/u.test(next) ? next : "/developer"

/** Signed in, or the redirect to sign in and come back. */
export const requireSignedIn = <E, R>(ctx: RequestContext, then: (s: SignedIn) => Effect.Effect<Reply, E, R>) =>
  Effect.flatMap(signedIn(ctx), (s): Effect.Effect<Reply, E, R> =>
    s === undefined
      ? Effect.succeed(redirect(`/sign-in?next=${encodeURIComponent(ctx.request.path + (ctx.request.query.size > 0 ? `?${ctx.request.query}` : ""))}`))
      : then(s))

/** Most bytes of a form body: e-mail, passwords, a key name. */
const MAX_FORM_BYTES = 16 * 1024

export const readForm = (ctx: RequestContext) =>
  Effect.gen(function*() {
    const type = (ctx.request.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase()
    if (type !== "application/x-www-form-urlencoded") {
      return yield* new ApiError({ status: 415, code: "unsupported_media_type", message: "forms are sent as application/x-www-form-urlencoded" })
    }
    const bytes = yield* ctx.body.bytes(MAX_FORM_BYTES)
    const form = new URLSearchParams(new TextDecoder().decode(bytes))
    // PostgreSQL text cannot hold NUL: refuse it here rather than fail in the database.
    for (const value of form.values()) {
      if (value.includes("\u0000")) return yield* new ApiError({ status: 400, code: "invalid_request", message: "a form field contains a NUL character" })
    }
    return form
  })

/** 403 unless the form's `csrf` field is `expected`. */
export const checkCsrf = (form: URLSearchParams, expected: string | undefined) =>
  expected !== undefined && expected !== "" && sameSecret(form.get("csrf") ?? undefined, expected)
    ? Effect.void
    : Effect.fail(new ApiError({ status: 403, code: "csrf_failed", message: "the form has expired or did not come from this site; reload the page and try again" }))
