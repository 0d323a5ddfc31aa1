/**
 * The uWS bridge with a route table made for the test: credentials, the error body and status
 * table, 404/405, body limits enforced while streaming, streamed replies and their failure
 * modes, request ids, and graceful shutdown finishing an in-flight request.
 */
import { Deferred, Effect, Exit, Scope } from "effect"
import * as net from "node:net"
import t from "tap"
import { ApiError, errorTable, toApiError } from "../../protocol/ApiError.ts"
import { Reply, type Route } from "../../protocol/Http.ts"
import { makeHttpServer } from "../../runtime/HttpServer.ts"
import { HttpMetrics } from "../../runtime/Metrics.ts"
import { Router } from "../../runtime/Router.ts"
import { ApiKeys } from "../../storage/ApiKeys.ts"
import { Users } from "../../storage/Users.ts"
import { accountLayers } from "../support/accounts.ts"
import { useTestDatabaseWith } from "../support/database.ts"

const db = useTestDatabaseWith(t, accountLayers())
const release = Effect.runSync(Deferred.make<void>())
const started = Effect.runSync(Deferred.make<void>())
/** The long-upload route: its body was read, and then its fiber was interrupted. */
const uploadRead = Effect.runSync(Deferred.make<number>())
const uploadInterrupted = Effect.runSync(Deferred.make<void>())
const uploadBytes = 4 * 1024 * 1024

/** The parts route's body: three parts (16 MB in all) of distinct bytes, one of them empty. */
const bodyParts = [
  Uint8Array.from({ length: 5_000_000 }, (_, i) => (i * 7) & 255),
  new Uint8Array(0),
  Uint8Array.from({ length: 11_000_001 }, (_, i) => (i * 13 + 5) & 255)
]
const partsTotal = bodyParts.reduce((n, p) => n + p.byteLength, 0)
let partsSent = 0

const routes: Array<Route<never>> = [
  {
    method: "GET", path: "/parts", auth: "none", operationId: "parts", summary: "", tags: [], responses: {},
    handler: () => Effect.succeed(Reply.bytes(200, bodyParts, { "content-type": "application/octet-stream" }, () => void partsSent++))
  },
  {
    method: "GET", path: "/whoami", auth: "key", operationId: "whoami", summary: "", tags: [], responses: {},
    handler: (ctx) => Effect.succeed(Reply.json(200, { userId: ctx.principal?.userId }))
  },
  {
    method: "GET", path: "/maybe", auth: "optional", operationId: "maybe", summary: "", tags: [], responses: {},
    handler: (ctx) => Effect.succeed(Reply.json(200, { userId: ctx.principal?.userId ?? null }))
  },
  {
    method: "POST", path: "/echo/{name}", auth: "none", operationId: "echo", summary: "", tags: [], responses: {},
    handler: (ctx) =>
      Effect.map(ctx.body.bytes(1024), (b) => Reply.json(200, { name: ctx.params.name, bytes: b.byteLength }))
  },
  {
    method: "GET", path: "/boom", auth: "none", operationId: "boom", summary: "", tags: [], responses: {},
    handler: () => Effect.die(new Error("secret internal detail"))
  },
  {
    // A bug: the handler throws while building its effect, before any fiber exists.
    method: "POST", path: "/throws", auth: "none", operationId: "throws", summary: "", tags: [], responses: {},
    handler: () => {
      throw new Error("secret synchronous detail")
    }
  },
  {
    method: "GET", path: "/stream/{failAt}", auth: "none", operationId: "stream", summary: "", tags: [], responses: {},
    handler: (ctx) =>
      Effect.succeed(Reply.stream(200, { "content-type": "application/octet-stream" }, (w) =>
        Effect.gen(function*() {
          const failAt = Number(ctx.params.failAt)
          for (let i = 0; i < 3; i++) {
            if (i === failAt) return yield* Effect.fail(new ApiError({ status: 502, code: "engine_failed", message: "segment failed" }))
            yield* w.write(new Uint8Array(1000).fill(i + 1))
          }
        })))
  },
  {
    // Like a transcription: reads its body late (after a database read), then works long.
    method: "POST", path: "/upload-then-work", auth: "none", operationId: "uploadThenWork", summary: "", tags: [], responses: {},
    handler: (ctx) =>
      Effect.gen(function*() {
        yield* Effect.sleep("300 millis")
        const body = yield* ctx.body.bytes(uploadBytes)
        yield* Deferred.succeed(uploadRead, body.byteLength)
        return yield* Effect.never
      }).pipe(Effect.onInterrupt(() => Deferred.succeed(uploadInterrupted, undefined)))
  },
  {
    method: "GET", path: "/slow", auth: "none", operationId: "slow", summary: "", tags: [], responses: {},
    handler: () =>
      Effect.gen(function*() {
        yield* Deferred.succeed(started, undefined)
        yield* Deferred.await(release)
        return Reply.json(200, { finished: true })
      })
  }
]

