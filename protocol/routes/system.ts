/**
 * Operational routes: the model list, the OpenAPI document, liveness, readiness, metrics and the
 * protected-resource metadata that every 401 points at.
 */
import { Context, Effect, Schema } from "effect"
import { Reply, type Route } from "../Http.ts"
import { ModelList } from "../schemas/Model.ts"

/**
 * Named readiness checks (database, worker pool); each fails when its component is not usable.
 * An `optional` one (an engine only some routes need) is reported but leaves the instance ready.
 */
export class Readiness extends Context.Service<Readiness, {
  readonly checks: ReadonlyArray<{ readonly name: string; readonly run: Effect.Effect<unknown, unknown>; readonly optional?: boolean }>
}>()("speech/protocol/Readiness") {}

/** Prometheus exposition text of the process's metrics. */
export class MetricsText extends Context.Service<MetricsText, {
  readonly render: Effect.Effect<string>
}>()("speech/protocol/MetricsText") {}

/** Facts about this deployment that documents and lists are built from. */
export class SiteInfo extends Context.Service<SiteInfo, {
  readonly siteUrl: string
  readonly apiBase: string
  readonly version: string
  readonly openApi: () => string
}>()("speech/protocol/SiteInfo") {}

const HealthBody = Schema.Struct({ status: Schema.Literal("ok") }).annotate({ identifier: "Health" })
const ReadyBody = Schema.Struct({
  status: Schema.Literals(["ready", "unavailable"]),
  checks: Schema.Record(Schema.String, Schema.Struct({ ok: Schema.Boolean, error: Schema.optional(Schema.String), optional: Schema.optional(Schema.Boolean) }))
}).annotate({ identifier: "Readiness" })
const ProtectedResource = Schema.Struct({
  resource: Schema.String,
  authorization_servers: Schema.Array(Schema.String),
  bearer_methods_supported: Schema.Array(Schema.String),
  scopes_supported: Schema.Array(Schema.String)
}).annotate({ identifier: "ProtectedResourceMetadata" })

export const systemRoutes = (
  apiBase: string,
  models: typeof ModelList.Type
): ReadonlyArray<Route<Readiness | MetricsText | SiteInfo>> => {
  // The model list never changes while the process runs: encode once, answer with one constant.
  // Bytes, not a string: uWS would otherwise convert the 4 KB of JSON to UTF-8 on every request
  // (a third of this route's cost under load).
  const modelsReply = Effect.succeed(Reply.bytes(200, Buffer.from(JSON.stringify(models)), { "content-type": "application/json" }))
  return [
  {
    method: "GET",
    path: `${apiBase}/models`,
    auth: "none",
    operationId: "listModels",
    summary: "List the TTS models (a bare array, one model: svc_v1)",
    tags: ["models"],
    responses: { 200: { description: "the model list", schema: ModelList } },
    handler: () => modelsReply
  },
  {
    method: "GET",
    path: `${apiBase}/openapi.json`,
    auth: "none",
    operationId: "openApi",
    summary: "This API's OpenAPI 3.1 description, generated from the handlers' schemas",
    tags: ["meta"],
    responses: { 200: { description: "OpenAPI document", contentType: "application/json" } },
    handler: () => Effect.map(SiteInfo, (site) => Reply.bytes(200, site.openApi(), { "content-type": "application/json" }))
  },
  {
    method: "GET",
    path: "/healthz",
    auth: "none",
    operationId: "health",
    summary: "Liveness: the process answers",
    tags: ["meta"],
    responses: { 200: { description: "alive", schema: HealthBody } },
    handler: () => Effect.succeed(Reply.json(200, { status: "ok" }))
  },
  {
    method: "GET",
    path: "/readyz",
    auth: "none",
    operationId: "ready",
    summary: "Readiness: database and worker pool usable; optional engines (speech-to-text) are reported without making the instance unready",
    tags: ["meta"],
    responses: { 200: { description: "ready", schema: ReadyBody }, 503: { description: "not ready", schema: ReadyBody } },
    handler: () =>
      Effect.gen(function*() {
        const { checks } = yield* Readiness
        const results = yield* Effect.forEach(checks, (c) =>
          c.run.pipe(
            Effect.timeout("5 seconds"),
            Effect.match({
              onSuccess: () => [c.name, { ok: true }] as const,
              onFailure: (e) => [c.name, { ok: false, error: describe(e), ...(c.optional === true ? { optional: true } : {}) }] as const
            })
          ), { concurrency: "unbounded" })
        const ok = results.every(([, r]) => r.ok || ("optional" in r && r.optional === true))
        return Reply.json(ok ? 200 : 503, { status: ok ? "ready" : "unavailable", checks: Object.fromEntries(results) })
      })
  },
  {
    method: "GET",
    path: "/metrics",
    auth: "none",
    operationId: "metrics",
    summary: "Prometheus metrics: requests and latency by route, pool queue depth, active sessions",
    tags: ["meta"],
    responses: { 200: { description: "Prometheus text format 0.0.4", contentType: "text/plain" } },
    handler: () =>
      Effect.map(
        Effect.flatMap(MetricsText, (m) => m.render),
        (text) => Reply.bytes(200, text, { "content-type": "text/plain; version=0.0.4; charset=utf-8" })
      )
  },
  {
    method: "GET",
    path: "/.well-known/oauth-protected-resource",
    auth: "none",
    operationId: "protectedResourceMetadata",
    summary: "OAuth 2.0 protected resource metadata (RFC 9728)",
    tags: ["auth"],
    responses: { 200: { description: "metadata", schema: ProtectedResource } },
    handler: () =>
      Effect.map(SiteInfo, (site) =>
        Reply.json(200, {
          resource: site.siteUrl,
          authorization_servers: [site.siteUrl],
          bearer_methods_supported: ["header"],
          scopes_supported: ["openid", "profile", "email", "offline_access", "tts", "asr", "voices", "summary", "translate", "denoise"]
        }))
  }
  ]
}

const describe = (e: unknown): string =>
  e instanceof Error ? e.message : typeof (e as { message?: unknown })?.message === "string" ? (e as { message: string }).message : String(e)
