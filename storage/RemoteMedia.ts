/**
 * Downloads a media file named by URL (`cloud_storage_url` / `source_url`) to a temporary file,
 * as a server that fetches for its callers must: https only, no credentials in the URL; every
 * host, the first and each redirect target (at most 5), passes the outbound address guard
 * (storage/OutboundAddress.ts) and the connection goes to the address it checked; size and time
 * limited while the bytes arrive.
 *
 * The reasons are precise for the log (written here, with the request id the HTTP edge puts on
 * every line); the protocol table gives the client one answer for all network failures, so the
 * errors cannot be used to tell open ports, live hosts or refused ranges apart.
 */
import { Data, Effect } from "effect"
import { randomBytes } from "node:crypto"
import { createWriteStream, mkdirSync, rmSync, type WriteStream } from "node:fs"
import * as https from "node:https"
import * as path from "node:path"
import * as tls from "node:tls"
import { type CheckedTarget, makeOutboundGuard, type OutboundGuard } from "./OutboundAddress.ts"

export class RemoteMediaError extends Data.TaggedError("RemoteMediaError")<{
  /**
   * `BadUrl`: the caller's URL is not an https URL without credentials (says nothing about the
   * network). `TooLarge`: a host that passed the guard served more than the limit. The rest are
   * network outcomes: `Refused` (an address is not public), `Unresolvable`, `Unreachable`
   * (connect, TLS or read failed), `HttpStatus` (not 200), `TooManyRedirects`, `BadRedirect`
   * (a redirect to a non-https or credentialed URL), `TimedOut`.
   */
  readonly reason:
    | "BadUrl"
    | "TooLarge"
    | "Refused"
    | "Unresolvable"
    | "Unreachable"
    | "HttpStatus"
    | "TooManyRedirects"
    | "BadRedirect"
    | "TimedOut"
  readonly message: string
}> {}

export interface FetchOptions {
  readonly tmpDir: string
  readonly maxBytes: number
  readonly timeoutMs: number
  readonly allowPrivate: boolean
  /** Extra trusted CA certificates (PEM), e.g. a test server's. */
  readonly ca?: string | undefined
  readonly maxRedirects?: number
  /** The address guard; by default the public-address rule (or none with `allowPrivate`). */
  readonly guard?: OutboundGuard
}

const fail = (reason: RemoteMediaError["reason"], message: string) => new RemoteMediaError({ reason, message })

/** The URL as the log may show it: no credentials, no query (signed storage URLs carry secrets there). */
const forLog = (url: URL) => `${url.protocol}//${url.host}${url.pathname}`

const getOnce = (url: URL, target: CheckedTarget, options: FetchOptions, file: string) =>
  Effect.callback<{ redirect?: string; bytes?: number }, RemoteMediaError>((resume, signal) => {
    let out: WriteStream | undefined
    /** Closes the file first: the caller removes it, and a stream still opening would recreate it. */
    const closeFile = (then: () => void) => {
      if (out === undefined || out.closed) return then()
      out.once("close", then)
      out.destroy()
    }
    let failed = false
    const failAfterClose = (error: RemoteMediaError) => {
      failed = true
      closeFile(() => resume(Effect.fail(error)))
    }
    const request = https.get(url, {
      // Connect to the addresses the guard checked, not to a fresh lookup of the name; no pooled
      // socket, which could have been opened for another check.
      lookup: target.lookup,
      agent: false,
      // `ca` replaces Node's root store; keep the public roots beside the extra certificates.
      ...(options.ca !== undefined ? { ca: [...tls.rootCertificates, options.ca] } : {}),
      headers: { "user-agent": "speech-service/1 (media fetch)" },
      signal
    }, (response) => {
      const status = response.statusCode ?? 0
      if (status >= 300 && status < 400 && response.headers.location) {
        response.resume()
        let next: string
        try {
          next = new URL(response.headers.location, url).toString()
        } catch {
          return resume(Effect.fail(fail("BadRedirect", `${forLog(url)} redirected to an unparsable location`)))
        }
        return resume(Effect.succeed({ redirect: next }))
      }
      if (status !== 200) {
        response.resume()
        return resume(Effect.fail(fail("HttpStatus", `${forLog(url)} answered ${status}`)))
      }
      const tooLarge = () => fail("TooLarge", `the file at the URL is larger than the limit of ${options.maxBytes} bytes`)
      const declared = Number(response.headers["content-length"] ?? NaN)
      if (declared > options.maxBytes) {
        response.destroy()
        return resume(Effect.fail(tooLarge()))
      }
      const file$ = createWriteStream(file)
      out = file$
      // Our disk failing (full, unwritable) is not the URL's fault: an internal fault (500, logged),
      // and never an unlistened 'error' event.
      file$.on("error", (e) => {
        failed = true
        response.destroy()
        resume(Effect.die(e))
      })
      let bytes = 0
      response.on("data", (chunk: Buffer) => {
        bytes += chunk.length
        if (bytes > options.maxBytes) {
          response.destroy()
          failAfterClose(tooLarge())
        }
      })
      response.pipe(file$)
      // A destroyed stream closes too: only a stream that was not failed has the whole file.
      file$.on("close", () => failed || resume(Effect.succeed({ bytes })))
      response.on("error", (e) => failAfterClose(fail("Unreachable", `reading ${forLog(url)} failed: ${e.message}`)))
    })
    request.on("error", (e) => failAfterClose(fail("Unreachable", `cannot fetch ${forLog(url)}: ${e.message}`)))
    // Interrupted (timeout, client gone): the request is aborted through `signal`; close the file.
    return Effect.callback<void>((done) => closeFile(() => done(Effect.void)))
  })