const scope = Effect.runSync(Scope.make())
const runtime = db.runtime
const server = await runtime.runPromise(
  Effect.gen(function*() {
    const keys = yield* ApiKeys
    const ctx = yield* Effect.context<never>()
    return yield* makeHttpServer({
      host: "127.0.0.1",
      port: 0,
      router: new Router(routes),
      authenticate: (c) => keys.authenticate(c),
      metrics: new HttpMetrics(ctx),
      resourceMetadataUrl: () => "http://site.test/.well-known/oauth-protected-resource"
    })
  }).pipe(Scope.provide(scope))
)
t.teardown(() => Effect.runPromise(Scope.close(scope, Exit.void)))
const base = `http://127.0.0.1:${server.port}`
const user = await runtime.runPromise(Effect.flatMap(Users, (a) => a.createUserWithKey({ name: "u", credits: 10 })))

const expectError = async (t: { equal: Function; match: Function; type: Function; ok: Function }, res: Response, status: number, code: string) => {
  t.equal(res.status, status, `status ${status}`)
  t.match(res.headers.get("content-type"), /application\/json/)
  const body = await res.json() as { detail: { status: string; message: string } }
  t.equal(body.detail.status, code)
  t.type(body.detail.message, "string")
  t.ok(res.headers.get("x-request-id"), "x-request-id present")
  return body
}

t.test("credential in xi-api-key or Authorization: Bearer", async (t) => {
  for (const headers of [{ "xi-api-key": user.apiKey }, { authorization: `Bearer ${user.apiKey}` }] as Array<Record<string, string>>) {
    const res = await fetch(`${base}/whoami`, { headers })
    t.equal(res.status, 200)
    t.same(await res.json(), { userId: user.userId })
  }
})

t.test("missing, malformed and unknown keys give 401 with WWW-Authenticate", async (t) => {
  const cases: Array<[Record<string, string>, string]> = [
    [{}, "needs_authorization"],
    [{ "xi-api-key": "nonsense" }, "invalid_api_key"],
    [{ "xi-api-key": "sk_svc_" + "A".repeat(43) }, "invalid_api_key"],
    [{ authorization: "Bearer sk_svc_nope" }, "invalid_api_key"]
  ]
  for (const [headers, code] of cases) {
    const res = await fetch(`${base}/whoami`, { headers })
    await expectError(t, res, 401, code)
    // A refused bearer token also says invalid_token (RFC 6750 3.1); a key in xi-api-key is not a bearer token.
    const refused = headers.authorization !== undefined ? 'error="invalid_token", error_description="the access token is unknown, revoked or expired", ' : ""
    t.equal(res.headers.get("www-authenticate"), `Bearer ${refused}resource_metadata="http://site.test/.well-known/oauth-protected-resource"`)
  }
})

t.test("a deleted key stops working at once", async (t) => {
  const other = await runtime.runPromise(Effect.flatMap(Users, (a) => a.createUserWithKey({ name: "v", credits: 1 })))
  t.equal((await fetch(`${base}/whoami`, { headers: { "xi-api-key": other.apiKey } })).status, 200)
  await runtime.runPromise(Effect.flatMap(ApiKeys, (a) => a.deleteKey(other.keyId)))
  await expectError(t, await fetch(`${base}/whoami`, { headers: { "xi-api-key": other.apiKey } }), 401, "invalid_api_key")
})

