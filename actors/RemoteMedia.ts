/**
 * Downloads a media file named by URL (`cloud_storage_url` / `source_url`) to a temporary file,
 * as a server that fetches for its callers must: https only; every address the host resolves to
 * must be public (loopback, private, link-local, unique-local, multicast and the like are refused
 * unless the deployment allows them), and the connection goes to the checked address (no second
 * lookup to rebind); at most 5 redirects, each checked again; size and time limited while the
 * bytes arrive.
 */
import { Data, Effect } from "effect"
import { randomBytes } from "node:crypto"
import * as dns from "node:dns"
import { createWriteStream, mkdirSync, rmSync } from "node:fs"
import * as https from "node:https"
import * as net from "node:net"
import * as path from "node:path"

export class RemoteMediaError extends Data.TaggedError("RemoteMediaError")<{
  readonly reason: "BadUrl" | "Forbidden" | "TooLarge" | "Unreachable" | "HttpStatus" | "TimedOut"
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
}

/** True for addresses a public fetcher must never reach. */
export const isPrivateAddress = (address: string): boolean => {
  if (net.isIPv4(address)) {
    const [a, b] = address.split(".").map(Number) as [number, number]
    return a === 0 || a === 10 || a === 127 || (a === 100 && b >= 64 && b <= 127) || (a === 169 && b === 254) ||
      (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168) || (a === 192 && b === 0) || (a === 198 && (b === 18 || b === 19)) ||
      a >= 224
  }
  const v6 = address.toLowerCase()
  if (v6 === "::" || v6 === "::1") return true
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(v6)
  if (mapped) return isPrivateAddress(mapped[1]!)
  return /^(fc|fd|fe8|fe9|fea|feb|ff)/.test(v6) || v6.startsWith("64:ff9b:") || v6.startsWith("2001:db8:")
}

const fail = (reason: RemoteMediaError["reason"], message: string) => new RemoteMediaError({ reason, message })

const resolveChecked = (host: string, allowPrivate: boolean) =>
  Effect.tryPromise({
    try: () => (net.isIP(host) ? Promise.resolve([{ address: host, family: net.isIP(host) }]) : dns.promises.lookup(host, { all: true })),
    catch: () => fail("Unreachable", `cannot resolve ${host}`)
  }).pipe(
    Effect.flatMap((addresses) => {
      if (addresses.length === 0) return Effect.fail(fail("Unreachable", `cannot resolve ${host}`))
      const blocked = addresses.find((a) => isPrivateAddress(a.address))
      if (blocked !== undefined && !allowPrivate) {
        return Effect.fail(fail("Forbidden", `${host} resolves to a private or local address (${blocked.address}); refused`))
      }
      return Effect.succeed(addresses[0]!)
    })
  )

const getOnce = (url: URL, address: { address: string; family: number }, options: FetchOptions, file: string) =>
  Effect.callback<{ redirect?: string; bytes?: number }, RemoteMediaError>((resume, signal) => {
    const request = https.get(url, {
      // Connect to the address we checked, not to a fresh lookup of the name.
      lookup: (_host, _opts, cb) => (cb as (e: null, a: string, f: number) => void)(null, address.address, address.family),
      ...(options.ca !== undefined ? { ca: options.ca } : {}),
      headers: { "user-agent": "speech-service/1 (media fetch)" },
      signal
    }, (response) => {
      const status = response.statusCode ?? 0
      if (status >= 300 && status < 400 && response.headers.location) {
        response.resume()
        return resume(Effect.succeed({ redirect: new URL(response.headers.location, url).toString() }))
      }
      if (status !== 200) {
        response.resume()
        return resume(Effect.fail(fail("HttpStatus", `fetching ${url.origin}${url.pathname} answered ${status}`)))
      }
      const declared = Number(response.headers["content-length"] ?? NaN)
      if (declared > options.maxBytes) {
        response.destroy()
        return resume(Effect.fail(fail("TooLarge", `the remote file is ${declared} bytes; the limit is ${options.maxBytes}`)))
      }
      const out = createWriteStream(file)
      let bytes = 0
      response.on("data", (chunk: Buffer) => {
        bytes += chunk.length
        if (bytes > options.maxBytes) {
          response.destroy()
          out.destroy()
          resume(Effect.fail(fail("TooLarge", `the remote file is larger than ${options.maxBytes} bytes`)))
        }
      })
      response.pipe(out)
      out.on("close", () => resume(Effect.succeed({ bytes })))
      response.on("error", (e) => resume(Effect.fail(fail("Unreachable", `download failed: ${e.message}`))))
    })
    request.on("error", (e) => resume(Effect.fail(fail("Unreachable", `cannot fetch ${url.origin}: ${e.message}`))))
  })

/** Downloads `rawUrl` to a new file under `tmpDir`; the caller removes it (see `withRemoteMedia`). */
export const fetchToFile = (rawUrl: string, options: FetchOptions) =>
  Effect.gen(function*() {
    let url: URL
    try {
      url = new URL(rawUrl)
    } catch {
      return yield* fail("BadUrl", `not a URL: ${rawUrl.slice(0, 200)}`)
    }
    mkdirSync(options.tmpDir, { recursive: true })
    const file = path.join(options.tmpDir, `remote-${randomBytes(8).toString("hex")}`)
    const attempt = Effect.gen(function*() {
      for (let hop = 0; hop <= (options.maxRedirects ?? 5); hop++) {
        if (url.protocol !== "https:") return yield* fail("BadUrl", `only https URLs are fetched, got ${url.protocol}`)
        if (url.username || url.password) return yield* fail("BadUrl", "URLs with credentials are refused")
        const address = yield* resolveChecked(url.hostname.replace(/^\[|\]$/g, ""), options.allowPrivate)
        const result = yield* getOnce(url, address, options, file)
        if (result.redirect === undefined) return { file, bytes: result.bytes ?? 0 }
        url = new URL(result.redirect)
      }
      return yield* fail("Unreachable", `more than ${options.maxRedirects ?? 5} redirects`)
    })
    return yield* attempt.pipe(
      Effect.timeoutOrElse({ duration: options.timeoutMs, orElse: () => Effect.fail(fail("TimedOut", `fetching the URL took longer than ${options.timeoutMs} ms`)) }),
      Effect.tapError(() => Effect.sync(() => rmSync(file, { force: true })))
    )
  })
