/**
 * OAuth scopes (SPEC 5) and which one each API route needs. `openid`, `profile`, `email` identify
 * the user and cannot spend; `offline_access` asks for a refresh token; `tts` covers synthesis and
 * transcription over HTTP (it spends credits); the MCP tool families use one scope each. API keys
 * hold every scope (storage/ApiKeys.ts), so routes keep working unchanged for them.
 */
import type { Route } from "../Http.ts"

export const SCOPES: Readonly<Record<string, string>> = {
  openid: "Know who you are (your account id)",
  profile: "See your name",
  email: "See your e-mail address",
  offline_access: "Stay connected when you are not using it (a refresh token)",
  tts: "Synthesize speech and transcribe audio, spending your credits",
  asr: "Transcribe audio with the assistant's tools, spending your credits",
  voices: "List, create and delete your voices and clones",
  summary: "Summarise your transcription jobs",
  translate: "Translate text",
  denoise: "Remove noise from audio"
}

export const SCOPE_NAMES = Object.keys(SCOPES)

/**
 * The scope a route of the API needs, by path under the API base (first match wins). Routes that
 * only read the caller's own account (`/user`) need none beyond a valid token.
 */
const TABLE: ReadonlyArray<readonly [RegExp, string | undefined]> = [
  [/^\/(text-to-speech)\//u, "tts"],
  [/^\/(speech-to-text|recognition\/uploads|recognition\/jobs\/[^/]+\/(start|cancel)$|recognition\/jobs\/?[^/]*$)/u, "tts"],
  [/^\/recognition\/jobs\/[^/]+\/summary$/u, "summary"],
  [/^\/summary-templates$/u, "summary"],
  [/^\/recognition\/speakers/u, "tts"],
  [/^\/webhooks/u, "tts"],
  [/^\/(v2\/)?voices/u, "voices"],
  [/^\/translate\//u, "translate"],
  [/^\/user/u, undefined]
]

export const scopeForPath = (pathUnderApi: string): string | undefined => TABLE.find(([re]) => re.test(pathUnderApi))?.[1]

/** The routes with the scope of the table set (routes that name one already keep theirs). */
export const withScopes = <R>(apiBase: string, routes: ReadonlyArray<Route<R>>): Array<Route<R>> =>
  routes.map((route) => {
    if (route.scope !== undefined || route.auth === "none") return route
    const under = route.path.startsWith(apiBase) ? route.path.slice(apiBase.length) : route.path.replace(/^\/api\/v2/u, "/v2")
    const scope = scopeForPath(under)
    return scope === undefined ? route : { ...route, scope }
  })
