/**
 * HTTP/1.1 framing at the byte level, on the uWS bridge with a route table made for the test:
 * HEAD answers without a body, conflicting Content-Length refused and the connection closed
 * (nothing smuggled in the body is ever answered), repeated credentials refused, pipelines
 * answered in order or closed, and early refusals of uploads (401 before the body is read, 413
 * from Content-Length) readable by Node's fetch and http client while they are still uploading.
 * A fast-check property drives generated pipelines of all of these through one connection.
 */
import { Effect, Exit, Scope } from "effect"
import fc from "fast-check"
import * as http from "node:http"
import t from "tap"
import { unauthorized } from "../../protocol/ApiError.ts"
import { Reply, type Route } from "../../protocol/Http.ts"
import { discardLimitBytes } from "../../runtime/HttpExchange.ts"
import { makeHttpServer } from "../../runtime/HttpServer.ts"
import { HttpMetrics } from "../../runtime/Metrics.ts"
import { Router } from "../../runtime/Router.ts"
import { converse, parseResponses } from "../support/rawHttp.ts"

const GOOD = "good-key"
const UPLOAD_LIMIT = 1024 * 1024
let smuggledAnswers = 0

const route = (method: "GET" | "POST", path: string, auth: "none" | "key", handler: Route<never>["handler"]): Route<never> => ({
  method, path, auth, operationId: path, summary: "", tags: [], responses: {}, handler
})
const routes: Array<Route<never>> = [
  route("GET", "/hello", "none", () => Effect.succeed(Reply.json(200, { hello: "world" }))),
  route("GET", "/whoami", "key", (ctx) => Effect.succeed(Reply.json(200, { userId: ctx.principal?.userId }))),
  route("GET", "/slow/{ms}", "none", (ctx) => Effect.as(Effect.sleep(Number(ctx.params.ms)), Reply.json(200, { slept: Number(ctx.params.ms) }))),
  route("GET", "/stream", "none", () =>
    Effect.succeed(Reply.stream(200, { "content-type": "application/octet-stream" }, (w) => w.write(new Uint8Array(100).fill(7))))),
  route("GET", "/smuggled", "none", () => Effect.sync(() => {
    smuggledAnswers++
    return Reply.json(200, { smuggled: true })
  })),
  route("POST", "/upload", "key", (ctx) => Effect.map(ctx.body.bytes(UPLOAD_LIMIT), (b) => Reply.json(200, { bytes: b.byteLength })))
]

const scope = Effect.runSync(Scope.make())
const server = await Effect.runPromise(
  Effect.gen(function*() {
    const ctx = yield* Effect.context<never>()
    return yield* makeHttpServer({
      host: "127.0.0.1",
      port: 0,
      router: new Router(routes),
      authenticate: (c) => c === GOOD ? Effect.succeed({ userId: "u1", keyId: null, scopes: [] }) : Effect.fail(unauthorized("unknown key")),
      metrics: new HttpMetrics(ctx)
    })
  }).pipe(Scope.provide(scope))
)
t.teardown(() => Effect.runPromise(Scope.close(scope, Exit.void)))
const port = server.port
const base = `http://127.0.0.1:${port}`

const get = (path: string, extra = "") => `GET ${path} HTTP/1.1\r\nHost: x\r\n${extra}\r\n`
const head = (path: string, extra = "") => `HEAD ${path} HTTP/1.1\r\nHost: x\r\n${extra}\r\n`

t.test("HEAD: the head of GET with its Content-Length and no body; the connection stays usable", async (t) => {
  const lengthOfGet = async (path: string) => {
    const res = await fetch(`${base}${path}`)
    await res.arrayBuffer()
    return res.headers.get("content-length")
  }
  const c = await converse(port, [head("/hello") + head("/whoami") + head("/stream") + get("/hello")], {
    done: (text) => text.includes('{"hello":"world"}')
  })
  const { responses, rest } = parseResponses(c.text, (i) => i < 3)
  t.equal(rest, "", "nothing but whole responses")
  t.same(responses.map((r) => r.status), [200, 401, 200, 200])
  t.equal(responses[0]!.headers["content-length"], await lengthOfGet("/hello"), "HEAD says GET's Content-Length")
  t.equal(responses[1]!.headers["content-length"], await lengthOfGet("/whoami"), "so does a refused HEAD")
  t.same(JSON.parse(responses[3]!.body), { hello: "world" }, "the GET after three HEADs is answered in step")
  t.notOk(c.closed, "the connection stays open")
})

