/**
 * The one bridge from uWebSockets.js into Effect.
 *
 * Each request is copied out of uWS synchronously (the `HttpRequest` object is stack-allocated
 * and dies at the first await), `onAborted` is registered before anything goes async, and the
 * request is handed to a fiber forked with the server's services and tracked until it exits. A client that
 * disconnects interrupts its fiber, which cancels whatever work it started (pool tasks included).
 * All writes are corked; streamed writes wait for `onWritable` under backpressure.
 *
 * Framing (uWS 20.51 parses HTTP/1.1 only and frames bodies itself): HEAD gets GET's head and
 * no body; conflicting Content-Lengths and repeated credentials are refused here; an answer
 * written before its request body was read leaves the connection open while uWS drops the rest
 * of the body (`discardLimitBytes`), so the client reads it instead of a reset. What uWS
 * decides alone: HTTP/1.0 gets 505, and a request arriving while an earlier answer on the same
 * connection is pending closes the connection.
 *
 * Shutdown: `drain` stops the listener, lets in-flight fibers finish up to a deadline, then
 * interrupts the rest and closes every remaining connection.
 *
 * Which route needs which credential, and the 401 answers, are protocol/Authorization.ts's; this
 * bridge only hands it the copied headers. Everything a server counts or sets (metrics, access
 * log, request ids, the WWW-Authenticate challenge) is its own (`Bridge`), so two servers in one
 * process share nothing.
 */
import uWS from "@based/uws"
import { Duration, Effect, Exit, Fiber, Scope } from "effect"
import { ApiError, badRequest } from "../protocol/ApiError.ts"
import { type Authenticate, type AuthenticateSession, authorizeRoute } from "../protocol/Authorization.ts"
import type { Reply } from "../protocol/Http.ts"
import type { HttpMetrics } from "./Metrics.ts"
import { Bridge, Exchange, failed, send, sendFull } from "./HttpExchange.ts"
import type { Router } from "./Router.ts"

export interface HttpServerOptions<R> {
  readonly host: string
  readonly port: number
  readonly router: Router<R>
  /** Resolves a presented credential (API key or access token) to its principal. */
  readonly authenticate: Authenticate
  /** A signed-in browser's session cookie as a credential (the site's playground). */
  readonly authenticateSession?: AuthenticateSession
  readonly metrics: HttpMetrics
  /**
   * Where a request body past its in-memory allowance spills (runtime/RequestBody.ts): the data
   * directory's `tmp`, on disk, rather than the OS temp dir, which is often a tmpfs (Debian 13,
   * Fedora, Arch) whose pages are memory. Absent: the OS temp dir.
   */
  readonly spillDir?: string
  /** One JSON line per finished request on stdout (LOG_LEVEL debug or trace). */
  readonly accessLog?: boolean
  /**
   * The protected-resource metadata URL every 401's WWW-Authenticate points at (SPEC 7), read per
   * 401: with PORT=0 the site's URL is known only after listening. Absent: plain `Bearer`.
   */
  readonly resourceMetadataUrl?: () => string | undefined
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

export const makeHttpServer = <R>(options: HttpServerOptions<R>) =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    // Our own set of request fibers (not FiberSet): one observer per request does both the
    // bookkeeping and the metrics, which is measurably cheaper on the hot path.
    const fibers = new Set<Fiber.Fiber<unknown, unknown>>()
    const runFork = Effect.runForkWith(yield* Effect.context<R>())
    let emptied: (() => void) | undefined
    let draining = false
    const bridge = new Bridge(options)

    const app = uWS.App()

    if (options.configure !== undefined) yield* options.configure(app)

    app.any("/*", (res, req) => {
      // Everything from `req` must be copied now: it is invalid after this callback returns.
      const x = new Exchange(bridge, res, req)
      if (x.malformed !== undefined) {
        const error = x.malformed
        if (!x.framingBroken) return x.reject(error)
        res.onAborted(() => x.abort())
        // Answered after uWS has parsed the rest of this read: bytes after the head may hold a
        // request smuggled in the body. While this one is unanswered, uWS closes the connection
        // on seeing another rather than dispatching it (its rule for pipelining behind a
        // pending response); with none, the 400 goes out and the connection closes.
        setImmediate(() => x.reject(error, true))
        return
      }
      const match = options.router.match(x.method, x.path)
      if (draining) {
        return x.reject(new ApiError({ status: 503, code: "shutting_down", message: "the server is shutting down", headers: { "retry-after": "1" } }), true)
      }
      if (match._tag === "NotFound") {
        return x.reject(new ApiError({ status: 404, code: "not_found", message: `no route for ${x.method} ${x.path}` }))
      }
      if (match._tag === "BadParam") return x.reject(badRequest(match.message))
      if (match._tag === "MethodNotAllowed") {
        const allow = match.allow.join(", ")
        return x.reject(new ApiError({ status: 405, code: "method_not_allowed", message: `${x.method} is not allowed on ${x.path}; allowed: ${allow}`, headers: { allow } }))
      }
      const route = match.route
      x.routeLabel = route.path
      x.params = match.params
      let handled: Effect.Effect<Reply<R>, unknown, R>
      try {
        handled = route.auth === "none"
          ? route.handler(x.context(null))
          : Effect.flatMap(authorizeRoute(route, x.headers, options.authenticate, x.method, options.authenticateSession), (principal) => route.handler(x.context(principal)))
      } catch (defect) {
        // A handler that throws while building its effect (a bug) is answered and logged like one
        // that fails inside its fiber: a 500, never a request left with no answer and no abort handler.
        handled = Effect.die(defect)
      }
      // A handler that is already a successful whole reply (the model list, health) is answered
      // here, without a fiber: the cheapest path for what load balancers and SDKs poll most.
      // Not a body in parts: under backpressure it is still being written when this callback
      // returns, and uWS aborts the process when that happens with no abort handler attached.
      if (Exit.isExit(handled) && Exit.isSuccess(handled)) {
        const reply = handled.value as Reply<unknown>
        if (reply._tag === "Full" && !Array.isArray(reply.body)) {
          x.finish(sendFull(x, reply))
          return
        }
      }
      // Registered only now: an answer written within this callback needs no abort handler, and
      // each one is a persistent handle uWS creates and destroys per request.
      res.onAborted(() => x.abort())
      const program = handled.pipe(
        Effect.flatMap((reply) => send(x, reply)),
        Effect.catchCause((cause) => failed(x, cause)),
        // Every log line of the request (actors included) carries its id.
        Effect.annotateLogs("requestId", x.requestId)
      )
      const fiber = runFork(program)
      x.fiber = fiber
      fibers.add(fiber)
      fiber.addObserver((exit) => {
        fibers.delete(fiber)
        x.finish(Exit.isSuccess(exit) ? exit.value : 499)
        if (fibers.size === 0) emptied?.()
      })
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
        const awaitEmpty = Effect.callback<void>((resume) => {
          if (fibers.size === 0) return resume(Effect.void)
          emptied = () => resume(Effect.void)
        })
        const settled = yield* awaitEmpty.pipe(Effect.timeoutOption(grace))
        if (settled._tag === "None") {
          yield* Effect.logWarning("shutdown deadline reached; interrupting in-flight requests", { inFlight: fibers.size })
          yield* Fiber.interruptAll([...fibers])
        }
        app.close()
      })

    yield* Scope.addFinalizer(scope, Effect.suspend(() => {
      stopListening()
      app.close()
      return Fiber.interruptAll([...fibers])
    }))

    return {
      port,
      app,
      drain,
      inFlight: () => fibers.size
    } satisfies HttpServer
  })