/** The syntax rules, the same for the caller's URL and each redirect target. */
const syntaxProblem = (url: URL): string | undefined =>
  url.protocol !== "https:"
    ? `only https URLs are fetched, got ${url.protocol}`
    : url.username !== "" || url.password !== ""
    ? "URLs with credentials are refused"
    : undefined

/** Downloads `rawUrl` to a new file under `tmpDir`; the caller removes it (see `withRemoteMedia`). */
export const fetchToFile = (rawUrl: string, options: FetchOptions) =>
  Effect.gen(function*() {
    let url: URL
    try {
      url = new URL(rawUrl)
    } catch {
      return yield* fail("BadUrl", `not a URL: ${rawUrl.slice(0, 200)}`)
    }
    const problem = syntaxProblem(url)
    if (problem !== undefined) return yield* fail("BadUrl", problem)
    const guard = options.guard ?? makeOutboundGuard({ allowPrivate: options.allowPrivate })
    const maxRedirects = options.maxRedirects ?? 5
    mkdirSync(options.tmpDir, { recursive: true })
    const file = path.join(options.tmpDir, `remote-${randomBytes(8).toString("hex")}`)
    const attempt = Effect.gen(function*() {
      for (let hop = 0; hop <= maxRedirects; hop++) {
        if (hop > 0) {
          const redirectProblem = syntaxProblem(url)
          if (redirectProblem !== undefined) return yield* fail("BadRedirect", `redirect to ${forLog(url)}: ${redirectProblem}`)
        }
        const target = yield* guard.check(url.hostname).pipe(
          Effect.mapError((e) => fail(e.reason, `${forLog(url)}: ${e.message}`))
        )
        const result = yield* getOnce(url, target, options, file)
        if (result.redirect === undefined) return { file, bytes: result.bytes ?? 0 }
        url = new URL(result.redirect)
      }
      return yield* fail("TooManyRedirects", `more than ${maxRedirects} redirects, the last to ${forLog(url)}`)
    })
    return yield* attempt.pipe(
      Effect.timeoutOrElse({
        duration: options.timeoutMs,
        orElse: () => Effect.fail(fail("TimedOut", `fetching ${forLog(url)} took longer than ${options.timeoutMs} ms`))
      }),
      Effect.tapError(() => Effect.sync(() => rmSync(file, { force: true })))
    )
  }).pipe(
    // The client gets one generic answer; the log keeps what really happened.
    Effect.tapError((e) =>
      e.reason === "Refused"
        ? Effect.logWarning("URL fetch refused", { reason: e.reason, detail: e.message })
        : Effect.logInfo("URL fetch failed", { reason: e.reason, detail: e.message })
    )
  )