t.test("HEAD then GET through Node's keep-alive http client", async (t) => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  const ask = (method: string) =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request(`${base}/hello`, { method, agent }, (res) => {
        let body = ""
        res.on("data", (d) => (body += d))
        res.on("end", () => resolve({ status: res.statusCode!, body }))
      })
      req.on("error", reject)
      req.end()
    })
  t.same(await ask("HEAD"), { status: 200, body: "" })
  t.same(await ask("GET"), { status: 200, body: '{"hello":"world"}' })
  t.same(await ask("HEAD"), { status: 200, body: "" })
  agent.destroy()
})

t.test("conflicting Content-Length: 400 and close; the body is never answered as a request", async (t) => {
  const smuggle = get("/smuggled")
  const before = smuggledAnswers
  // uWS frames by the first header; a proxy in front may have used the second.
  const shortFirst = `POST /upload HTTP/1.1\r\nHost: x\r\nxi-api-key: ${GOOD}\r\nContent-Length: 5\r\nContent-Length: ${5 + smuggle.length}\r\n\r\nhello${smuggle}`
  const a = await converse(port, [shortFirst])
  t.ok(a.closed, "closed")
  t.notMatch(a.text, /smuggled/, "the smuggled request is not answered")
  const { responses } = parseResponses(a.text, () => false)
  t.ok(responses.length <= 1 && responses.every((r) => r.status === 400), `at most the 400: ${JSON.stringify(a.text)}`)
  // Alone in its read, the head gets its 400 with the error body.
  const alone = await converse(port, [`POST /upload HTTP/1.1\r\nHost: x\r\nxi-api-key: ${GOOD}\r\nContent-Length: 5\r\nContent-Length: 40\r\n\r\nhello`])
  const r = parseResponses(alone.text, () => false).responses
  t.equal(r.length, 1)
  t.equal(r[0]?.status, 400)
  t.match(r[0]?.body, /conflicting Content-Length/)
  t.equal(r[0]?.headers["connection"], "close")
  t.ok(alone.closed, "closed after the 400")
  // The same value twice is one length (RFC 9110 8.6): accepted.
  const same = await converse(port, [`POST /upload HTTP/1.1\r\nHost: x\r\nxi-api-key: ${GOOD}\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello`], {
    done: (text) => text.includes("}")
  })
  t.match(same.text, /^HTTP\/1\.1 200[^]*\{"bytes":5\}$/)
  t.equal(smuggledAnswers, before, "the smuggled route never ran")
})

t.test("a repeated xi-api-key or Authorization header is refused, not last-wins", async (t) => {
  for (const extra of [`xi-api-key: wrong\r\nxi-api-key: ${GOOD}\r\n`, `xi-api-key: ${GOOD}\r\nxi-api-key: ${GOOD}\r\n`, `authorization: Bearer wrong\r\nauthorization: Bearer ${GOOD}\r\n`]) {
    const c = await converse(port, [get("/whoami", extra) + get("/hello")], { done: (text) => text.includes("hello") })
    const { responses } = parseResponses(c.text, () => false)
    t.equal(responses[0]?.status, 400, extra)
    t.match(responses[0]?.body, /sent more than once/)
    t.equal(responses[1]?.status, 200, "the connection goes on")
  }
})

t.test("xi-api-key and Authorization: Bearer naming different keys are refused; the same key twice is fine", async (t) => {
  const mixed = await converse(port, [get("/whoami", `xi-api-key: wrong\r\nauthorization: Bearer ${GOOD}\r\n`) + get("/hello")], { done: (text) => text.includes("hello") })
  const { responses } = parseResponses(mixed.text, () => false)
  t.equal(responses[0]?.status, 400, "two different credentials: 400, not one of them silently")
  t.match(responses[0]?.body, /different credentials/)
  t.equal(responses[1]?.status, 200, "the connection goes on")
  const same = await converse(port, [get("/whoami", `xi-api-key: ${GOOD}\r\nauthorization: Bearer ${GOOD}\r\n`)], { done: (text) => text.includes("u1") })
  t.equal(parseResponses(same.text, () => false).responses[0]?.status, 200, "the same key both ways is accepted")
  const basic = await converse(port, [get("/whoami", `xi-api-key: ${GOOD}\r\nauthorization: Basic dXNlcjpwYXNz\r\n`)], { done: (text) => text.includes("u1") })
  t.equal(parseResponses(basic.text, () => false).responses[0]?.status, 200, "a proxy's Basic authorization beside the key is not a second credential")
})

