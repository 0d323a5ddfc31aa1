/**
 * The site over plain HTTP (no browser): sign-up when the operator opened it (SIGNUP=open), the
 * cookie and form rules (HttpOnly, SameSite=Lax, double-submit token before sign-in, 415 for
 * other bodies, an open redirect refused), security headers, and the session cookie as an API
 * credential in protocol/Authorization.ts (CSRF header on writes, unknown sessions anonymous).
 */
import { Effect } from "effect"
import t from "tap"
import { authorizeRoute, cookieValue } from "../../protocol/Authorization.ts"
import { safeNext } from "../../protocol/site/SiteSession.ts"
import { hashPassword } from "../../storage/Passwords.ts"
import { startTestService } from "../support/service.ts"

const service = await startTestService(t, { SIGNUP: "open", INITIAL_CREDITS: "777" })
const site = service.siteUrl

/** A tiny cookie jar: enough for one browser-like client. */
const client = () => {
  const jar = new Map<string, string>()
  const request = async (path: string, init: RequestInit = {}) => {
    const res = await fetch(`${site}${path}`, {
      ...init,
      redirect: "manual",
      headers: { ...(init.headers as Record<string, string> ?? {}), cookie: [...jar].map(([k, v]) => `${k}=${v}`).join("; ") }
    })
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(";")
      const [k, v] = pair!.split("=") as [string, string]
      if (/Max-Age=0/u.test(c)) jar.delete(k)
      else jar.set(k, v)
    }
    return res
  }
  const form = (path: string, fields: Record<string, string>) =>
    request(path, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: new URLSearchParams(fields).toString() })
  return { jar, request, form }
}
const tokenIn = (html: string) => /name="csrf" value="([^"]+)"/u.exec(html)?.[1] ?? ""

t.test("sign-up (SIGNUP=open): an account, a session, INITIAL_CREDITS; weak passwords and taken e-mails refused", async (t) => {
  const c = client()
  const page = await c.request("/sign-up")
  t.equal(page.status, 200)
  const setCookie = page.headers.getSetCookie().join("\n")
  t.match(setCookie, /svc_login_csrf=[^;]+; Path=\/; HttpOnly; SameSite=Lax; Max-Age=3600/u)
  t.notMatch(setCookie, /Secure/u, "http site: no Secure flag")
  const csrf = tokenIn(await page.text())
  t.equal(csrf, c.jar.get("svc_login_csrf"), "double submit: the field equals the cookie")
  t.match(page.headers.get("content-security-policy"), /default-src 'self'/u)
  t.equal(page.headers.get("x-frame-options"), "DENY")

  t.equal((await c.form("/sign-up", { email: "new@example.com", password: "long enough pw" })).status, 403, "no token")
  t.equal((await c.form("/sign-up", { csrf, email: "new@example.com", password: "short" })).status, 400)
  t.equal((await c.form("/sign-up", { csrf, email: "not an address", password: "long enough pw" })).status, 400)
  const made = await c.form("/sign-up", { csrf, email: "new@example.com", password: "long enough pw" })
  t.equal(made.status, 303)
  t.equal(made.headers.get("location"), "/developer")
  t.match(made.headers.get("set-cookie"), /svc_session=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Lax; Max-Age=604800/u)
  const dev = await c.request("/developer")
  t.equal(dev.status, 200)
  t.match(await dev.text(), /<strong id="balance">777<\/strong>/u)
  const again = client()
  const token = tokenIn(await (await again.request("/sign-up")).text())
  const taken = await again.form("/sign-up", { csrf: token, email: "NEW@example.com", password: "another long pw" })
  t.equal(taken.status, 409)
  t.match(await taken.text(), /exists already/u)
})

t.test("forms: other content types 415, a sign-in redirect stays on this site", async (t) => {
  const c = client()
  const csrf = tokenIn(await (await c.request("/sign-in")).text())
  const json = await c.request("/sign-in", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ csrf }) })
  t.equal(json.status, 415)
  t.match(json.headers.get("content-type"), /text\/html/u, "site errors are pages")
  const ok = await c.form("/sign-in?next=%2F%2Fevil.example%2F", { csrf, email: "new@example.com", password: "long enough pw" })
  t.equal(ok.status, 303)
  t.equal(ok.headers.get("location"), "/developer", "//evil.example is not followed")
  for (const [next, to] of [["/playground", "/playground"], ["https://evil.example", "/developer"], ["/\\evil", "/developer"], ["/a b", "/developer"], [null, "/developer"]] as const) {
    t.equal(safeNext(next), to, String(next))
  }
  t.equal((await c.request("/static/site.css")).headers.get("content-type"), "text/css; charset=utf-8")
  t.equal((await c.request("/static/__proto__")).status, 404)
  t.equal((await c.request("/static/..%2Fsite%2FHtml.ts")).status, 404)
})

