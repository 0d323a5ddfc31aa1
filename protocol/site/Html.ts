/**
 * Server-rendered HTML of the site: escaping, the page layout and the security headers every
 * page carries. No client framework: pages are strings, the little script there is lives in
 * static files (assets/), because the Content-Security-Policy refuses inline script and style.
 */
import { Reply } from "../Http.ts"

/** Text as HTML: & < > " ' escaped; everything from a user or the database goes through this. */
export const esc = (value: unknown): string =>
  String(value ?? "").replace(/[&<>"']/gu, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;" })[c]!)

/**
 * Same-origin everything; blob: audio for the playground's replay; no inline script or style.
 * `formTargets`: origins a form may end up at besides this one (browsers apply form-action to
 * the redirect after a POST: the OAuth consent form returns to the client's redirect URI).
 */
export const contentSecurityPolicy = (formTargets: ReadonlyArray<string> = []) =>
  `default-src 'self'; media-src 'self' blob:; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'${formTargets.map((o) => ` ${o}`).join("")}; frame-ancestors 'none'`

const SECURITY_HEADERS = {
  "content-type": "text/html; charset=utf-8",
  "cache-control": "no-store",
  "content-security-policy": contentSecurityPolicy(),
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "same-origin"
}

export interface PageUser {
  readonly email: string | undefined
  readonly name: string
}

export interface PageOptions {
  readonly title: string
  /** Signed in: nav shows the account pages and a sign-out form (which needs `csrfToken`). */
  readonly user?: PageUser | undefined
  readonly csrfToken?: string | undefined
  /** Extra <meta> for scripts (playground: api-base). */
  readonly meta?: Readonly<Record<string, string>>
  readonly scripts?: ReadonlyArray<string>
  /** Already-escaped HTML of <main>. */
  readonly body: string
}

/** A hidden form field carrying the CSRF token. */
export const csrfField = (token: string | undefined) => `<input type="hidden" name="csrf" value="${esc(token)}">`

export const page = (o: PageOptions): string => {
  const nav = o.user === undefined
    ? `<a href="/">Home</a><a href="/docs">API reference</a><a href="/sign-in">Sign in</a>`
    : `<a href="/">Home</a><a href="/docs">API reference</a><a href="/playground">Playground</a><a href="/developer">Developer</a><a href="/account">Account</a>` +
      `<form method="post" action="/sign-out" class="inline">${csrfField(o.csrfToken)}<button type="submit" class="link">Sign out</button></form>`
  const meta = Object.entries({ ...(o.csrfToken !== undefined ? { "csrf-token": o.csrfToken } : {}), ...o.meta })
    .map(([name, content]) => `<meta name="${esc(name)}" content="${esc(content)}">`).join("")
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(o.title)} · Speech Service</title>${meta}<link rel="stylesheet" href="/static/site.css">
${(o.scripts ?? []).map((s) => `<script src="${esc(s)}" defer></script>`).join("")}</head>
<body><a class="skip" href="#main">Skip to content</a>
<header><a class="brand" href="/">Speech Service</a><nav aria-label="Site">${nav}</nav></header>
<main id="main">${o.body}</main>
<footer><p>Self-hosted speech service · <a href="/api/v1/openapi.json">openapi.json</a></p></footer>
</body></html>`
}

export const htmlReply = (status: number, html: string, headers: Record<string, string> = {}): Reply =>
  Reply.bytes(status, html, { ...SECURITY_HEADERS, ...headers })

/** 303 See Other: after a form POST the browser GETs `location`. */
export const redirect = (location: string, headers: Record<string, string> = {}): Reply =>
  Reply.bytes(303, "", { location, "cache-control": "no-store", ...headers })

/** A message box: `kind` error (announced at once) or notice. */
export const message = (kind: "error" | "notice", text: string) =>
  `<p class="${kind}" role="${kind === "error" ? "alert" : "status"}">${esc(text)}</p>`
