/**
 * One HTTP exchange of the uWS bridge (runtime/HttpServer.ts): the request copied out of uWS,
 * its body reader, and every way an answer leaves (a whole reply, a stream under backpressure,
 * an error body), with the framing rules the header of HttpServer.ts lists. `Bridge` is what
 * one server keeps across its exchanges.
 */
import type uWS from "@based/uws"
import { Cause, Effect, type Fiber } from "effect"
import { randomBytes } from "node:crypto"
import { ApiError, badRequest, errorBody, statusText, toApiError } from "../protocol/ApiError.ts"
import { authenticateChallenge, bearerToken, conflictingCredentials, isCredentialHeader } from "../protocol/Authorization.ts"
import type { BodyReader, HttpRequest, Principal, Reply, RequestContext, ResponseWriter } from "../protocol/Http.ts"
import type { HttpServerOptions } from "./HttpServer.ts"
import type { HttpMetrics } from "./Metrics.ts"
import { RequestBody } from "./RequestBody.ts"

const methodsWithBody = new Set(["POST", "PUT", "PATCH", "DELETE"])

/** What one server keeps across its requests: where they are counted and logged, their ids, its challenge. */
export class Bridge {
  readonly metrics: HttpMetrics
  readonly accessLog: boolean
  readonly spillDir: string | undefined
  /**
   * Request ids: a random per-server prefix and a counter. Unique across restarts and instances
   * with overwhelming probability, and far cheaper per request than a UUID.
   */
  private readonly idPrefix = randomBytes(6).toString("base64url")
  private idCounter = 0
  private readonly resourceMetadataUrl: () => string | undefined

  constructor(options: Pick<HttpServerOptions<unknown>, "metrics" | "accessLog" | "resourceMetadataUrl" | "spillDir">) {
    this.metrics = options.metrics
    this.accessLog = options.accessLog ?? false
    this.spillDir = options.spillDir
    this.resourceMetadataUrl = options.resourceMetadataUrl ?? (() => undefined)
  }

  nextRequestId(): string {
    return `${this.idPrefix}-${(++this.idCounter).toString(36)}`
  }

  /** The WWW-Authenticate value of a 401; `tokenRefused`: a bearer token was presented. */
  challenge(tokenRefused: boolean): string {
    return authenticateChallenge(this.resourceMetadataUrl(), tokenRefused)
  }
}

/** Shared by requests whose route has no parameters (the router sets its own). */
const noParams: Readonly<Record<string, string>> = Object.freeze({})

/** Shared by requests without a body (GET, HEAD, ...): reading one gives an empty body. */
const noBody: BodyReader = {
  bytes: () => Effect.succeed(new Uint8Array(0)),
  chunks: () => Effect.succeed(0)
}

/**
 * Per-request state, and itself the handler's `RequestContext` and `HttpRequest`. A class with
 * prototype getters rather than closures or object literals: this runs for every request, and
 * allocation is most of the bridge's cost (a context literal with two getters per request was
 * measured at a tenth of the JS time of `GET /models` under load).
 */
export class Exchange implements RequestContext, HttpRequest {
  readonly started = performance.now()
  readonly method: string
  readonly path: string
  readonly rawQuery: string
  readonly headers: Record<string, string> = {}
  readonly requestId: string
  /** The streaming reader; undefined for methods without a body. */
  readonly reader: RequestBody | undefined
  principal: Principal | null = null
  aborted = false
  headSent = false
  /** Set when the head itself is unacceptable (repeated credential or Content-Length). */
  malformed: ApiError | undefined = undefined
  /** The body's length is ambiguous: answer and close, nothing after it can be trusted. */
  framingBroken = false
  onWritable: (() => void) | undefined = undefined
  fiber: Fiber.Fiber<unknown, unknown> | undefined = undefined
  routeLabel = "unmatched"
  params: Readonly<Record<string, string>> = noParams
  private queryParams: URLSearchParams | undefined

