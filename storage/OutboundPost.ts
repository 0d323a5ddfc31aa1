/**
 * One https POST to an address a caller registered (webhook deliveries), through the outbound
 * address guard (storage/OutboundAddress.ts): the host is resolved and checked at every attempt
 * (a name that pointed outward at registration may point inward later) and the connection goes
 * to the checked address. Redirects are not followed: a receiver answers where it was
 * registered, and a 3xx counts as a failed attempt.
 *
 * The answer body is read and dropped (at most 64 KiB, so a receiver cannot make us buffer).
 */
import { Data, Effect } from "effect"
import * as https from "node:https"
import * as tls from "node:tls"
import type { OutboundGuard } from "./OutboundAddress.ts"

export class OutboundPostError extends Data.TaggedError("OutboundPostError")<{
  /** `Refused`: not a public address. `Unreachable`: DNS, connect, TLS or read failed. */
  readonly reason: "BadUrl" | "Refused" | "Unreachable" | "TimedOut"
  readonly message: string
}> {}

export interface PostOptions {
  readonly guard: OutboundGuard
  readonly timeoutMs: number
  /** Extra trusted CA certificates (PEM), e.g. a test receiver's. */
  readonly ca?: string | undefined
}

/** The address as the log may show it: no credentials, no query. */
export const addressForLog = (url: URL) => `${url.protocol}//${url.host}${url.pathname}`

/** Syntax only: https, no credentials. The guard checks where it points. */
export const postUrlProblem = (raw: string): string | undefined => {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return "not a URL"
  }
  if (url.protocol !== "https:") return "the URL must be https"
  if (url.username !== "" || url.password !== "") return "the URL must not carry credentials"
  return undefined
}

const MAX_ANSWER_BYTES = 64 * 1024

/** Resolves with the receiver's status code. */
export const postJson = (rawUrl: string, body: string, headers: Record<string, string>, options: PostOptions) =>
  Effect.gen(function*() {
    const problem = postUrlProblem(rawUrl)
    if (problem !== undefined) return yield* new OutboundPostError({ reason: "BadUrl", message: problem })
    const url = new URL(rawUrl)
    const target = yield* options.guard.check(url.hostname).pipe(
      Effect.mapError((e) =>
        new OutboundPostError({ reason: e.reason === "Refused" ? "Refused" : "Unreachable", message: `${addressForLog(url)}: ${e.message}` })
      )
    )
    const send = Effect.callback<number, OutboundPostError>((resume, signal) => {
      const request = https.request(url, {
        method: "POST",
        lookup: target.lookup,
        agent: false,
        ...(options.ca !== undefined ? { ca: [...tls.rootCertificates, options.ca] } : {}),
        headers: {
          ...headers,
          "content-type": "application/json",
          "content-length": String(Buffer.byteLength(body)),
          "user-agent": "speech-service/1 (webhook)"
        },
        signal
      }, (res) => {
        let seen = 0
        res.on("data", (chunk: Buffer) => {
          seen += chunk.length
          if (seen > MAX_ANSWER_BYTES) res.destroy()
        })
        // The status is what counts; a receiver that cuts its answer short has still answered.
        res.on("close", () => resume(Effect.succeed(res.statusCode ?? 0)))
        res.on("error", () => {})
      })
      request.on("error", (e) => {
        if (!signal.aborted) resume(Effect.fail(new OutboundPostError({ reason: "Unreachable", message: `${addressForLog(url)}: ${e.message}` })))
      })
      request.end(body)
    })
    return yield* send.pipe(
      Effect.timeoutOrElse({
        duration: options.timeoutMs,
        orElse: () => Effect.fail(new OutboundPostError({ reason: "TimedOut", message: `${addressForLog(url)} did not answer within ${options.timeoutMs} ms` }))
      })
    )
  })