t.test("the session cookie as an API credential", async (t) => {
  t.equal(cookieValue("a=1; svc_session=tok; b=2", "svc_session"), "tok")
  t.equal(cookieValue("svc_sessionx=1", "svc_session"), undefined)
  t.equal(cookieValue(undefined, "svc_session"), undefined)
  const principal = { userId: "usr_1", keyId: null, scopes: [] }
  const sessions = (token: string) => Effect.succeed(token === "good" ? { principal, csrfToken: "c1" } : undefined)
  const noKey = () => Effect.fail("no keys here")
  const authorize = (auth: "key" | "optional", method: string, headers: Record<string, string>) =>
    Effect.runPromise(Effect.match(authorizeRoute({ auth }, headers, noKey, method, sessions), { onFailure: (e) => `refused ${(e as { status?: number }).status}`, onSuccess: (p) => (p === null ? "anonymous" : p.userId) }))
  t.equal(await authorize("key", "GET", { cookie: "svc_session=good" }), "usr_1")
  t.equal(await authorize("key", "POST", { cookie: "svc_session=good" }), "refused 403", "a write needs x-csrf-token")
  t.equal(await authorize("key", "POST", { cookie: "svc_session=good", "x-csrf-token": "c2" }), "refused 403")
  t.equal(await authorize("key", "POST", { cookie: "svc_session=good", "x-csrf-token": "c1" }), "usr_1")
  t.equal(await authorize("key", "GET", { cookie: "svc_session=stale" }), "refused 401", "an unknown session is no credential")
  t.equal(await authorize("optional", "POST", { cookie: "svc_session=stale" }), "anonymous")
  t.equal(await authorize("optional", "GET", {}), "anonymous")
})

t.test("outside attack fixes: folded spellings share a bucket, no cross-site sign-out, NUL is a 400, the current password is not an oracle", async (t) => {
  await Effect.runPromise(service.users.createUserWithKey({ name: "ivy", email: "ivy@example.com", passwordHash: await Effect.runPromise(hashPassword("ivy's long password")) }))
  const c = client()
  const csrf = tokenIn(await (await c.request("/sign-in")).text())
  for (let i = 0; i < 5; i++) t.equal((await c.form("/sign-in", { csrf, email: "ivy@example.com", password: "wrong password" })).status, 401)
  t.equal((await c.form("/sign-in", { csrf, email: "ivy@example.com", password: "ivy's long password" })).status, 429, "limited: the right password waits too")
  t.not((await c.form("/sign-in", { csrf, email: "\u0130vy@example.com", password: "ivy's long password" })).status, 303, "İ is not a way around the limit")
  t.equal((await c.form("/sign-in", { csrf, email: "ivy\u0000@example.com", password: "x" })).status, 400, "NUL")

  const d = client()
  const token = tokenIn(await (await d.request("/sign-in")).text())
  t.equal((await d.form("/sign-in", { csrf: token, email: "new@example.com", password: "long enough pw" })).status, 303)
  const crossSite = await fetch(`${site}/sign-out`, { method: "POST", redirect: "manual", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "" })
  t.equal(crossSite.status, 303)
  t.equal(crossSite.headers.get("set-cookie"), null, "no session cookie sent: nothing cleared")
  t.equal((await d.form("/sign-out", {})).status, 403, "with the cookie but without the token")
  t.equal((await d.request("/developer")).status, 200, "still signed in")

  const account = await d.request("/account")
  const sessionCsrf = /name="csrf-token" content="([^"]+)"/u.exec(await account.text())![1]!
  const statuses: Array<number> = []
  for (let i = 0; i < 6; i++) statuses.push((await d.form("/account/password", { csrf: sessionCsrf, current: "guess number " + i, new: "whatever new pw", confirm: "whatever new pw" })).status)
  t.same(statuses, [400, 400, 400, 400, 400, 429], "wrong current passwords share the sign-in budget")
})