t.test("optional auth: anonymous allowed, a wrong key is still refused", async (t) => {
  t.same(await (await fetch(`${base}/maybe`)).json(), { userId: null })
  t.same(await (await fetch(`${base}/maybe`, { headers: { "xi-api-key": user.apiKey } })).json(), { userId: user.userId })
  await expectError(t, await fetch(`${base}/maybe`, { headers: { "xi-api-key": "sk_svc_wrong" } }), 401, "invalid_api_key")
})

t.test("unknown routes 404, wrong methods 405 with Allow", async (t) => {
  await expectError(t, await fetch(`${base}/nowhere`), 404, "not_found")
  const res = await fetch(`${base}/whoami`, { method: "DELETE" })
  await expectError(t, res, 405, "method_not_allowed")
  t.equal(res.headers.get("allow"), "GET")
})

t.test("path parameters are decoded; bodies within the limit are read", async (t) => {
  const res = await fetch(`${base}/echo/a%20b`, { method: "POST", body: new Uint8Array(1000) })
  t.same(await res.json(), { name: "a b", bytes: 1000 })
})

t.test("413 from Content-Length before the body is read", async (t) => {
  await expectError(t, await fetch(`${base}/echo/x`, { method: "POST", body: new Uint8Array(5000) }), 413, "payload_too_large")
})

t.test("413 while a chunked body streams in, before it ends", async (t) => {
  // A raw socket sends chunks without Content-Length and never finishes the body: the answer
  // must come as soon as the limit is passed, not when the body ends.
  const answer = await new Promise<string>((resolve, reject) => {
    const socket = net.connect(server.port, "127.0.0.1", () => {
      socket.write("POST /echo/x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
      const chunk = "800\r\n" + "z".repeat(0x800) + "\r\n"
      socket.write(chunk)
    })
    let text = ""
    socket.on("data", (d) => {
      text += d.toString()
      if (text.includes("payload_too_large")) {
        socket.destroy()
        resolve(text)
      }
    })
    socket.on("error", reject)
    setTimeout(() => reject(new Error("no answer while the body was still open")), 20_000).unref()
  })
  t.match(answer, /^HTTP\/1\.1 413/)
})

t.test("a body sent after Expect: 100-continue, in pieces, is read to the end", async (t) => {
  // Regression: a wake-up that found no bytes (uWS reports empty chunks) left the reader
  // waiting forever; curl uploads hung about every other time.
  for (let round = 0; round < 5; round++) {
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(server.port, "127.0.0.1", () => {
        socket.write("POST /echo/x HTTP/1.1\r\nHost: x\r\nContent-Length: 600\r\nExpect: 100-continue\r\n\r\n")
        setTimeout(() => socket.write("a".repeat(300)), 30)
        setTimeout(() => socket.write("b".repeat(300)), 60)
      })
      let text = ""
      socket.on("data", (d) => {
        text += d.toString()
        if (text.includes("}")) {
          socket.destroy()
          resolve(text)
        }
      })
      socket.on("error", reject)
      setTimeout(() => reject(new Error("the body was never read to its end")), 20_000).unref()
    })
    t.match(answer, /"bytes":600/)
  }
})

t.test("internal faults give a generic 500 without internal messages", async (t) => {
  const body = await expectError(t, await fetch(`${base}/boom`), 500, "internal_error")
  t.notMatch(body.detail.message, /secret/)
})

t.test("a handler that throws before its effect exists gets a generic 500, and the server answers on", async (t) => {
  for (let i = 0; i < 3; i++) {
    const body = await expectError(t, await fetch(`${base}/throws`, { method: "POST", body: "x".repeat(100) }), 500, "internal_error")
    t.notMatch(body.detail.message, /secret/)
  }
  t.equal((await fetch(`${base}/maybe`)).status, 200)
})

