/**
 * HEAD on every GET route of the whole service (taken from its OpenAPI document, path
 * parameters filled with a placeholder): the answer has GET's status and no body, and the GET
 * sent behind it on the same connection is answered in step. Before the fix a HEAD answer
 * carried GET's body, which the next response on a keep-alive connection was read from.
 */
import t from "tap"
import { converse, parseResponses } from "../support/rawHttp.ts"
import { startTestService } from "../support/service.ts"

const service = await startTestService(t)
const { apiKey } = await service.newUser(1_000_000)
const port = Number(new URL(service.siteUrl).port)

const doc = (await (await fetch(`${service.base}/openapi.json`)).json()) as { paths: Record<string, Record<string, unknown>> }
const getPaths = Object.entries(doc.paths).filter(([, ops]) => "get" in ops).map(([p]) => p.replace(/\{\w+\}/g, "x"))

t.ok(getPaths.length >= 5, `${getPaths.length} GET routes: ${getPaths.join(" ")}`)

t.test("HEAD on every GET route: GET's status, no body, the connection goes on", async (t) => {
  for (const p of getPaths) {
    const request = (method: string, path: string) => `${method} ${path} HTTP/1.1\r\nHost: x\r\nxi-api-key: ${apiKey}\r\n\r\n`
    const getStatus = (await fetch(`${service.siteUrl}${p}`, { headers: { "xi-api-key": apiKey } }).then(async (r) => {
      await r.arrayBuffer()
      return r.status
    }))
    // The GET goes once the HEAD's head is in: behind a pending answer uWS would close.
    const c = await converse(port, [request("HEAD", p), request("GET", "/healthz")], {
      waitMs: 20_000,
      ready: (_, text) => text.includes("\r\n\r\n"),
      done: (text) => /\r\n\r\n[^]*HTTP\/1\.1 200[^]*\r\n\r\n[^]+$/.test(text) && parseResponses(text, (i) => i === 0).rest === ""
    })
    const { responses, rest } = parseResponses(c.text, (i) => i === 0)
    t.equal(responses[0]?.status, getStatus, `HEAD ${p}: GET's status`)
    t.equal(responses.length, 2, `HEAD ${p}: the request behind it is answered`)
    t.equal(rest, "", `HEAD ${p}: no body`)
  }
})
