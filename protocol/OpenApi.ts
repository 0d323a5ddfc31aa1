/**
 * Builds the OpenAPI 3.1 document from the route table: the same Effect schemas the handlers
 * decode and encode with are compiled to JSON Schema here, so the description cannot drift from
 * the code. Nothing in it is written by hand except titles.
 */
import { Schema } from "effect"
import type { Route } from "./Http.ts"
import { ErrorBody } from "./schemas/ErrorBody.ts"

type Json = Record<string, unknown>

/**
 * `info.version`: the version of this API description (OpenAPI's meaning of the field), raised
 * when the described interface changes; not the service build, which is `x-service-version`.
 */
export const API_DESCRIPTION_VERSION = "1.0.0"

const errorDescriptions: Record<number, string> = {
  400: "malformed request", 401: "missing, expired or revoked credential", 402: "out of credits",
  403: "token lacks the required scope", 404: "unknown resource", 405: "method not allowed", 409: "conflict",
  413: "body over the limit", 415: "unsupported media type or output format", 502: "engine failed",
  503: "overloaded, shutting down, or component switched off"
}

export const buildOpenApi = (routes: ReadonlyArray<Route<any>>, info: { siteUrl: string; version: string }): Json => {
  const components: Record<string, Json> = {}
  const compile = (schema: Schema.Top): Json => {
    const doc = Schema.toJsonSchemaDocument(schema)
    for (const [name, def] of Object.entries(doc.definitions ?? {})) components[name] = rewriteRefs(def) as Json
    return rewriteRefs(doc.schema) as Json
  }
  const errorRef = compile(ErrorBody)
  const paths: Record<string, Json> = {}
  for (const route of routes) {
    const params: Array<Json> = []
    for (const m of route.path.matchAll(/\{(\w+)\}/g)) {
      params.push({ name: m[1], in: "path", required: true, schema: { type: "string" } })
    }
    if (route.query !== undefined) {
      const q = compile(route.query) as { properties?: Record<string, Json>; required?: Array<string> }
      for (const [name, schema] of Object.entries(q.properties ?? {})) {
        params.push({ name, in: "query", required: q.required?.includes(name) ?? false, schema })
      }
    }
    const responses: Record<string, Json> = {}
    for (const [status, doc] of Object.entries(route.responses)) {
      const contentType = doc.contentType ?? (doc.schema !== undefined ? "application/json" : undefined)
      responses[status] = {
        description: doc.description,
        ...(contentType !== undefined
          ? { content: { [contentType]: doc.schema !== undefined ? { schema: compile(doc.schema) } : {} } }
          : {})
      }
    }
    const errorStatuses = new Set<number>([...(route.auth === "key" ? [401] : [])])
    for (const s of Object.keys(route.responses).map(Number)) if (s >= 400) errorStatuses.add(s)
    for (const s of errorStatuses) {
      responses[String(s)] ??= {
        description: errorDescriptions[s] ?? "error",
        content: { "application/json": { schema: errorRef } }
      }
      const r = responses[String(s)] as Json
      if (r.content === undefined) r.content = { "application/json": { schema: errorRef } }
    }
    const operation: Json = {
      operationId: route.operationId,
      summary: route.summary,
      tags: route.tags,
      ...(params.length > 0 ? { parameters: params } : {}),
      ...(route.requestBody !== undefined
        ? {
          requestBody: {
            required: route.requestBody.required ?? true,
            content: { [route.requestBody.contentType]: { schema: compile(route.requestBody.schema) } }
          }
        }
        : {}),
      responses,
      // An OAuth token needs the route's scope (protocol/oauth/OAuthScopes.ts); API keys hold every scope.
      security: route.auth === "key"
        ? [{ ApiKeyAuth: [] }, { BearerAuth: route.scope === undefined ? [] : [route.scope] }]
        : route.auth === "optional"
        ? [{}, { ApiKeyAuth: [] }, { BearerAuth: route.scope === undefined ? [] : [route.scope] }]
        : []
    }
    paths[route.path] = { ...(paths[route.path] ?? {}), [route.method.toLowerCase()]: operation }
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "Speech Service API",
      version: API_DESCRIPTION_VERSION,
      "x-service-version": info.version,
      description: "Self-hosted speech service; the v1 API emulates the ElevenLabs API (the README lists the deviations, under \"Deviations from the ElevenLabs API\")."
    },
    servers: [{ url: info.siteUrl }],
    paths,
    components: {
      schemas: components,
      securitySchemes: {
        ApiKeyAuth: { type: "apiKey", in: "header", name: "xi-api-key" },
        BearerAuth: { type: "http", scheme: "bearer", description: "API key or OAuth 2.1 access token" }
      }
    }
  }
}

const rewriteRefs = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(rewriteRefs)
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {}
    for (const [k, v] of Object.entries(value)) {
      out[k] = k === "$ref" && typeof v === "string" ? v.replace("#/$defs/", "#/components/schemas/") : rewriteRefs(v)
    }
    return out
  }
  return value
}
