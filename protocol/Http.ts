/**
 * Framework-free shapes of one HTTP exchange: what a handler sees and what it returns.
 *
 * `runtime/HttpServer.ts` fills these from uWebSockets.js; handlers in `protocol/routes` never
 * touch uWS. A handler is decode → call → encode and returns a `Reply`: either a complete body,
 * or a stream that writes through a backpressure-aware `ResponseWriter`.
 */
import type { Effect, Schema } from "effect"
import type { Principal } from "../storage/ApiKeys.ts"
import type { ApiError } from "./ApiError.ts"
import type { AuthMode } from "./Authorization.ts"

export type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE"

export interface HttpRequest {
  readonly method: string
  /** Path without the query string, percent-decoding left to the router per segment. */
  readonly path: string
  readonly query: URLSearchParams
  /** Lower-cased header names. */
  readonly headers: Readonly<Record<string, string>>
  readonly requestId: string
  /**
   * The TCP peer's address (IPv4, or IPv6 text). Behind a reverse proxy this is the proxy;
   * no forwarded header is trusted.
   */
  readonly remoteAddress: string
}

/** Reads the request body while it arrives; each call may be made once per request. */
export interface BodyReader {
  /** The whole body, failing with 413 as soon as more than `limitBytes` have arrived. */
  readonly bytes: (limitBytes: number) => Effect.Effect<Uint8Array, ApiError>
  /**
   * Each chunk in order to `onChunk` (copied, safe to keep); the socket is paused while the
   * returned effect runs, so a slow consumer slows the client instead of buffering in memory
   * (what uWS still delivers after the pause goes to a temporary file: runtime/RequestBody.ts).
   */
  readonly chunks: <E>(
    limitBytes: number,
    onChunk: (chunk: Uint8Array) => Effect.Effect<void, E>
  ) => Effect.Effect<number, ApiError | E>
}

/** Who is calling: the one credential type, declared by storage (the lower layer). */
export type { Principal }

export interface RequestContext {
  readonly request: HttpRequest
  readonly params: Readonly<Record<string, string>>
  readonly principal: Principal | null
  readonly body: BodyReader
}

export interface ResponseWriter {
  /** Resolves once uWS has accepted the chunk; waits for `onWritable` under backpressure. */
  readonly write: (chunk: Uint8Array) => Effect.Effect<void>
  /** True once the client has gone; writes after that are dropped. */
  readonly aborted: () => boolean
}

export type Reply<R = never> =
  | {
    readonly _tag: "Full"
    readonly status: number
    readonly headers: Readonly<Record<string, string>>
    /**
     * Parts are sent one after another under the Content-Length of all of them, not joined
     * (except on a connection that closes after the reply: uWS's tryEnd cannot close it).
     */
    readonly body: string | Uint8Array | ReadonlyArray<Uint8Array>
    /**
     * Called once the whole body is in uWS's hands (its buffers may then be reused); not called
     * when the client went away first.
     */
    readonly onSent?: () => void
  }
  | {
    readonly _tag: "Stream"
    readonly status: number
    readonly headers: Readonly<Record<string, string>>
    /** Failures after the head is sent close the connection (SPEC 4.1 rule 3: a short read). */
    readonly write: (writer: ResponseWriter) => Effect.Effect<void, unknown, R>
  }

export const Reply = {
  json: (status: number, value: unknown, headers: Record<string, string> = {}): Reply => ({
    _tag: "Full",
    status,
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(value)
  }),
  bytes: (status: number, body: Uint8Array | string | ReadonlyArray<Uint8Array>, headers: Record<string, string>, onSent?: () => void): Reply => ({
    _tag: "Full",
    status,
    headers,
    body,
    ...(onSent !== undefined ? { onSent } : {})
  }),
  stream: <R>(status: number, headers: Record<string, string>, write: (w: ResponseWriter) => Effect.Effect<void, unknown, R>): Reply<R> => ({
    _tag: "Stream",
    status,
    headers,
    write
  })
}

export type { AuthMode } from "./Authorization.ts"

export interface ResponseDoc {
  readonly description: string
  readonly schema?: Schema.Top
  /** Defaults to application/json when a schema is given. */
  readonly contentType?: string
}

/** A route: its documentation (OpenAPI is generated from these) and its handler. */
export interface Route<R = never> {
  readonly method: Method
  /** OpenAPI-style template, e.g. `/api/v1/voices/{voice_id}`. */
  readonly path: string
  readonly auth: AuthMode
  /** OAuth scope the caller must hold (protocol/Authorization.ts); no route needs one yet. */
  readonly scope?: string
  readonly operationId: string
  readonly summary: string
  readonly tags: ReadonlyArray<string>
  readonly query?: Schema.Top
  readonly requestBody?: { readonly contentType: string; readonly schema: Schema.Top; readonly required?: boolean }
  readonly responses: Readonly<Record<number, ResponseDoc>>
  readonly handler: (ctx: RequestContext) => Effect.Effect<Reply<R>, unknown, R>
}
