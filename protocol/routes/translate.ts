/**
 * Append-only chunk translation (SPEC endpoint 23, 4.1 rule 5, 4.3) and the pair listing.
 *
 * JSON answers `{appended}`. `?stream=true` or `Accept: text/event-stream` answers server-sent
 * events: `delta` `{appended}` per piece (concatenate in order), then `done`
 * `{model, source, target}`; or one `error` `{code, message}` before the stream closes. What can be
 * known before answering (body, languages, pair, a pair whose engine is still starting) is a plain
 * 400 or 503; the rate limit, credits and the engine's failures are reported in the stream. A client that disconnects interrupts the fiber, which
 * stops the engine work (queued Apertium chunks are dropped, a chat request is aborted).
 *
 * Rate limit: a token bucket per credential (API key; OAuth tokens: the user), anonymous callers
 * per client address: protocol/RateLimiter.ts (one bucket for all instances on the database),
 * numbers from the configuration.
 */
import { Effect } from "effect"
import { prepareChunk, runChunk } from "../../actors/ChunkTranslation.ts"
import { iso1Of } from "../../engines/translate/LanguageCodes.ts"
import { Translator } from "../../engines/translate/Translator.ts"
import type { Credits } from "../../storage/Credits.ts"
import { ApiError, toApiError } from "../ApiError.ts"
import { decodeJsonBody } from "../decode.ts"
import { Reply, type RequestContext, type Route } from "../Http.ts"
import type { RateLimiter } from "../RateLimiter.ts"
import { ErrorBody } from "../schemas/ErrorBody.ts"
import { TranslateChunkRequest, TranslateChunkResponse, TranslationPairs } from "../schemas/Translate.ts"

export interface TranslateRouteOptions {
  readonly apiBase: string
  readonly maxJsonBodyBytes: number
  readonly limiter: RateLimiter
}

const errorDoc = (description: string) => ({ description, schema: ErrorBody })

/** SPEC 4.3: the query flag or the Accept header selects the event stream. */
const wantsEvents = (ctx: RequestContext) =>
  ctx.request.query.get("stream") === "true" || (ctx.request.headers["accept"] ?? "").toLowerCase().includes("text/event-stream")

const callerOf = (ctx: RequestContext) =>
  ctx.principal === null ? `addr:${ctx.request.remoteAddress}` : ctx.principal.keyId !== null ? `key:${ctx.principal.keyId}` : `user:${ctx.principal.userId}`

const encoder = new TextEncoder()
const event = (name: string, data: unknown) => encoder.encode(`event: ${name}\ndata: ${JSON.stringify(data)}\n\n`)

const SSE_HEADERS = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
  // nginx and similar proxies buffer responses unless told not to; events must pass at once.
  "x-accel-buffering": "no"
}

/** The body of an `error` event: the JSON error's code and message. */
const errorEvent = (failure: unknown) => {
  const { error, internal } = toApiError(failure)
  return { body: event("error", { code: error.code, message: error.message }), internal, failure }
}

export const translateRoutes = (options: TranslateRouteOptions): ReadonlyArray<Route<Translator | Credits>> => [
  {
    method: "POST",
    path: `${options.apiBase}/translate/chunk`,
    auth: "optional",
    operationId: "translateChunk",
    summary: "Translate new source text and answer only what to append to the translation so far (JSON, or SSE with ?stream=true)",
    tags: ["translate"],
    requestBody: { contentType: "application/json", schema: TranslateChunkRequest, required: true },
    responses: {
      200: { description: "JSON {appended}; with ?stream=true or Accept: text/event-stream, events delta {appended}, done {model, source, target}, or error {code, message}", schema: TranslateChunkResponse },
      400: errorDoc("malformed body, new_source over 5000 characters (text_too_long), an unknown language (unsupported_language) or a pair not installed (unsupported_language_pair; the message lists the pairs)"),
      401: errorDoc("an invalid credential"),
      402: errorDoc("out of credits (one per started 100 characters of new_source)"),
      429: errorDoc("rate_limited: over the per-credential chunk rate (Retry-After says when to retry)"),
      502: errorDoc("the translation engine failed (engine_failed, engine_unavailable)"),
      503: errorDoc("the pair's engine is starting (engine_starting: at start-up or after it stopped) or too many chunks wait for it (server_busy); Retry-After says when to retry")
    },
    handler: (ctx) =>
      Effect.gen(function*() {
        const events = wantsEvents(ctx)
        const decision = yield* options.limiter.take(callerOf(ctx))
        if (!decision.allowed) {
          const message = `more than ${options.limiter.options.perSecond} translation chunks per second (bursts of ${options.limiter.options.burst}); retry in ${decision.retryAfterS} s`
          const headers = { "retry-after": String(decision.retryAfterS) }
          if (!events) return yield* new ApiError({ status: 429, code: "rate_limited", message, headers })
          return Reply.stream(200, { ...SSE_HEADERS, ...headers }, (writer) => writer.write(event("error", { code: "rate_limited", message })))
        }
        const body = yield* decodeJsonBody(TranslateChunkRequest, ctx, options.maxJsonBodyBytes)
        const chunk = yield* prepareChunk({
          newSource: body.new_source,
          source: body.source,
          target: body.target,
          previous: body.previous ?? "",
          userId: ctx.principal?.userId ?? null
        })
        if (!events) {
          let appended = ""
          yield* runChunk(chunk, (piece) => Effect.sync(() => void (appended += piece)))
          return Reply.json(200, { appended })
        }
        return Reply.stream(200, SSE_HEADERS, (writer) =>
          runChunk(chunk, (piece) => writer.write(event("delta", { appended: piece }))).pipe(
            Effect.flatMap(() => writer.write(event("done", { model: chunk.model, source: body.source, target: body.target }))),
            Effect.catch((failure) => {
              const e = errorEvent(failure)
              return (e.internal ? Effect.logError("translation failed", failure) : Effect.logInfo("translation failed", { reason: String((failure as Error).message ?? failure) })).pipe(
                Effect.andThen(writer.write(e.body))
              )
            })
          ))
      })
  },
  {
    method: "GET",
    path: `${options.apiBase}/translate/languages`,
    auth: "none",
    operationId: "listTranslationPairs",
    summary: "The translation pairs this deployment really has, and the engine of each",
    tags: ["translate"],
    responses: { 200: { description: "the pairs", schema: TranslationPairs } },
    handler: () =>
      Effect.gen(function*() {
        const pairs = yield* (yield* Translator).pairs
        return Reply.json(200, {
          pairs: pairs.map((p) => ({
            source: iso1Of(p.source) ?? p.source,
            target: iso1Of(p.target) ?? p.target,
            source_code: p.source,
            target_code: p.target,
            engine: p.engine,
            mode: p.mode
          }))
        })
      })
  }
]