  constructor(readonly bridge: Bridge, readonly res: uWS.HttpResponse, req: uWS.HttpRequest) {
    this.method = req.getCaseSensitiveMethod().toUpperCase()
    this.path = req.getUrl()
    this.rawQuery = req.getQuery() ?? ""
    const headers = this.headers
    req.forEach((k, v) => {
      const earlier = headers[k]
      if (earlier !== undefined) this.repeated(k, earlier, v)
      headers[k] = v
    })
    // Both credential headers, naming different keys: refused like a repeated one.
    this.malformed ??= conflictingCredentials(headers)
    // The query's counterpart of the rules for path parameters (Router) and JSON strings
    // (decode.ts): PostgreSQL text cannot hold NUL and no parameter has a use for it, so one
    // check here covers every route, the ones that read `query` directly (OAuth) included.
    if (this.rawQuery.includes("%00")) this.malformed ??= badRequest("the query string contains a NUL character (%00)")
    this.requestId = validRequestId(headers["x-request-id"]) ?? bridge.nextRequestId()
    if (methodsWithBody.has(this.method)) {
      const lengthHeader = headers["content-length"]
      const declared = lengthHeader !== undefined && /^\d+$/.test(lengthHeader) ? Number(lengthHeader) : undefined
      const expectsBody = declared === undefined ? headers["transfer-encoding"] !== undefined : declared > 0
      // onData must be attached now: uWS drops body bytes that arrive with no handler.
      this.reader = new RequestBody(res, declared, expectsBody, bridge.spillDir)
    }
  }

  /**
   * A header sent twice. Two different Content-Lengths make the body's end ambiguous (uWS
   * frames by the first, a proxy in front may have used the other: request smuggling), so the
   * connection cannot continue. Two credentials are refused rather than picking one.
   */
  private repeated(name: string, earlier: string, value: string): void {
    if (name === "content-length" && earlier.trim() !== value.trim()) {
      this.framingBroken = true
      this.malformed = badRequest("conflicting Content-Length headers", "invalid_request")
    } else if (isCredentialHeader(name)) {
      this.malformed ??= badRequest(`the ${name} header is sent more than once`, "invalid_request")
    }
  }

  /**
   * Frees the request body before the reply is written and says whether the connection can
   * stay open after it. A body still arriving is dropped as it comes (uWS frames its rest by
   * Content-Length), up to `discardLimitBytes`: the client, still uploading, can then read the
   * reply instead of having its connection reset under it. A chunked body, or a rest larger
   * than the limit, cannot be waited out: the connection closes after the reply.
   */
  keepsConnection(): boolean {
    const body = this.reader
    if (body === undefined) return true
    const remaining = body.remaining
    body.discard()
    return remaining !== undefined && remaining <= discardLimitBytes
  }

  get query(): URLSearchParams {
    return (this.queryParams ??= new URLSearchParams(this.rawQuery))
  }

  /** The handler's view of this exchange, once the credential is resolved. */
  context(principal: Principal | null): RequestContext {
    this.principal = principal
    return this
  }

  get request(): HttpRequest {
    return this
  }

  get body(): BodyReader {
    return this.reader ?? noBody
  }

  private remote: string | undefined
  /** The peer's address, read from uWS on first use (most requests never ask). */
  get remoteAddress(): string {
    if (this.remote === undefined) {
      this.remote = this.aborted ? "" : Buffer.from(this.res.getRemoteAddressAsText()).toString()
    }
    return this.remote
  }

  abort(): void {
    this.aborted = true
    this.reader?.abort()
    this.fiber?.interruptUnsafe()
    const w = this.onWritable
    this.onWritable = undefined
    w?.()
  }

  /** Answers synchronously, before any fiber exists (404, 405, draining). */
  reject(error: ApiError, close = false): void {
    sendError(this, error, close)
    this.finish(error.status)
  }