t.test("client request ids are kept", async (t) => {
  const res = await fetch(`${base}/maybe`, { headers: { "x-request-id": "abc-123" } })
  t.equal(res.headers.get("x-request-id"), "abc-123")
})

t.test("streamed replies: full, failing before the first chunk, failing mid-stream", async (t) => {
  const full = await fetch(`${base}/stream/9`)
  t.equal(full.status, 200)
  t.equal((await full.arrayBuffer()).byteLength, 3000)
  // Failure on the first segment: a normal error status before any audio.
  await expectError(t, await fetch(`${base}/stream/0`), 502, "engine_failed")
  // Failure on segment 2: the connection ends after segment 1, no error body (a short read).
  const partial = await fetch(`${base}/stream/2`)
  t.equal(partial.status, 200)
  const received: Array<number> = []
  const reader = partial.body!.getReader()
  let failed = false
  try {
    while (true) {
      const { done, value } = await reader.read()
      if (done) break
      received.push(...value)
    }
  } catch {
    failed = true
  }
  t.ok(failed, "the body read ends in an error (connection closed)")
  t.ok(received.length <= 2000 && received.length >= 1000, `got ${received.length} bytes of 2000 sent`)
  t.notOk(received.includes(3), "no bytes of the failed segment")
})

/** One raw HTTP/1.1 exchange; `pauseMs` stops reading after each chunk, to hold the server back. */
const rawGet = (path: string, options: { method?: string; pauseMs?: number; hangUpAfterBytes?: number } = {}) =>
  new Promise<{ head: string; body: Buffer; chunks: number }>((resolve, reject) => {
    const socket = net.connect(server.port, "127.0.0.1")
    const chunks: Array<Buffer> = []
    let received = 0
    socket.on("data", (d) => {
      chunks.push(d)
      received += d.length
      if (options.hangUpAfterBytes !== undefined && received >= options.hangUpAfterBytes) return void socket.destroy()
      if (options.pauseMs !== undefined && chunks.length < 20) {
        socket.pause()
        setTimeout(() => socket.resume(), options.pauseMs)
      }
      const all = Buffer.concat(chunks)
      const end = all.indexOf("\r\n\r\n")
      if (end < 0) return
      const head = all.subarray(0, end).toString()
      const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0)
      const body = all.subarray(end + 4)
      if (options.method === "HEAD" || body.length >= length) {
        socket.end()
        resolve({ head, body, chunks: chunks.length })
      }
    })
    socket.on("close", () => resolve({ head: "", body: Buffer.alloc(0), chunks: chunks.length }))
    socket.on("error", reject)
    socket.write(`${options.method ?? "GET"} ${path} HTTP/1.1\r\nHost: x\r\n\r\n`)
  })

t.test("a reply in parts goes out whole under one Content-Length, to a slow reader too; its buffers are released once", async (t) => {
  const expected = Buffer.concat(bodyParts)
  const before = partsSent
  for (const pauseMs of [undefined, 40]) {
    const { head, body, chunks } = await rawGet("/parts", pauseMs === undefined ? {} : { pauseMs })
    t.match(head, new RegExp(`content-length: ${partsTotal}`, "i"), "the total length, not chunked")
    t.notMatch(head, /transfer-encoding/i)
    t.equal(body.length, partsTotal)
    t.ok(body.equals(expected), `the bytes in order (${chunks} reads${pauseMs === undefined ? "" : `, pausing ${pauseMs} ms`})`)
  }
  t.equal(partsSent, before + 2, "onSent ran once per reply")
  const head = await rawGet("/parts", { method: "HEAD" })
  t.match(head.head, new RegExp(`content-length: ${partsTotal}`, "i"), "HEAD reports the length GET would have")
  t.equal(head.body.length, 0)
  t.equal(partsSent, before + 3)
})

