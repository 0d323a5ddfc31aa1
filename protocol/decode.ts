/**
 * Request decoding shared by handlers: JSON bodies and query values validated with the same
 * schemas the OpenAPI document is generated from. Failures are 400s that say what was wrong.
 *
 * Every JSON text a client sends (a body, or JSON inside a form field) is parsed by `parseJson`,
 * which refuses, anywhere in the value (object keys included), a string that holds U+0000 or a
 * lone surrogate. PostgreSQL text and jsonb cannot hold U+0000 (the insert fails: a 500 with a
 * stack per request, before this rule), and a lone surrogate is not a Unicode scalar value: the
 * drivers write it as U+FFFD, so it would be stored silently changed. No field of the API has a
 * use for either, so one rule here replaces a check per field and per route.
 */
import { Effect, Schema } from "effect"
import { type ApiError, badRequest } from "./ApiError.ts"
import type { RequestContext } from "./Http.ts"

/** JSON is UTF-8 (RFC 8259 8.1): bytes that are not are refused, not replaced with U+FFFD. */
const strictUtf8 = new TextDecoder("utf-8", { fatal: true })

/**
 * Why `value` cannot be accepted, or undefined: the path of the first string (or key) holding
 * U+0000 or a lone surrogate. Iterative: a body nested 20,000 deep (JSON.parse takes it) would
 * overflow the stack of a recursive walk.
 */
export const unstorableString = (value: unknown): string | undefined => {
  const stack: Array<readonly [unknown, string]> = [[value, "$"]]
  while (stack.length > 0) {
    const [v, at] = stack.pop()!
    if (typeof v === "string") {
      const problem = stringProblem(v)
      if (problem !== undefined) return `${shortPath(at)} ${problem}`
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push([v[i], `${at}[${i}]`])
    } else if (v !== null && typeof v === "object") {
      for (const [k, inner] of Object.entries(v)) {
        const shown = `${at}.${k.replaceAll("\u0000", "\\u0000").slice(0, 64)}`
        const problem = stringProblem(k)
        if (problem !== undefined) return `the key ${shortPath(shown)} ${problem}`
        stack.push([inner, shown])
      }
    }
  }
  return undefined
}

/**
 * A path as the error shows it: its two ends when long (an outside attack nested a NUL 100,000
 * objects deep and got its 300 KB path back in the 400).
 */
const shortPath = (at: string): string => (at.length <= 200 ? at : `${at.slice(0, 96)}…${at.slice(-96)}`)

/** `String.prototype.isWellFormed` (Node 20; the project's TypeScript lib predates it): no lone surrogate. */
const wellFormed = (s: string): boolean => (s as unknown as { isWellFormed(): boolean }).isWellFormed()

const stringProblem = (s: string): string | undefined =>
  s.includes("\u0000") ? "contains the NUL character (U+0000), which no field accepts"
  : !wellFormed(s) ? "contains a lone surrogate (not a Unicode character)"
  : undefined

/** A client's JSON text parsed under the rule above; the failure says what was wrong and where. */
export const parseJson = (text: string): { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly message: string } => {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (e) {
    return { ok: false, message: `not valid JSON: ${(e as Error).message}` }
  }
  const problem = unstorableString(value)
  return problem === undefined ? { ok: true, value } : { ok: false, message: problem }
}

/** A request body's JSON: strict UTF-8, then `parseJson`; a 400 in the spec's error body otherwise. */
const parseBody = (bytes: Uint8Array): Effect.Effect<unknown, ApiError> => {
  let text: string
  try {
    text = strictUtf8.decode(bytes)
  } catch (e) {
    return Effect.fail(badRequest(`request body is not valid JSON: ${(e as Error).message}`))
  }
  const parsed = parseJson(text)
  return parsed.ok ? Effect.succeed(parsed.value) : Effect.fail(badRequest(`request body is ${parsed.message.startsWith("not valid JSON") ? parsed.message : `refused: ${parsed.message}`}`))
}

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
    const json = yield* parseBody(bytes)
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
    const value = yield* parseBody(bytes)
    if (typeof value !== "object" || value === null || Array.isArray(value)) return yield* Effect.fail(badRequest("the request body must be a JSON object"))
    return value as Record<string, unknown>
  })
