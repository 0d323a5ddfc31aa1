/**
 * RemoteMedia around the address guard, against a real https server on loopback: every redirect
 * target is checked again, timeouts and sizes are enforced, every network failure becomes the
 * same client answer while the log keeps the real reason with the request id.
 */
import { Effect, Logger, References } from "effect"
import { existsSync, readdirSync, readFileSync } from "node:fs"
import * as https from "node:https"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import t from "tap"
import { makeOutboundGuard } from "../../storage/OutboundAddress.ts"
import { fetchToFile, type FetchOptions, RemoteMediaError } from "../../storage/RemoteMedia.ts"
import { errorBody, toApiError } from "../../protocol/ApiError.ts"
import { scratchDir } from "../engines/asr/speechFixtures.ts"
import { selfSignedCert } from "../support/selfSignedCert.ts"

const dir = scratchDir(t, "speech-remote-media-")
const { certFile, keyFile } = selfSignedCert(dir, ["IP:127.0.0.1", "IP:::ffff:127.0.0.1"])
const ca = readFileSync(certFile, "utf8")

const served: Array<string> = []
let port = 0
const server = https.createServer({ key: readFileSync(keyFile), cert: readFileSync(certFile) }, (req, res) => {
  served.push(req.url ?? "")
  if (req.url === "/small") res.writeHead(200, { "content-length": 4 }).end("RIFF")
  else if (req.url === "/big") res.writeHead(200, { "content-length": 5000 }).end(Buffer.alloc(5000))
  else if (req.url === "/big-chunked") {
    res.writeHead(200)
    res.end(Buffer.alloc(5000))
  } else if (req.url === "/to-mapped") res.writeHead(302, { location: `https://[::ffff:127.0.0.1]:${port}/small` }).end()
  else if (req.url === "/silent") {
    // Never answers: the fetch must time out.
  } else res.writeHead(404).end()
})
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
port = (server.address() as AddressInfo).port
t.teardown(() => {
  server.closeAllConnections()
  return new Promise<void>((resolve) => server.close(() => resolve()))
})
const origin = `https://127.0.0.1:${port}`

const tmpDir = path.join(dir, "tmp")
/** Only 127.0.0.1 itself passes: the tests below need one allowed address and its other spellings refused. */
const onlyDotted = makeOutboundGuard({ allowPrivate: false, isAllowed: (address) => address === "127.0.0.1" })
const options: FetchOptions = { tmpDir, maxBytes: 1000, timeoutMs: 10_000, allowPrivate: false, ca, guard: onlyDotted }

interface Line {
  readonly level: string
  readonly fields: Record<string, unknown>
}

/** Runs a fetch inside a request-id annotation, returning its failure (or file) and the log lines. */
const run = async (url: string, overrides: Partial<FetchOptions> = {}) => {
  const lines: Array<Line> = []
  const capture = Logger.make(({ fiber, logLevel, message }) => {
    const parts = Array.isArray(message) ? message : [message]
    const fields: Record<string, unknown> = { ...fiber.getRef(References.CurrentLogAnnotations) }
    for (const part of parts) if (part !== null && typeof part === "object") Object.assign(fields, part)
    lines.push({ level: logLevel, fields })
  })
  const result = await Effect.runPromise(
    Effect.result(fetchToFile(url, { ...options, ...overrides })).pipe(
      Effect.annotateLogs("requestId", "req-test-1"),
      Effect.provide(Logger.layer([capture]))
    )
  )
  return { result, lines }
}
const failure = async (url: string, overrides: Partial<FetchOptions> = {}) => {
  const { result, lines } = await run(url, overrides)
  if (result._tag !== "Failure") throw new Error(`${url} was fetched`)
  return { error: result.failure, lines }
}