t.test("a reader that hangs up halfway through a reply in parts: no release, and the server answers on", async (t) => {
  const before = partsSent
  await rawGet("/parts", { hangUpAfterBytes: 1_000_000 })
  const res = await fetch(`${base}/whoami`, { headers: { "xi-api-key": user.apiKey } })
  t.equal(res.status, 200)
  t.equal(partsSent, before, "the buffers were not handed on as sent")
})

t.test("error table: every row maps to its status and code", async (t) => {
  for (const [key, row] of errorTable()) {
    const [tag, reason] = key.split(".")
    const { error } = toApiError({ _tag: tag, reason, message: "m" })
    t.equal(error.status, row.status, key)
    t.equal(error.code, row.code, key)
  }
  t.equal(toApiError(new Error("x")).error.status, 500)
  t.equal(toApiError({ _tag: "AccountsError", reason: "InsufficientCredits", message: "out" }).error.status, 402)
})

t.test("a 5xx that asks for a retry is load shedding, logged without a stack; other 5xx are faults", async (t) => {
  t.equal(toApiError({ _tag: "EngineError", reason: "QueueFull", message: "too many files being decoded" }).internal, false)
  t.equal(toApiError({ _tag: "EngineError", reason: "Closed", message: "shutting down" }).internal, false)
  t.equal(toApiError(new ApiError({ status: 503, code: "shutting_down", message: "m", headers: { "retry-after": "1" } })).internal, false)
  t.equal(toApiError({ _tag: "SqlError", reason: { _tag: "ConnectionError" }, message: "down" }).internal, true)
  t.equal(toApiError(new ApiError({ status: 502, code: "engine_failed", message: "m" })).internal, true)
  t.equal(toApiError(new Error("x")).internal, true)
  // How each is logged (issue 38 item 5): only a defect gets a stack.
  t.equal(toApiError({ _tag: "EngineError", reason: "QueueFull", message: "busy" }).kind, "refusal")
  t.equal(toApiError({ _tag: "SqlError", reason: { _tag: "ConnectionError" }, message: "down" }).kind, "outage")
  t.equal(toApiError({ _tag: "AccountsError", reason: "InsufficientCredits", message: "out" }).kind, "refusal")
  t.equal(toApiError(new ApiError({ status: 400, code: "invalid_request", message: "m" })).kind, "refusal")
  t.equal(toApiError(new Error("x")).kind, "defect")
})

t.test("a client that hangs up after a large upload interrupts the work on it", async (t) => {
  // The body arrives while nobody reads it, so the reader pauses the socket, and uWS delivers
  // the rest of the body anyway: the body ends with its socket paused, where a hang-up was
  // not noticed and the work ran (and was charged) to its end.
  const socket = net.connect(server.port, "127.0.0.1")
  await new Promise((resolve) => socket.once("connect", resolve))
  socket.write(`POST /upload-then-work HTTP/1.1\r\nHost: x\r\nContent-Length: ${uploadBytes}\r\nExpect: 100-continue\r\n\r\n`)
  await new Promise((resolve) => socket.once("data", resolve))
  socket.write(Buffer.alloc(uploadBytes, 7))
  t.equal(await Effect.runPromise(Deferred.await(uploadRead)), uploadBytes, "the whole body was read")
  socket.destroy()
  await Effect.runPromise(Deferred.await(uploadInterrupted))
  t.pass("the request's fiber was interrupted")
})

t.test("graceful shutdown: in-flight request finishes, new connections refused", async (t) => {
  const inflight = fetch(`${base}/slow`)
  await Effect.runPromise(Deferred.await(started))
  const drained = Effect.runPromise(server.drain("20 seconds"))
  // The listener is closed: a new connection cannot be made.
  const refused = await new Promise<boolean>((resolve) => {
    const s = net.connect(server.port, "127.0.0.1")
    s.on("connect", () => {
      s.destroy()
      resolve(false)
    })
    s.on("error", () => resolve(true))
  })
  t.ok(refused, "new connections refused while draining")
  await Effect.runPromise(Deferred.succeed(release, undefined))
  const res = await inflight
  t.equal(res.status, 200)
  t.same(await res.json(), { finished: true })
  await drained
  t.equal(server.inFlight(), 0)
})
