/**
 * The site's other pages: `/` (what the service is), `/docs` (the OpenAPI document rendered
 * readably, protocol/site/ApiReference.ts), `/playground` (text-to-speech, speech-to-text and
 * cloning, and live transcription from the microphone, from the browser, with the session cookie as
 * credential) and the static assets.
 */
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import { Reply, type Route } from "../Http.ts"
import { apiReferenceHtml } from "../site/ApiReference.ts"
import { esc, htmlReply, page } from "../site/Html.ts"
import { requireSignedIn, signedIn } from "../site/SiteSession.ts"
import type { Users } from "../../storage/Users.ts"
import type { WebSessions } from "../../storage/WebSessions.ts"

const SITE = { auth: "none" as const, tags: ["site"], responses: { 200: { description: "an HTML page" } } }
const asset = (name: string) => readFileSync(new URL(`../site/assets/${name}`, import.meta.url))

/** Read once at start; small files, immutable per build. */
const ASSETS: Readonly<Record<string, { readonly type: string; readonly bytes: Uint8Array }>> = {
  "site.css": { type: "text/css; charset=utf-8", bytes: asset("site.css") },
  "site.js": { type: "text/javascript; charset=utf-8", bytes: asset("site.js") },
  "playground.js": { type: "text/javascript; charset=utf-8", bytes: asset("playground.js") },
  "playground-mic.js": { type: "text/javascript; charset=utf-8", bytes: asset("playground-mic.js") },
  // The microphone's AudioWorklet module: same-origin, so the CSP's default-src 'self' admits it.
  "mic-worklet.js": { type: "text/javascript; charset=utf-8", bytes: asset("mic-worklet.js") }
}
const PLAYGROUND = asset("playground.html").toString("utf8")

export interface SitePagesOptions {
  readonly apiBase: string
  /** The site's public URL (known only after listening when PORT=0). */
  readonly siteUrl: () => string
  /** The OpenAPI document (built once, on first use). */
  readonly openApi: () => unknown
}

export const sitePageRoutes = (o: SitePagesOptions): ReadonlyArray<Route<Users | WebSessions>> => [
  {
    ...SITE,
    method: "GET",
    path: "/",
    operationId: "siteHome",
    summary: "What the service is",
    handler: (ctx) =>
      Effect.map(signedIn(ctx), (s) =>
        htmlReply(200, page({
          title: "Home",
          user: s === undefined ? undefined : { email: s.user.email, name: s.user.name },
          csrfToken: s?.session.csrfToken,
          body: `<h1>A self-hosted speech service</h1>
<p>Text-to-speech (whole, streamed over HTTP, and over WebSocket for voice agents), voice clones, speech-to-text with speaker diarization, recognition jobs with webhooks, meeting summaries and live translation, behind an API that copies ElevenLabs' v1 API: the official ElevenLabs SDKs, LiveKit, Pipecat and the Vercel AI SDK work against it unchanged.</p>
<ul><li><a href="/docs">API reference</a> (also as <a href="${o.apiBase}/openapi.json">OpenAPI 3.1</a>)</li>
<li><a href="/playground">Playground</a>: try speech, transcription and cloning in the browser</li>
<li><a href="/developer">Developer page</a>: your API keys, credits and usage</li></ul>
${s === undefined ? `<p><a href="/sign-in">Sign in</a> to get an API key.</p>` : `<p>Signed in as ${esc(s.user.email ?? s.user.name)}.</p>`}
<h2>Point a client at it</h2><pre><code>import { ElevenLabsClient } from "@elevenlabs/elevenlabs-js"
const client = new ElevenLabsClient({ apiKey: process.env.KEY, baseUrl: "${esc(o.siteUrl())}/api" })</code></pre>`
        })))
  },
  {
    ...SITE,
    method: "GET",
    path: "/docs",
    operationId: "siteDocs",
    summary: "The API reference",
    handler: (ctx) =>
      Effect.map(signedIn(ctx), (s) =>
        htmlReply(200, page({ title: "API reference", user: s === undefined ? undefined : { email: s.user.email, name: s.user.name }, csrfToken: s?.session.csrfToken, body: apiReferenceHtml(o.openApi()) })))
  },
  {
    ...SITE,
    method: "GET",
    path: "/playground",
    operationId: "sitePlayground",
    summary: "Try the API in the browser",
    handler: (ctx) =>
      requireSignedIn(ctx, (s) =>
        Effect.succeed(htmlReply(200, page({
          title: "Playground",
          user: { email: s.user.email, name: s.user.name },
          csrfToken: s.session.csrfToken,
          meta: { "api-base": o.apiBase },
          scripts: ["/static/playground.js", "/static/playground-mic.js"],
          body: PLAYGROUND
        }))))
  },
  {
    ...SITE,
    method: "GET",
    path: "/static/{name}",
    operationId: "siteAsset",
    summary: "Stylesheet and scripts of the site",
    handler: (ctx) => {
      const name = ctx.params.name ?? ""
      const found = Object.hasOwn(ASSETS, name) ? ASSETS[name] : undefined
      return Effect.succeed(
        found === undefined
          ? Reply.bytes(404, "not found", { "content-type": "text/plain" })
          : Reply.bytes(200, found.bytes, { "content-type": found.type, "cache-control": "public, max-age=300", "x-content-type-options": "nosniff" })
      )
    }
  }
]
