/**
 * NUL characters in ids (issue 9 item 9): PostgreSQL text cannot hold them, so an id like
 * `vc_%00x` reached the database and came back as a 500. Every route answers 400 instead, in
 * the spec's error body, and the server goes on. The same for NUL (and lone surrogates) in the
 * string fields of JSON bodies and of JSON inside form fields (issue 38 item 5), refused by one
 * rule at the decode layer (protocol/decode.ts), and such a request writes no stack to the log.
 * Every operation of the OpenAPI document is fuzzed with such strings in test/fuzz/JsonBodies.test.ts.
 */
import fc from "fast-check"
import t from "tap"
import { captureLog } from "../support/logCapture.ts"
import { startTestService } from "../support/service.ts"

const service = await startTestService(t)
const user = await service.newUser(100_000)

const call = (method: string, path: string, body?: unknown) =>
  fetch(`${service.base}${path}`, {
    method,
    headers: { "xi-api-key": user.apiKey, ...(body !== undefined ? { "content-type": "application/json" } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {})
  })

t.test("a NUL in a path id is a 400 with the error body on every templated route", async (t) => {
  const cases: Array<[string, string, unknown?]> = [
    ["GET", "/voices/vc_%00abc"],
    ["GET", "/voices/%00"],
    ["GET", "/voices/vc_a%00/settings"],
    ["GET", "/voices/vc_a%00/preview"],
    ["DELETE", "/voices/vc_%00abc"],
    ["POST", "/text-to-speech/vc_%00abc", { text: "hello" }],
    ["POST", "/text-to-speech/mari%00/stream", { text: "hello" }]
  ]
  for (const [method, path, body] of cases) {
    const res = await call(method, path, body)
    t.equal(res.status, 400, `${method} ${path}`)
    const json = await res.json() as { detail?: { status?: string; message?: string } }
    t.equal(json.detail?.status, "invalid_request", `${method} ${path}: invalid_request`)
  }
})

t.test("property: ids with NUL anywhere never give a 5xx", async (t) => {
  await fc.assert(
    fc.asyncProperty(
      fc.string({ maxLength: 12 }),
      fc.string({ maxLength: 12 }),
      fc.constantFrom("GET /voices/{id}", "DELETE /voices/{id}", "GET /voices/{id}/settings", "POST /text-to-speech/{id}"),
      async (before, after, route) => {
        const [method, template] = route.split(" ") as [string, string]
        const id = encodeURIComponent(`${before}\u0000${after}`)
        const res = await call(method, template.replace("{id}", id), method === "POST" ? { text: "hi" } : undefined)
        if (res.status !== 400) throw new Error(`${method} ${template} with id ${JSON.stringify(id)}: ${res.status}`)
      }
    ),
    { numRuns: 40 }
  )
  t.pass("40 random ids")
})

/** The requests of issue 38 item 5: each was a 500 with a stack in the log. */
const jsonCases = async (): Promise<Array<[string, string, unknown, string?]>> => {
  const reserved = await call("POST", "/recognition/uploads", {})
  const jobId = ((await reserved.json()) as { job_id: string }).job_id
  return [
    ["POST", "/recognition/uploads", { filename: "a\u0000b" }],
    ["POST", "/recognition/uploads", { filename: "a\u0000b" }, "anonymous"],
    ["POST", "/recognition/uploads", { content_type: "audio/wav\u0000" }, "anonymous"],
    ["POST", "/recognition/uploads", { filename: "a\ud800b.wav" }],
    ["POST", "/webhooks", { url: "https://hooks.example.com/x", description: "d\u0000" }],
    ["POST", "/webhooks", { url: "https://hooks.example.com/a\u0000b" }],
    ["POST", "/recognition/speakers", { job_id: jobId, speaker_label: "speaker_0", name: "N\u0000" }],
    ["PATCH", "/recognition/speakers/spk_nope", { name: "N\u0000" }],
    ["POST", `/recognition/jobs/${jobId}/start`, { language_code: "e\u0000t" }],
    ["POST", `/recognition/jobs/${jobId}/start`, { webhook_metadata: { k: "v\u0000" } }],
    ["POST", `/recognition/jobs/${jobId}/start`, { webhook_metadata: { "k\u0000": 1 } }],
    ["POST", "/translate/chunk", { new_source: "Tere\u0000", source: "et", target: "en" }],
    ["POST", "/text-to-speech/mari", { text: "Tere \udc00" }]
  ]
}

t.test("a NUL or a lone surrogate in any string of a JSON body is a 400 naming the field, with no stack in the log", async (t) => {
  for (const [method, path, body, who] of await jsonCases()) {
    const requestId = `nul-${Math.random().toString(36).slice(2)}`
    const { result: res, lines } = await captureLog(() =>
      fetch(`${service.base}${path}`, {
        method,
        headers: { "content-type": "application/json", "x-request-id": requestId, ...(who === "anonymous" ? {} : { "xi-api-key": user.apiKey }) },
        body: JSON.stringify(body)
      })
    )
    const what = `${method} ${path} ${JSON.stringify(body)}${who === undefined ? "" : ` (${who})`}`
    t.equal(res.status, 400, what)
    const json = await res.json() as { detail?: { status?: string; message?: string } }
    t.equal(json.detail?.status, "invalid_request", `${what}: invalid_request`)
    t.match(json.detail?.message, /NUL character|lone surrogate/, `${what}: says why`)
    const ours = lines.filter((l) => l.requestId === requestId)
    t.same(ours.filter((l) => l.level === "error" || l.cause !== undefined), [], `${what}: no error line, no stack`)
  }
})

t.test("JSON inside a form field (a clone's labels) follows the same rule", async (t) => {
  const form = new FormData()
  form.append("name", "nul labels")
  form.append("labels", JSON.stringify({ accent: "a\u0000" }))
  form.append("files", new Blob([new Uint8Array(64)], { type: "audio/wav" }), "a.wav")
  const res = await fetch(`${service.base}/voices/add`, { method: "POST", headers: { "xi-api-key": user.apiKey }, body: form })
  t.equal(res.status, 400, "labels with an escaped NUL")
  t.match(((await res.json()) as { detail: { message: string } }).detail.message, /NUL character/)
})

t.test("a NUL in the query string is a 400 on every route, those outside the OpenAPI document too", async (t) => {
  for (const path of ["/api/v1/recognition/jobs?limit=%00", "/api/v1/voices?search=a%00b", "/api/auth/mcp/authorize?client_id=cli_%00&response_type=code"]) {
    const res = await fetch(`${service.siteUrl}${path}`, { headers: { "xi-api-key": user.apiKey }, redirect: "manual" })
    t.equal(res.status, 400, path)
    t.match(((await res.json()) as { detail: { message: string } }).detail.message, /NUL character/, `${path}: says why`)
  }
})

t.test("a NUL nested deep is refused with its path's two ends, not the whole path (outside attack: a 300 KB 400)", async (t) => {
  const depth = 100_000
  const body = `${"{\"a\":".repeat(depth)}"x\\u0000y"${"}".repeat(depth)}`
  const res = await fetch(`${service.base}/recognition/uploads`, { method: "POST", headers: { "xi-api-key": user.apiKey, "content-type": "application/json" }, body })
  const text = await res.text()
  t.equal(res.status, 400)
  t.ok(text.length < 1000, `a short answer (${text.length} bytes)`)
  t.match(JSON.parse(text), { detail: { message: /^request body is refused: \$\.a\.a.*….*\.a\.a contains the NUL character/ } })
})
