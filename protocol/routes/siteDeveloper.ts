/**
 * The developer page (SPEC 5: keys are "minted and deleted by a signed-in user on the developer
 * page of the site"): the caller's keys (name, prefix and last four characters, created, last
 * used), minting (the key shown once, with a copy button), deleting (refused by every instance at
 * once: the api_keys trigger's NOTIFY), the credit balance and the ledger, newest first, paged.
 * Every key operation is checked against the signed-in user: another user's key id is a 404.
 */
import { Effect } from "effect"
import type { Reply, Route } from "../Http.ts"
import { csrfField, esc, htmlReply, message, page, redirect } from "../site/Html.ts"
import { checkCsrf, readForm, requireSignedIn, type SignedIn } from "../site/SiteSession.ts"
import { ApiKeys } from "../../storage/ApiKeys.ts"
import { Credits } from "../../storage/Credits.ts"
import type { Users } from "../../storage/Users.ts"
import type { WebSessions } from "../../storage/WebSessions.ts"

const SITE = { auth: "none" as const, tags: ["site"], responses: { 200: { description: "an HTML page" } } }
/** Ledger rows per page. */
const PAGE_ROWS = 20

const when = (d: Date | undefined) => (d === undefined ? "never" : `<time datetime="${esc(d.toISOString())}">${esc(d.toISOString().replace("T", " ").slice(0, 16))} UTC</time>`)