  finish(status: number): void {
    const final = this.aborted ? 499 : status
    const ms = performance.now() - this.started
    this.bridge.metrics.record(this.routeLabel, this.method, final, ms / 1000)
    if (this.bridge.accessLog) {
      // Written directly, not through Effect's logger: this runs outside any fiber, per request.
      process.stdout.write(JSON.stringify({
        time: new Date().toISOString(),
        level: "debug",
        msg: "request",
        method: this.method,
        path: this.path,
        route: this.routeLabel,
        status: final,
        ms: Math.round(ms * 10) / 10,
        requestId: this.requestId
      }) + "\n")
    }
  }
}

export const failed = (x: Exchange, cause: Cause.Cause<unknown>): Effect.Effect<number> => {
  if (Cause.hasInterruptsOnly(cause)) return Effect.interrupt
  const failure = Cause.squash(cause)
  const { error, kind } = toApiError(failure)
  const fields = { requestId: x.requestId, route: x.routeLabel, method: x.method, status: error.status, code: error.code }
  // Only a defect gets a stack (see FailureKind): anything a client or an outage can cause at
  // will is one short line, or the log is theirs to fill.
  const log = kind === "defect"
    ? Effect.logError("request failed", { ...fields, cause: Cause.pretty(cause) })
    : kind === "outage"
    ? Effect.logWarning("request failed", { ...fields, reason: failureReason(failure) })
    : Effect.logDebug("request rejected", fields)
  return Effect.as(log, 0).pipe(Effect.map(() => {
    if (x.aborted) return 499
    if (x.headSent) {
      // Mid-stream failure: no error body can follow audio; the short read tells the client.
      // Deferred a tick: inside the uWS callback the response is corked, and closing a corked
      // socket would discard the segments already written.
      setImmediate(() => {
        if (!x.aborted) x.res.close()
      })
      return 200
    }
    sendError(x, error, false)
    return error.status
  }))
}

/** The first line of a failure's message, bounded: what an outage's warning says instead of a stack. */
const failureReason = (failure: unknown): string => {
  const m = (failure as { message?: unknown } | null)?.message
  const text = typeof m === "string" && m !== "" ? m : String((failure as { _tag?: unknown } | null)?._tag ?? failure)
  return text.split("\n", 1)[0]!.slice(0, 300)
}

const statusEffects = new Map<number, Effect.Effect<number>>()
const statusEffect = (status: number): Effect.Effect<number> => {
  let e = statusEffects.get(status)
  if (e === undefined) statusEffects.set(status, (e = Effect.succeed(status)))
  return e
}

const validRequestId = (v: string | undefined) => (v !== undefined && /^[\w.:-]{1,128}$/.test(v) ? v : undefined)

/** "200 OK" and friends, built once: a template string per response shows in profiles. */
const statusLines = new Map(Object.entries(statusText).map(([code, text]) => [Number(code), `${code} ${text}`]))

const writeHead = (res: uWS.HttpResponse, status: number, requestId: string, headers: Readonly<Record<string, string>>) => {
  res.writeStatus(statusLines.get(status) ?? `${status} `)
  res.writeHeader("x-request-id", requestId)
  for (const k in headers) res.writeHeader(k, headers[k]!)
}

export const sendError = (x: Exchange, error: ApiError, closeConnection: boolean) => {
  const headers: Record<string, string> = { "content-type": "application/json", ...error.headers }
  if (error.status === 401) headers["www-authenticate"] = x.bridge.challenge(bearerToken(x.headers["authorization"]) !== undefined)
  deliver(x, error.status, headers, errorBody(error), closeConnection)
}

type Body = string | Uint8Array | ReadonlyArray<Uint8Array>

const bodyLength = (body: Body): number =>
  typeof body === "string"
    ? Buffer.byteLength(body)
    : body instanceof Uint8Array
    ? body.byteLength
    : body.reduce((n, part) => n + part.byteLength, 0)

/**
 * Writes a whole reply. HEAD gets the head alone, with the Content-Length GET would have: a
 * body there would be read as the start of the next response.
 */