t.test("a redirect target is checked again: a redirect to [::ffff:127.0.0.1] is refused", async (t) => {
  served.length = 0
  const { error, lines } = await failure(`${origin}/to-mapped`)
  t.equal(error.reason, "Refused")
  t.same(served, ["/to-mapped"], "the redirect target was never requested")
  const line = lines.find((l) => l.fields.reason === "Refused")
  t.ok(line, "the refusal is logged")
  t.equal(line?.level, "Warn", "at warn: a refused address may be a probe")
  t.equal(line?.fields.requestId, "req-test-1", "with the request id")
  t.match(String(line?.fields.detail), /::ffff:7f00:1/, "naming the refused address")
})

t.test("the allowed path downloads the file and leaves no temporary file on failure", async (t) => {
  const { result } = await run(`${origin}/small`)
  t.equal(result._tag, "Success")
  if (result._tag === "Success") t.equal(readFileSync(result.success.file, "utf8"), "RIFF")
  const before = readdirSync(tmpDir).length
  await failure(`${origin}/big-chunked`)
  await failure(`${origin}/missing`)
  t.equal(readdirSync(tmpDir).length, before, "failed downloads removed their files")
  t.ok(existsSync(tmpDir))
})

t.test("size and time limits", async (t) => {
  t.equal((await failure(`${origin}/big`)).error.reason, "TooLarge", "declared length over the limit")
  t.equal((await failure(`${origin}/big-chunked`)).error.reason, "TooLarge", "bytes over the limit as they arrive")
  t.equal((await failure(`${origin}/silent`, { timeoutMs: 300 })).error.reason, "TimedOut", "a server that never answers")
  const tooLarge = toApiError(new RemoteMediaError({ reason: "TooLarge", message: "the file at the URL is larger than the limit of 1000 bytes" })).error
  t.equal(tooLarge.status, 413, "413 only for hosts past the guard, so it tells nothing about the private network")
})

t.test("every network failure gives the client the same answer; the log keeps the reason", async (t) => {
  const cases: Array<[string, string, Partial<FetchOptions>]> = [
    ["Refused", `https://[::ffff:127.0.0.1]:${port}/small`, {}],
    ["Refused", `https://localhost:${port}/small`, { guard: makeOutboundGuard({ allowPrivate: false }) }],
    ["Unresolvable", "https://nonexistent.invalid/a.wav", {}],
    ["Unreachable", "https://127.0.0.1:1/a.wav", {}],
    ["Unreachable", `${origin}/small`, { ca: undefined }],
    ["HttpStatus", `${origin}/missing`, {}],
    ["TooManyRedirects", `${origin}/to-mapped`, { maxRedirects: 0 }],
    ["TimedOut", `${origin}/silent`, { timeoutMs: 200 }]
  ]
  const bodies = new Set<string>()
  for (const [reason, url, overrides] of cases) {
    const { error, lines } = await failure(url, overrides)
    t.equal(error.reason, reason, `${url}: ${reason} (${error.message})`)
    const { error: api } = toApiError(error)
    bodies.add(`${api.status} ${errorBody(api)}`)
    t.ok(lines.some((l) => l.fields.reason === reason && l.fields.requestId === "req-test-1"), `${reason}: logged with the request id`)
  }
  t.same([...bodies], [`400 ${JSON.stringify({ detail: { status: "url_unreachable", message: "the URL could not be fetched" } })}`], "one answer for all")
  for (const reason of ["BadRedirect", "Refused", "Unresolvable"] as const) {
    t.equal(errorBody(toApiError(new RemoteMediaError({ reason, message: "secret detail" })).error).includes("secret"), false, `${reason}: the detail stays out of the body`)
  }
  t.equal(errorBody(toApiError({ _tag: "OutboundAddressError", reason: "Refused", message: "10.0.0.1" }).error), JSON.stringify({ detail: { status: "url_unreachable", message: "the URL could not be fetched" } }), "the guard's own error maps to the same answer")
})

t.test("the log shows no query string (signed URLs carry secrets there)", async (t) => {
  const { lines } = await failure(`${origin}/missing?X-Amz-Signature=topsecret`)
  t.notMatch(JSON.stringify(lines), /topsecret/)
})