const developerPage = (s: SignedIn, before: number | undefined, notice?: string, minted?: { name: string; key: string }) =>
  Effect.gen(function*() {
    const keys = yield* (yield* ApiKeys).listKeys(s.user.userId)
    const credits = yield* Credits
    const balance = s.user.credits
    const rows = yield* credits.ledger(s.user.userId, { limit: PAGE_ROWS + 1, ...(before !== undefined ? { before } : {}) })
    const shown = rows.slice(0, PAGE_ROWS)
    const csrf = s.session.csrfToken
    const keyRows = keys.map((k) => `<tr><td>${esc(k.name)}</td><td><code>${esc(k.prefix)}…${esc(k.suffix ?? "")}</code></td><td>${when(k.createdAt)}</td><td>${when(k.lastUsedAt)}</td>
<td><form method="post" action="/developer/keys/${esc(encodeURIComponent(k.keyId))}/delete" class="inline">${csrfField(csrf)}<button type="submit" class="danger" aria-label="Delete key ${esc(k.name)}">Delete</button></form></td></tr>`).join("")
    const ledgerRows = shown.map((e) => `<tr><td>${when(e.createdAt)}</td><td>${esc(e.kind)}</td><td>${esc(e.purpose ?? "")}</td><td>${e.amount > 0 ? "+" : ""}${esc(e.amount)}</td><td>${esc(e.balanceAfter)}</td><td><code>${esc(e.reference ?? "")}</code></td></tr>`).join("")
    const older = rows.length > PAGE_ROWS ? `<a href="/developer?before=${esc(shown[shown.length - 1]!.id)}#usage">Older entries</a>` : ""
    const newest = before !== undefined ? `<a href="/developer#usage">Newest entries</a> ` : ""
    const body = `<h1>Developer</h1>${notice !== undefined ? message("notice", notice) : ""}
${minted !== undefined ? `<section class="card" aria-labelledby="new-key-h"><h2 id="new-key-h">Your new key "${esc(minted.name)}"</h2>
<p class="error">Copy it now: it is shown only this once and cannot be recovered.</p>
<label for="new-key">API key</label><input id="new-key" type="text" readonly value="${esc(minted.key)}" class="secret">
<button type="button" data-copy="new-key">Copy</button><span id="new-key-copied" role="status"></span></section>` : ""}
<section class="card" aria-labelledby="keys-h"><h2 id="keys-h">API keys</h2>
${keys.length === 0 ? "<p>You have no API keys.</p>" : `<div class="scroll"><table id="keys"><thead><tr><th scope="col">Name</th><th scope="col">Key</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col"><span class="skip">Actions</span></th></tr></thead><tbody>${keyRows}</tbody></table></div>`}
<form method="post" action="/developer/keys" class="row">${csrfField(csrf)}<div><label for="key-name">Name of a new key</label><input id="key-name" name="name" type="text" maxlength="100" placeholder="e.g. production"></div><button type="submit">Create key</button></form>
<p>Send a key as <code>xi-api-key: &lt;key&gt;</code> or <code>Authorization: Bearer &lt;key&gt;</code>; point ElevenLabs SDKs at <code>{this site}/api</code>.</p></section>
<section class="card" aria-labelledby="usage-h"><h2 id="usage-h">Credits and usage</h2><p>Balance: <strong id="balance">${esc(balance)}</strong> credits.</p>
${shown.length === 0 ? "<p>No credit movements yet.</p>" : `<div class="scroll"><table id="usage"><thead><tr><th scope="col">When</th><th scope="col">Kind</th><th scope="col">For</th><th scope="col">Amount</th><th scope="col">Balance after</th><th scope="col">Reference</th></tr></thead><tbody>${ledgerRows}</tbody></table></div>`}
<p>${newest}${older}</p></section>`
    return htmlReply(200, page({ title: "Developer", user: { email: s.user.email, name: s.user.name }, csrfToken: csrf, scripts: ["/static/site.js"], body }))
  })

export const siteDeveloperRoutes = (): ReadonlyArray<Route<Users | WebSessions | ApiKeys | Credits>> => [
  {
    ...SITE,
    method: "GET",
    path: "/developer",
    operationId: "siteDeveloper",
    summary: "Keys, balance and usage",
    handler: (ctx) =>
      requireSignedIn(ctx, (s) => {
        const before = Number(ctx.request.query.get("before"))
        return developerPage(s, Number.isSafeInteger(before) && before > 0 ? before : undefined)
      })
  },
  {
    ...SITE,
    method: "POST",
    path: "/developer/keys",
    operationId: "siteMintKey",
    summary: "Mint an API key",
    handler: (ctx) =>
      requireSignedIn(ctx, (s) =>
        Effect.gen(function*() {
          const form = yield* readForm(ctx)
          yield* checkCsrf(form, s.session.csrfToken)
          const name = (form.get("name") ?? "").trim().slice(0, 100) || "default"
          const minted = yield* (yield* ApiKeys).mintKey(s.user.userId, name)
          yield* Effect.logInfo("key minted on the developer page", { userId: s.user.userId, keyId: minted.keyId })
          // Answered as a page, not a redirect: the key must not travel in a URL or be re-shown.
          return yield* developerPage(s, undefined, undefined, { name, key: minted.apiKey })
        }))
  },
  {
    ...SITE,
    method: "POST",
    path: "/developer/keys/{key_id}/delete",
    operationId: "siteDeleteKey",
    summary: "Delete an API key",
    handler: (ctx) =>
      requireSignedIn(ctx, (s): Effect.Effect<Reply, unknown, ApiKeys | Credits> =>
        Effect.gen(function*() {
          const form = yield* readForm(ctx)
          yield* checkCsrf(form, s.session.csrfToken)
          const keys = yield* ApiKeys
          const keyId = ctx.params.key_id!
          const own = (yield* keys.listKeys(s.user.userId)).find((k) => k.keyId === keyId)
          if (own === undefined) {
            return htmlReply(404, page({ title: "Not found", user: { email: s.user.email, name: s.user.name }, csrfToken: s.session.csrfToken, body: `<h1>No such key</h1>${message("error", "You have no key with that id; it may have been deleted already.")}<p><a href="/developer">Back to your keys</a></p>` }))
          }
          yield* keys.deleteKey(keyId)
          yield* Effect.logInfo("key deleted on the developer page", { userId: s.user.userId, keyId })
          return redirect("/developer")
        }))
  }
]