const deliver = (
  x: Exchange,
  status: number,
  headers: Readonly<Record<string, string>>,
  body: Body,
  closeConnection: boolean,
  onSent?: () => void
) => {
  if (x.aborted) return
  const close = !x.keepsConnection() || closeConnection
  const res = x.res
  res.cork(() => {
    writeHead(res, status, x.requestId, headers)
    if (x.method === "HEAD") {
      // Not endWithoutBody(length): uWS 20.51 then waits for that many bytes and keeps the
      // response pending, so the next request on the connection closes it. A closing answer
      // (draining, broken framing) only says Content-Length: 0; nothing follows it anyway.
      if (close) {
        res.endWithoutBody(0, true)
      } else {
        res.writeHeader("Content-Length", String(bodyLength(body)))
        res.endWithoutBody()
      }
      onSent?.()
    } else if (typeof body === "string" || body instanceof Uint8Array) {
      res.end(body, close)
      onSent?.()
    } else if (close) {
      // tryEnd cannot ask for the connection to close; closing answers are rare (draining).
      res.end(Buffer.concat(body), true)
      onSent?.()
    } else {
      endParts(res, body, bodyLength(body), onSent)
    }
  })
  x.headSent = true
}

/**
 * Sends body parts with tryEnd under their total length. tryEnd writes what the socket takes
 * and keeps nothing (unlike end and write, which buffer the rest in uWS), so on backpressure the
 * parts are held here and the rest is written from uWS's write offset when the socket drains.
 * A client that stops reading is dropped by uWS's idle timeout, which fires onAborted.
 */
const endParts = (res: uWS.HttpResponse, parts: ReadonlyArray<Uint8Array>, total: number, onSent: (() => void) | undefined): void => {
  if (total === 0) {
    res.end()
    return onSent?.()
  }
  const writeFrom = (offset: number): boolean => {
    let at = 0
    for (const part of parts) {
      const next = at + part.byteLength
      if (next > offset && part.byteLength > 0) {
        const [ok, done] = res.tryEnd(offset > at ? part.subarray(offset - at) : part, total)
        if (done) {
          onSent?.()
          return true
        }
        if (!ok) return false
      }
      at = next
    }
    return true
  }
  if (!writeFrom(0)) res.onWritable((offset) => writeFrom(offset))
}

/**
 * Bytes of a request body still to come that are read and dropped after an early reply
 * (401 before an upload was read, 413 from its Content-Length), so that a client still
 * uploading reads the reply instead of a reset. Above the largest upload any route accepts
 * (100 MB for transcription), so the discard never holds a connection longer than an accepted
 * upload could. The time is bounded by uWS, which drops a connection whose body arrives slower
 * than 16 KB/s for 10 s.
 */
export const discardLimitBytes = 128 * 1024 * 1024

/** Writes a whole reply at once; returns its status. */
export const sendFull = (exchange: Exchange, reply: Extract<Reply, { _tag: "Full" }>): number => {
  deliver(exchange, reply.status, reply.headers, reply.body, false, reply.onSent)
  return reply.status
}

export const send = <R>(exchange: Exchange, reply: Reply<R>): Effect.Effect<number, unknown, R> => {
  const res = exchange.res
  const requestId = exchange.requestId
  if (exchange.aborted) return statusEffect(499)
  // `send` runs inside the fiber (a flatMap continuation), so writing here is in order.
  if (reply._tag === "Full") return statusEffect(sendFull(exchange, reply))
  const close = !exchange.keepsConnection()
  if (exchange.method === "HEAD") {
    // The stream is not run: a HEAD answer has no body, and its length is unknown.
    res.cork(() => {
      writeHead(res, reply.status, requestId, reply.headers)
      res.endWithoutBody()
    })
    exchange.headSent = true
    return statusEffect(reply.status)
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
        res.end("", close)
      })
      exchange.headSent = true
    }
    return reply.status
  })
}
