/**
 * The one bridge from uWebSockets.js into Effect.
 *
 * Each request is copied out of uWS synchronously (the `HttpRequest` object is stack-allocated
 * and dies at the first await), `onAborted` is registered before anything goes async, and the
 * request is handed to a fiber forked into a FiberSet owned by the server's scope. A client that
 * disconnects interrupts its fiber, which cancels whatever work it started (pool tasks included).
 * All writes are corked; streamed writes wait for `onWritable` under backpressure.
 *
 * Shutdown: `drain` stops the listener, lets in-flight fibers finish up to a deadline, then
 * interrupts the rest and closes every remaining connection.
 */
import uWS from "@based/uws"
import { Cause, Duration, Effect, Exit, Fiber, FiberSet, Scope } from "effect"
import { randomUUID } from "node:crypto"
import { ApiError, errorBody, statusText, toApiError, unauthorized } from "../protocol/ApiError.ts"
import type { Principal, Reply, RequestContext, ResponseWriter, Route } from "../protocol/Http.ts"
import type { HttpMetrics } from "./Metrics.ts"
import { RequestBody } from "./RequestBody.ts"
import type { Router } from "./Router.ts"

export interface HttpServerOptions<R> {
  readonly host: string
  readonly port: number
  readonly router: Router<R>
  /** Resolves a presented credential (API key or access token) to its principal. */
  readonly authenticate: (credential: string) => Effect.Effect<Principal, unknown>
  readonly metrics: HttpMetrics
  /** Lets later features (WebSocket routes) attach to the same app before it listens. */
  readonly configure?: (app: uWS.TemplatedApp) => Effect.Effect<void, never, R | Scope.Scope>
}

export interface HttpServer {
  readonly port: number
  readonly app: uWS.TemplatedApp
  /** Stops accepting, waits up to `grace` for in-flight requests, then cuts the rest. */
  readonly drain: (grace: Duration.Input) => Effect.Effect<void>
  readonly inFlight: () => number
}

interface Exchange {
  aborted: boolean
  headSent: boolean
  onWritable: (() => void) | undefined
  fiber: Fiber.Fiber<unknown, unknown> | undefined
  body: RequestBody | undefined
}

const methodsWithBody = new Set(["POST", "PUT", "PATCH", "DELETE"])

