/**
 * NUL characters in ids (issue 9 item 9): PostgreSQL text cannot hold them, so an id like
 * `vc_%00x` reached the database and came back as a 500. Every route answers 400 instead, in
 * the spec's error body, and the server goes on.
 */
import fc from "fast-check"
import t from "tap"
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