t.test("pipelining: quick answers come in order; behind a pending answer the connection closes", async (t) => {
  const quick = await converse(port, [get("/hello") + head("/hello") + get("/whoami", `xi-api-key: ${GOOD}\r\n`)], {
    done: (text) => text.includes("u1")
  })
  t.same(parseResponses(quick.text, (i) => i === 1).responses.map((r) => r.status), [200, 200, 200])
  // uWS closes a connection whose next request arrives while an answer is pending; the
  // client (RFC 9112 9.3.2) retries what was not answered. No hang, no answer out of order.
  const slow = await converse(port, [get("/slow/200") + get("/hello")])
  t.ok(slow.closed, "closed, not left hanging")
  t.equal(parseResponses(slow.text, () => false).responses.length, 0)
  t.equal((await fetch(`${base}/hello`)).status, 200, "the server goes on")
})

/** Node's fetch uploading a body the server refuses before reading it. */
const upload = (bytes: number, headers: Record<string, string>) =>
  fetch(`${base}/upload`, { method: "POST", headers, body: new Uint8Array(bytes) })

t.test("early 401 on an upload reaches fetch (not `fetch failed`)", async (t) => {
  for (const size of [2 * 1024 * 1024, 8 * 1024 * 1024]) {
    const res = await upload(size, { "xi-api-key": "wrong" })
    t.equal(res.status, 401, `${size} bytes`)
    t.match(await res.json(), { detail: { status: "invalid_api_key" } })
  }
})

t.test("early 413 from Content-Length reaches fetch; within the limit the connection is reused", async (t) => {
  const res = await upload(3 * UPLOAD_LIMIT, { "xi-api-key": GOOD })
  t.equal(res.status, 413)
  t.match(await res.json(), { detail: { status: "payload_too_large" } })
  // A raw client that finishes its upload after the refusal keeps the connection: the rest of
  // the body was dropped by its Content-Length, not parsed as requests.
  const size = 2 * UPLOAD_LIMIT
  const body = Buffer.alloc(size, "G")
  const c = await converse(port, [`POST /upload HTTP/1.1\r\nHost: x\r\nxi-api-key: wrong\r\nContent-Length: ${size}\r\n\r\n`, body, get("/hello")], {
    gapMs: 20,
    done: (text) => text.includes("hello")
  })
  t.same(parseResponses(c.text, () => false).responses.map((r) => r.status), [401, 200])
  t.notOk(c.reset, "no reset")
})

t.test("a refused upload larger than the discard bound is answered and closed", async (t) => {
  const c = await converse(port, [`POST /upload HTTP/1.1\r\nHost: x\r\nxi-api-key: wrong\r\nContent-Length: ${discardLimitBytes + 1}\r\n\r\n`], {})
  t.match(c.text, /^HTTP\/1\.1 401/)
  t.match(c.text, /Connection: close/i)
  t.ok(c.closed)
})

// ---- property: generated pipelines on one connection ----

type Kind =
  | "get" | "head" | "headStream" | "headAuth" | "whoami" | "slow" | "upload" | "sameLength"
  | "dupKey" | "dupAuthorization" | "conflictShortFirst" | "conflictLongFirst" | "obsFold" | "teAndLength"

/** Ends the conversation: after it the server answers at most itself and closes. */
const closing = new Set<Kind>(["conflictShortFirst", "conflictLongFirst", "obsFold", "teAndLength"])

