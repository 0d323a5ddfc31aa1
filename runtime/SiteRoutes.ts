/**
 * The site's routes (sign-in, developer and account pages, playground, API reference) and the
 * OAuth authorization server's, with their
 * settings: secure cookies when SITE_URL is https, the session lifetime, sign-up, and the sign-in
 * limits. They are mounted beside the API routes but left out of the OpenAPI document.
 */
import { Effect } from "effect"
import type { SqlClient } from "effect/sql/SqlClient"
import type { AppConfigShape } from "./Config.ts"
import { toApiError } from "../protocol/ApiError.ts"
import type { Route } from "../protocol/Http.ts"
import type { ApiKeys } from "../storage/ApiKeys.ts"
import type { Credits } from "../storage/Credits.ts"
import type { OAuthStore } from "../storage/OAuthStore.ts"
import type { Users } from "../storage/Users.ts"
import type { WebSessions } from "../storage/WebSessions.ts"
import { htmlReply, message, page } from "../protocol/site/Html.ts"
import { RateLimiter } from "../protocol/RateLimiter.ts"
import { siteAccountRoutes } from "../protocol/routes/siteAccount.ts"
import { siteAuthRoutes } from "../protocol/routes/siteAuth.ts"
import { siteDeveloperRoutes } from "../protocol/routes/siteDeveloper.ts"
import { sitePageRoutes } from "../protocol/routes/sitePages.ts"
import { oauthRoutes } from "../protocol/routes/oauth.ts"
import { mcpRoutes } from "../protocol/routes/mcp.ts"
import * as path from "node:path"

/** Failed sign-ins per account: 5, then one every 12 s; attempts per client address: 30, then one every 2 s. */
const PER_ACCOUNT = { name: "signin_account", perSecond: 1 / 12, burst: 5 }
const PER_ADDRESS = { name: "signin_address", perSecond: 1 / 2, burst: 30 }
/**
 * OAuth client registrations per client address: 10, then one a minute. A real client registers
 * once (an MCP client once per server); this bounds what an anonymous caller can make us store.
 */
export const OAUTH_REGISTRATIONS = { name: "oauth_register", perSecond: 1 / 60, burst: 10 }

/** A failure of a page (a bad form, an expired CSRF token, the database down) as a page in words. */
const asPage = <R>(route: Route<R>): Route<R> => ({
  ...route,
  handler: (ctx) =>
    route.handler(ctx).pipe(Effect.catch((failure) => {
      const { error, kind } = toApiError(failure)
      const body = `<h1>That did not work</h1>${message("error", error.message)}<p><a href="/">Home</a> · <a href="/sign-in">Sign in</a></p>`
      // By kind, as for API requests (HttpExchange `failed`): an outage is a warning, a defect an error.
      const log = kind === "defect" ? Effect.logError("site page failed", failure) : kind === "outage" ? Effect.logWarning("site page failed", failure) : Effect.void
      return log.pipe(
        Effect.as(htmlReply(error.status, page({ title: "Error", body })))
      )
    }))
})

/** MCP sessions: at most this many open, each closed after this long without a request. */
const MCP_MAX_SESSIONS = 1000
const MCP_IDLE_MS = 30 * 60_000

export const siteRoutes = (config: AppConfigShape, siteUrl: () => string, openApi: () => unknown, version: string, sql: SqlClient) => {
  const secureCookies = config.siteUrlText.startsWith("https:")
  const limits = { perAccount: new RateLimiter(sql, PER_ACCOUNT), perAddress: new RateLimiter(sql, PER_ADDRESS) }
  type SiteServices = Users | WebSessions | ApiKeys | Credits | OAuthStore
  const pages: Array<Route<SiteServices>> = [
    ...sitePageRoutes({ apiBase: config.apiBase, siteUrl, openApi }),
    ...siteAuthRoutes({
      secureCookies,
      sessionTtlS: config.sessionTtlH * 3600,
      signup: config.signup,
      initialCredits: config.initialCredits,
      limits
    }),
    ...siteDeveloperRoutes(),
    ...siteAccountRoutes({ secureCookies, perAccount: limits.perAccount })
  ].map((r) => asPage<SiteServices>(r))
  // The OAuth endpoints answer programs in JSON (RFC 6749 errors); only the browser-facing
  // authorization endpoint turns failures into pages.
  const registrationLimiter = new RateLimiter(sql, OAUTH_REGISTRATIONS)
  const oauth: Array<Route<SiteServices>> = oauthRoutes({ siteUrl, registrationLimiter }).map((r) => (r.path.endsWith("/authorize") ? asPage<SiteServices>(r) : r))
  const mcp = mcpRoutes({ siteUrl, version, tmpDir: path.join(config.dataDir, "tmp"), allowPrivateUrls: config.urlFetchAllowPrivate, maxSessions: MCP_MAX_SESSIONS, idleMs: MCP_IDLE_MS })
  return [...pages, ...oauth, ...mcp]
}
