/**
 * The MCP endpoint (`{site_url}/mcp`, SPEC 5): Streamable HTTP and JSON-RPC by the MCP SDK's
 * web-standard transport, behind our uWS bridge (a Request is built from the exchange, the
 * Response streamed back). A bearer credential is required (an OAuth access token, or an API
 * key); without one the 401 points at the protected-resource metadata, where MCP clients start
 * their OAuth flow.
 *
 * Sessions: one MCP server and transport per `mcp-session-id`, bound to the user who opened it
 * (another user's token on it is a 404, as for an unknown session), at most `maxSessions` (the
 * least recently used is closed past that), closed after `idleMs` without a request. Each request
 * uses the scopes of the token it carries, so a token with fewer scopes gets fewer tools to work.
 */
import { Effect } from "effect"
import type { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js"
import { randomUUID } from "node:crypto"
import { parseJson } from "../decode.ts"
import { Reply, type RequestContext, type Route } from "../Http.ts"
import type { RequestAuth } from "../mcp/McpTools.ts"
import type { Principal } from "../../storage/ApiKeys.ts"

export interface McpRouteOptions {
  readonly siteUrl: () => string
  readonly version: string
  readonly tmpDir: string
  readonly allowPrivateUrls: boolean
  readonly maxSessions: number
  readonly idleMs: number
}

interface Session {
  readonly transport: WebStandardStreamableHTTPServerTransport
  /** Who opened it: the user and the credential's client (API key or OAuth client). */
  readonly owner: string
  lastSeen: number
}

/** A session is used only by the user and the client (key or OAuth client) that opened it. */
const ownerOf = (p: Principal) => `${p.userId}|${p.keyId ?? `client:${p.clientId ?? "?"}`}`

/** Most bytes of one JSON-RPC POST (tools take base64 audio up to 20 MB). */
const MAX_BODY_BYTES = 28 * 1024 * 1024

const jsonRpcError = (status: number, message: string) =>
  Reply.json(status, { jsonrpc: "2.0", error: { code: -32000, message }, id: null })

/**
 * The MCP SDK, zod and the tool definitions are 10 MB of heap on the main thread: loaded when the
 * first session opens, not at start-up (most deployments never see an MCP client).
 */
const loadSdk = Effect.promise(async () => {
  const [{ McpServer }, { WebStandardStreamableHTTPServerTransport }, { registerTools }] = await Promise.all([
    import("@modelcontextprotocol/sdk/server/mcp.js"),
    import("@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js"),
    import("../mcp/McpTools.ts")
  ])
  return { McpServer, WebStandardStreamableHTTPServerTransport, registerTools }
})

export const mcpRoutes = (o: McpRouteOptions): ReadonlyArray<Route<any>> => {
  const sessions = new Map<string, Session>()

  const close = (id: string) => {
    const s = sessions.get(id)
    sessions.delete(id)
    if (s !== undefined) void s.transport.close().catch(() => {})
  }
  const sweep = (now: number) => {
    for (const [id, s] of sessions) if (now - s.lastSeen > o.idleMs) close(id)
    while (sessions.size >= o.maxSessions) close(sessions.keys().next().value!)
  }

  const open = (principal: Principal) => Effect.flatMap(loadSdk, ({ McpServer, WebStandardStreamableHTTPServerTransport, registerTools }) => {
    const server = new McpServer({ name: "speech-service", version: o.version }, { capabilities: { tools: {} } })
    let session: Session | undefined
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        if (session !== undefined) sessions.set(id, session)
      },
      onsessionclosed: (id) => void sessions.delete(id)
    })
    session = { transport, owner: ownerOf(principal), lastSeen: Date.now() }
    const current = session
    registerTools(server, { tmpDir: o.tmpDir, allowPrivateUrls: o.allowPrivateUrls })
    return Effect.promise(() => server.connect(transport)).pipe(Effect.as(current))
  })

  const handle = (ctx: RequestContext) =>
    Effect.gen(function*() {
      const principal = ctx.principal!
      const context = yield* Effect.context<any>()
      const run: RequestAuth["run"] = (effect) => Effect.runPromise(effect.pipe(Effect.provideContext(context)) as Effect.Effect<any, unknown, never>)
      const now = Date.now()
      sweep(now)
      const id = ctx.request.headers["mcp-session-id"]
      let session: Session
      if (id !== undefined) {
        const found = sessions.get(id)
        if (found === undefined || found.owner !== ownerOf(principal)) return jsonRpcError(404, "unknown or expired MCP session: initialize a new one")
        session = found
      } else {
        if (ctx.request.method !== "POST") return jsonRpcError(400, "no mcp-session-id: start with an initialize POST")
        session = yield* open(principal)
      }
      session.lastSeen = now
      const body = ctx.request.method === "POST" ? yield* ctx.body.bytes(MAX_BODY_BYTES) : undefined
      const headers = new Headers()
      for (const [k, v] of Object.entries(ctx.request.headers)) headers.set(k, v)
      const query = ctx.request.query.size > 0 ? `?${ctx.request.query}` : ""
      const request = new Request(`${o.siteUrl()}${ctx.request.path}${query}`, {
        method: ctx.request.method,
        headers,
        ...(body !== undefined ? { body: Buffer.from(body) } : {})
      })
      // The body is parsed here (within MAX_BODY_BYTES) so the SDK's own 4 MB cap does not apply.
      let parsedBody: unknown
      if (body !== undefined && body.byteLength > 0) {
        // The API's rule for JSON bodies (decode.ts): tool arguments reach the same storage.
        const parsed = parseJson(new TextDecoder().decode(body))
        if (!parsed.ok) return jsonRpcError(400, `the body is refused: ${parsed.message}`)
        parsedBody = parsed.value
      }
      const auth: RequestAuth = { principal, run }
      const response = yield* Effect.promise(() =>
        session.transport.handleRequest(request, {
          ...(parsedBody !== undefined ? { parsedBody } : {}),
          authInfo: { token: "", clientId: principal.keyId ?? principal.clientId ?? "", scopes: [...principal.scopes], extra: auth as unknown as Record<string, unknown> }
        })
      )
      const out: Record<string, string> = {}
      response.headers.forEach((v, k) => (out[k] = v))
      if (response.body === null) return Reply.bytes(response.status, "", out)
      if (!(out["content-type"] ?? "").includes("text/event-stream")) {
        return Reply.bytes(response.status, new Uint8Array(yield* Effect.promise(() => response.arrayBuffer())), out)
      }
      const reader = response.body.getReader()
      return Reply.stream(response.status, out, (writer) =>
        Effect.gen(function*() {
          for (;;) {
            const next = yield* Effect.promise(() => reader.read())
            if (next.done) return
            yield* writer.write(next.value)
          }
        }).pipe(Effect.ensuring(Effect.sync(() => void reader.cancel().catch(() => {})))))
    })

  const route = (method: "GET" | "POST" | "DELETE"): Route<any> => ({
    method,
    path: "/mcp",
    auth: "key",
    operationId: `mcp${method}`,
    summary: "MCP endpoint (Streamable HTTP, JSON-RPC)",
    tags: ["mcp"],
    responses: { 200: { description: "JSON-RPC over Streamable HTTP" } },
    handler: handle
  })
  return [route("POST"), route("GET"), route("DELETE")]
}