const request = (kind: Kind, id: string, slowMs: number): { bytes: string; status: number; head: boolean } => {
  const rid = `x-request-id: ${id}\r\n`
  const key = `xi-api-key: ${GOOD}\r\n`
  const smuggle = get("/smuggled")
  switch (kind) {
    case "get": return { bytes: get("/hello", rid), status: 200, head: false }
    case "head": return { bytes: head("/hello", rid), status: 200, head: true }
    case "headStream": return { bytes: head("/stream", rid), status: 200, head: true }
    case "headAuth": return { bytes: head("/whoami", rid), status: 401, head: true }
    case "whoami": return { bytes: get("/whoami", rid + key), status: 200, head: false }
    case "slow": return { bytes: get(`/slow/${slowMs}`, rid), status: 200, head: false }
    case "upload": return { bytes: `POST /upload HTTP/1.1\r\nHost: x\r\n${rid}${key}Content-Length: 5\r\n\r\nhello`, status: 200, head: false }
    case "sameLength": return { bytes: `POST /upload HTTP/1.1\r\nHost: x\r\n${rid}${key}Content-Length: 3\r\nContent-Length: 3\r\n\r\nabc`, status: 200, head: false }
    case "dupKey": return { bytes: get("/whoami", rid + key + key), status: 400, head: false }
    case "dupAuthorization": return { bytes: get("/whoami", `${rid}authorization: Bearer x\r\nauthorization: Bearer ${GOOD}\r\n`), status: 400, head: false }
    case "conflictShortFirst":
      return { bytes: `POST /upload HTTP/1.1\r\nHost: x\r\n${rid}${key}Content-Length: 2\r\nContent-Length: ${2 + smuggle.length}\r\n\r\nab${smuggle}`, status: 400, head: false }
    case "conflictLongFirst":
      return { bytes: `POST /upload HTTP/1.1\r\nHost: x\r\n${rid}${key}Content-Length: ${2 + smuggle.length}\r\nContent-Length: 2\r\n\r\nab${smuggle}`, status: 400, head: false }
    case "obsFold": return { bytes: get("/whoami", `${rid}xi-api-key: wrong\r\n ${GOOD}\r\n`), status: 400, head: false }
    case "teAndLength":
      return { bytes: `POST /upload HTTP/1.1\r\nHost: x\r\n${rid}${key}Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n`, status: 400, head: false }
  }
}

const kinds: Array<Kind> = ["get", "head", "headStream", "headAuth", "whoami", "slow", "upload", "sameLength", "dupKey", "dupAuthorization", "conflictShortFirst", "conflictLongFirst", "obsFold", "teAndLength"]

t.test("property: each request answered once, in order, or the connection closes; HEAD has no body; nothing smuggled", async (t) => {
  const before = smuggledAnswers
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.record({ kind: fc.constantFrom(...kinds), slowMs: fc.integer({ min: 0, max: 30 }) }), { minLength: 1, maxLength: 5 }),
      fc.array(fc.integer({ min: 1, max: 400 }), { maxLength: 3 }),
      async (steps, cuts) => {
        // A final GET shows whether the connection is still usable when nothing closed it.
        const plan = [...steps.map((s, i) => request(s.kind, `r${i}`, s.slowMs)), request("get", "final", 0)]
        const bytes = plan.map((p) => p.bytes).join("")
        const points = [...new Set(cuts.map((c) => c % bytes.length))].filter((c) => c > 0).sort((a, b) => a - b)
        const pieces = [0, ...points].map((start, i) => bytes.slice(start, points[i] ?? bytes.length))
        const c = await converse(port, pieces, { gapMs: 5, waitMs: 10_000, done: (text) => text.includes("x-request-id: final") && text.endsWith("}") })
        const { responses, rest } = parseResponses(c.text, (i) => plan[i]?.head ?? false)
        const context = JSON.stringify({ kinds: steps.map((s) => s.kind), pieces: pieces.length, text: c.text })
        if (/smuggled/.test(c.text)) throw new Error(`a smuggled request was answered: ${context}`)
        if (rest !== "") throw new Error(`bytes that are no whole response (a HEAD body?): ${context}`)
        if (responses.length > plan.length) throw new Error(`more answers than requests: ${context}`)
        responses.forEach((r, i) => {
          const id = r.headers["x-request-id"]
          if (id === undefined) {
            // uWS's own parser errors (obs-fold, Transfer-Encoding with Content-Length): its
            // 400 page is written at once and the connection closed, dropping answers to
            // requests earlier in the same read (uWS 20.51); nothing may follow it.
            if (r.status !== 400 || i !== responses.length - 1 || !c.closed) throw new Error(`answer ${i} without id: ${context}`)
            return
          }
          const p = plan[i]!
          if (id !== (i === plan.length - 1 ? "final" : `r${i}`)) throw new Error(`answer ${i} is for ${id}: ${context}`)
          if (r.status !== p.status) throw new Error(`answer ${i} has status ${r.status}, expected ${p.status}: ${context}`)
        })
        const firstClosing = steps.findIndex((s) => closing.has(s.kind))
        if (firstClosing >= 0) {
          if (responses.length > firstClosing + 1) throw new Error(`answers after a framing error: ${context}`)
          if (!c.closed) throw new Error(`left open after a framing error: ${context}`)
        } else if (responses.length < plan.length && !c.closed) {
          throw new Error(`neither answered nor closed: ${context}`)
        }
      }
    ),
    { numRuns: 60 }
  )
  t.equal(smuggledAnswers, before, "the smuggled route never ran")
  t.equal((await fetch(`${base}/hello`)).status, 200, "the server still answers")
})