export const makeHttpServer = <R>(options: HttpServerOptions<R>) =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const fibers = yield* FiberSet.make<unknown, unknown>()
    const runFork = yield* FiberSet.runtime(fibers)<R>()
    let draining = false
    let inFlight = 0

    const app = uWS.App()

    if (options.configure !== undefined) yield* options.configure(app)

    app.any("/*", (res, req) => {
      const started = performance.now()
      // Everything from `req` must be copied now: it is invalid after this callback returns.
      const method = req.getCaseSensitiveMethod().toUpperCase()
      const path = req.getUrl()
      const rawQuery = req.getQuery() ?? ""
      const headers: Record<string, string> = {}
      req.forEach((k, v) => {
        headers[k] = v
      })
      const requestId = validRequestId(headers["x-request-id"]) ?? randomUUID()
      const exchange: Exchange = { aborted: false, headSent: false, onWritable: undefined, fiber: undefined, body: undefined }
      res.onAborted(() => {
        exchange.aborted = true
        exchange.body?.abort()
        exchange.fiber?.interruptUnsafe()
        const w = exchange.onWritable
        exchange.onWritable = undefined
        w?.()
      })

      const match = options.router.match(method, path)
      let routeLabel = "unmatched"
      const finish = (status: number) => options.metrics.record(routeLabel, method, status, (performance.now() - started) / 1000)

      if (draining) {
        sendError(res, exchange, requestId, new ApiError({ status: 503, code: "shutting_down", message: "the server is shutting down" }), true)
        return finish(503)
      }
      if (match._tag === "NotFound") {
        sendError(res, exchange, requestId, new ApiError({ status: 404, code: "not_found", message: `no route for ${method} ${path}` }), methodsWithBody.has(method))
        return finish(404)
      }
      if (match._tag === "MethodNotAllowed") {
        sendError(res, exchange, requestId, new ApiError({ status: 405, code: "method_not_allowed", message: `${method} is not allowed on ${path}; allowed: ${match.allow.join(", ")}`, headers: { allow: match.allow.join(", ") } }), methodsWithBody.has(method))
        return finish(405)
      }
      const route = match.route
      routeLabel = route.path

      const lengthHeader = headers["content-length"]
      const declared = lengthHeader !== undefined && /^\d+$/.test(lengthHeader) ? Number(lengthHeader) : undefined
      const expectsBody = methodsWithBody.has(method) && (declared === undefined ? headers["transfer-encoding"] !== undefined : declared > 0)
      const body = new RequestBody(res, declared, expectsBody)
      exchange.body = body

      const ctxBase = {
        request: {
          method,
          path,
          query: new URLSearchParams(rawQuery),
          headers,
          requestId,
          remoteAddress: Buffer.from(res.getRemoteAddressAsText()).toString()
        },
        params: match.params,
        body
      }

      const program = authorize(route, headers, options).pipe(
        Effect.flatMap((principal) => route.handler({ ...ctxBase, principal })),
        Effect.flatMap((reply) => send(res, exchange, requestId, reply)),
        Effect.catchCause((cause) => {
          if (Cause.hasInterruptsOnly(cause)) return Effect.interrupt
          const failure = Cause.squash(cause)
          const { error, internal } = toApiError(failure)
          const log = internal
            ? Effect.logError("request failed", { route: route.path, method, cause: Cause.pretty(cause) })
            : Effect.logDebug("request rejected", { route: route.path, method, status: error.status, code: error.code })
          return log.pipe(Effect.andThen(Effect.sync(() => {
            if (exchange.aborted) return 499
            if (exchange.headSent) {
              // Mid-stream failure: no error body can follow audio; the short read tells the client.
              // Deferred a tick: inside the uWS callback the response is corked, and closing a
              // corked socket would discard the segments already written.
              setImmediate(() => {
                if (!exchange.aborted) res.close()
              })
              return 0
            }
            sendError(res, exchange, requestId, error, body.unread)
            return error.status
          })))
        }),
        Effect.annotateLogs({ requestId }),
        Effect.onExit((exit) =>
          Effect.sync(() => {
            inFlight--
            const status = Exit.isSuccess(exit) ? (exit.value as number) : 499
            finish(exchange.aborted ? 499 : status)
          })
        )
      )
      inFlight++
      exchange.fiber = runFork(program)
    })

    const listenSocket = yield* Effect.callback<uWS.us_listen_socket, Error>((resume) => {
      app.listen(options.host, options.port, (socket) => {
        if (socket === false) resume(Effect.fail(new Error(`cannot listen on ${options.host}:${options.port}`)))
        else resume(Effect.succeed(socket))
      })
    })
    const port = uWS.us_socket_local_port(listenSocket as unknown as uWS.us_socket)
    let listening = true
    const stopListening = () => {
      if (listening) {
        listening = false
        uWS.us_listen_socket_close(listenSocket)
      }
    }

    const drain = (grace: Duration.Input) =>
      Effect.gen(function*() {
        draining = true
        stopListening()
        const settled = yield* FiberSet.awaitEmpty(fibers).pipe(Effect.timeoutOption(grace))
        if (settled._tag === "None") {
          yield* Effect.logWarning("shutdown deadline reached; interrupting in-flight requests", { inFlight })
          yield* FiberSet.clear(fibers)
        }
        app.close()
      })

    yield* Scope.addFinalizer(scope, Effect.sync(() => {
      stopListening()
      app.close()
    }))

    return {
      port,
      app,
      drain,
      inFlight: () => inFlight
    } satisfies HttpServer
  })

const validRequestId = (v: string | undefined) => (v !== undefined && /^[\w.:-]{1,128}$/.test(v) ? v : undefined)

