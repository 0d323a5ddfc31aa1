/**
 * Request decoding shared by handlers: JSON bodies and query values validated with the same
 * schemas the OpenAPI document is generated from. Failures are 400s that say what was wrong.
 */
import { Effect, Schema } from "effect"
import { type ApiError, badRequest } from "./ApiError.ts"
import type { RequestContext } from "./Http.ts"

/** JSON is UTF-8 (RFC 8259 8.1): bytes that are not are refused, not replaced with U+FFFD. */
const strictUtf8 = new TextDecoder("utf-8", { fatal: true })

const issueText = (cause: unknown): string => {
  const e = cause as { message?: string }
  return (e.message ?? String(cause)).split("\n").slice(0, 6).join("; ")
}

export const decodeJsonBody = <S extends Schema.Top & { readonly DecodingServices: never }>(
  schema: S,
  ctx: RequestContext,
  limitBytes: number
): Effect.Effect<S["Type"], ApiError> =>
  Effect.gen(function*() {
    const bytes = yield* ctx.body.bytes(limitBytes)
    if (bytes.byteLength === 0) return yield* Effect.fail(badRequest("a JSON request body is required"))
    let json: unknown
    try {
      json = JSON.parse(strictUtf8.decode(bytes))
    } catch (e) {
      return yield* Effect.fail(badRequest(`request body is not valid JSON: ${(e as Error).message}`))
    }
    return yield* Schema.decodeUnknownEffect(schema)(json, { errors: "all" }).pipe(
      Effect.mapError((e) => badRequest(`invalid request body: ${issueText(e)}`))
    ) as Effect.Effect<S["Type"], ApiError>
  })

export const decodeQuery = <S extends Schema.Top & { readonly DecodingServices: never }>(
  schema: S,
  ctx: RequestContext
): Effect.Effect<S["Type"], ApiError> =>
  Schema.decodeUnknownEffect(schema)(Object.fromEntries(ctx.request.query), { errors: "all" }).pipe(
    Effect.mapError((e) => badRequest(`invalid query: ${issueText(e)}`))
  ) as Effect.Effect<S["Type"], ApiError>


/** A JSON object body that may be absent (`{}` then); anything but an object is a 400. */
export const optionalJsonObject = (ctx: RequestContext, limitBytes: number): Effect.Effect<Record<string, unknown>, ApiError> =>
  Effect.gen(function*() {
    const bytes = yield* ctx.body.bytes(limitBytes)
    if (bytes.byteLength === 0) return {}
    let value: unknown
    try {
      value = JSON.parse(strictUtf8.decode(bytes))
    } catch (e) {
      return yield* Effect.fail(badRequest(`request body is not valid JSON: ${(e as Error).message}`))
    }
    if (typeof value !== "object" || value === null || Array.isArray(value)) return yield* Effect.fail(badRequest("the request body must be a JSON object"))
    return value as Record<string, unknown>
  })
