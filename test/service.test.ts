/**
 * The assembled service as a user meets it: the model list (raw and through the official
 * ElevenLabs SDK), the OpenAPI document, health, readiness and metrics.
 */
import { ElevenLabsClient } from "@elevenlabs/elevenlabs-js"
import { Validator } from "@seriousme/openapi-schema-validator"
import * as net from "node:net"
import t from "tap"
import { startTestService } from "./support/service.ts"

const service = await startTestService(t)

t.test("GET /models is a bare array with svc_v1 and the fields SDKs parse", async (t) => {
  const res = await fetch(`${service.base}/models`)
  t.equal(res.status, 200)
  t.match(res.headers.get("content-type"), /application\/json/)
  const models = await res.json() as Array<Record<string, unknown>>
  t.ok(Array.isArray(models))
  t.equal(models.length, 1)
  t.match(models[0], {
    model_id: "svc_v1",
    name: String,
    can_do_text_to_speech: true,
    can_do_voice_conversion: false,
    languages: Array,
    maximum_text_length_per_request: 8000
  })
})

t.test("the official ElevenLabs SDK lists models with baseUrl = site/api", async (t) => {
  const { apiKey } = await service.newUser()
  const client = new ElevenLabsClient({ apiKey, baseUrl: `${service.siteUrl}/api` })
  const models = await client.models.list()
  t.equal(models[0]?.modelId, "svc_v1")
  t.equal(models[0]?.canDoTextToSpeech, true)
})

t.test("openapi.json is valid OpenAPI 3.1 and holds every route", async (t) => {
  const res = await fetch(`${service.base}/openapi.json`)
  t.equal(res.status, 200)
  const doc = await res.json() as { openapi: string; paths: Record<string, Record<string, unknown>> }
  t.equal(doc.openapi, "3.1.0")
  const validator = new Validator()
  const result = await validator.validate(doc as never)
  t.ok(result.valid, JSON.stringify(result.errors ?? null))
  for (const [path, method] of [["/api/v1/models", "get"], ["/api/v1/openapi.json", "get"], ["/healthz", "get"], ["/readyz", "get"], ["/metrics", "get"]] as const) {
    t.ok(doc.paths[path]?.[method], `${method.toUpperCase()} ${path} documented`)
  }
})

t.test("healthz and readyz", async (t) => {
  t.same(await (await fetch(`${service.siteUrl}/healthz`)).json(), { status: "ok" })
  const ready = await fetch(`${service.siteUrl}/readyz`)
  t.equal(ready.status, 200)
  // speech_to_text, espeak_native and translation are listed as well (optional: a missing
  // PocketSphinx or libespeak-ng1, or translation pairs still starting, do not make it unready).
  t.same(await ready.json(), { status: "ready", checks: { database: { ok: true }, worker_pool: { ok: true }, speech_to_text: { ok: true }, espeak_native: { ok: true }, media_decoder: { ok: true }, translation: { ok: true } } })
})

t.test("metrics: request counts by route template and status, pool gauges", async (t) => {
  await fetch(`${service.base}/models`)
  await fetch(`${service.base}/nope`)
  const text = await (await fetch(`${service.siteUrl}/metrics`)).text()
  t.match(text, /http_requests_total\{route="\/api\/v1\/models",method="GET",status="200"\} \d+/)
  t.match(text, /http_requests_total\{route="unmatched",method="GET",status="404"\} \d+/)
  t.match(text, /http_request_duration_seconds_bucket\{route="\/api\/v1\/models",method="GET",le="0.005"\}/)
  t.match(text, /worker_pool_queue_depth \d+/)
  t.match(text, /worker_pool_threads 1/)
})

t.test("metrics: made-up methods share one OTHER label, so a client cannot grow the series", async (t) => {
  const { hostname, port } = new URL(service.siteUrl)
  const methods = Array.from({ length: 50 }, (_, i) => `MADEUP${i}X`)
  const answers = await new Promise<string>((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => {
      socket.write(methods.map((m) => `${m} /nope HTTP/1.1\r\nHost: x\r\n\r\n`).join(""))
    })
    let got = ""
    socket.on("data", (d) => {
      got += d.toString("latin1")
      if ((got.match(/HTTP\/1\.1 /g) ?? []).length >= methods.length) socket.end()
    })
    socket.on("close", () => resolve(got))
    socket.on("error", reject)
    setTimeout(() => socket.destroy(new Error(`only got: ${got.slice(0, 200)}`)), 20_000).unref()
  })
  t.equal((answers.match(/HTTP\/1\.1 404 /g) ?? []).length, methods.length, "each answered 404")
  const text = await (await fetch(`${service.siteUrl}/metrics`)).text()
  t.notMatch(text, /MADEUP/, "no series per made-up method")
  t.match(text, /http_requests_total\{route="unmatched",method="OTHER",status="404"\} (\d+)/)
  t.equal(Number(/http_requests_total\{route="unmatched",method="OTHER",status="404"\} (\d+)/.exec(text)?.[1]), methods.length)
})

t.test("protected resource metadata is served where 401s point", async (t) => {
  const res = await fetch(`${service.siteUrl}/.well-known/oauth-protected-resource`)
  t.equal(res.status, 200)
  t.match(await res.json(), { resource: service.siteUrl, bearer_methods_supported: ["header"] })
})