/** Pulls the credential from `xi-api-key` or `Authorization: Bearer`. */
export const presentedCredential = (headers: Readonly<Record<string, string>>): string | undefined => {
  const key = headers["xi-api-key"]
  if (key !== undefined && key.length > 0) return key.trim()
  const auth = headers["authorization"]
  if (auth !== undefined) {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(auth)
    if (m) return m[1]
  }
  return undefined
}

const authorize = <R>(route: Route<R>, headers: Readonly<Record<string, string>>, options: HttpServerOptions<R>) => {
  if (route.auth === "none") return Effect.succeed(null)
  const credential = presentedCredential(headers)
  if (credential === undefined) {
    return route.auth === "optional"
      ? Effect.succeed(null)
      : Effect.fail(unauthorized("an API key is required: send it in the xi-api-key header or as Authorization: Bearer", "needs_authorization"))
  }
  // A credential that is presented but wrong is refused even on optional routes: silently
  // treating it as anonymous would hide a client's mistake.
  return options.authenticate(credential) as Effect.Effect<Principal | null, unknown>
}

const writeHead = (res: uWS.HttpResponse, status: number, requestId: string, headers: Readonly<Record<string, string>>) => {
  res.writeStatus(`${status} ${statusText[status] ?? ""}`)
  res.writeHeader("x-request-id", requestId)
  for (const k in headers) res.writeHeader(k, headers[k]!)
}

const sendError = (res: uWS.HttpResponse, exchange: Exchange, requestId: string, error: ApiError, closeConnection: boolean) => {
  if (exchange.aborted) return
  const headers: Record<string, string> = { "content-type": "application/json", ...error.headers }
  if (error.status === 401) headers["www-authenticate"] = wwwAuthenticate
  res.cork(() => {
    writeHead(res, error.status, requestId, headers)
    // An unread body would be parsed as the next request; closing is the only safe answer.
    res.end(errorBody(error), closeConnection)
  })
  exchange.headSent = true
}

let wwwAuthenticate = "Bearer"
/** Set once at start-up from SITE_URL (SPEC 7: 401 points at the protected-resource metadata). */
export const setResourceMetadataUrl = (url: string) => {
  wwwAuthenticate = `Bearer resource_metadata="${url}"`
}

const send = <R>(res: uWS.HttpResponse, exchange: Exchange, requestId: string, reply: Reply<R>): Effect.Effect<number, unknown, R> => {
  if (exchange.aborted) return Effect.succeed(499)
  if (reply._tag === "Full") {
    return Effect.sync(() => {
      if (exchange.aborted) return 499
      res.cork(() => {
        writeHead(res, reply.status, requestId, reply.headers)
        res.end(reply.body, exchange.body?.unread ?? false)
      })
      exchange.headSent = true
      return reply.status
    })
  }
  // The head goes out with the first chunk, so a failure before any audio still gets a normal
  // error status (SPEC 4.1 rule 3).
  const writer: ResponseWriter = {
    aborted: () => exchange.aborted,
    write: (chunk) =>
      Effect.callback<void>((resume) => {
        if (exchange.aborted) return resume(Effect.void)
        let ok = false
        res.cork(() => {
          if (!exchange.headSent) {
            writeHead(res, reply.status, requestId, reply.headers)
            exchange.headSent = true
          }
          ok = res.write(chunk)
        })
        if (ok) return resume(Effect.void)
        // Backpressure: uWS holds the chunk; continue once the socket drained.
        exchange.onWritable = () => resume(Effect.void)
        res.onWritable(() => {
          const w = exchange.onWritable
          exchange.onWritable = undefined
          w?.()
          return true
        })
      })
  }
  return Effect.gen(function*() {
    yield* reply.write(writer)
    if (!exchange.aborted) {
      res.cork(() => {
        if (!exchange.headSent) writeHead(res, reply.status, requestId, reply.headers)
        res.end()
      })
      exchange.headSent = true
    }
    return reply.status
  })
}
