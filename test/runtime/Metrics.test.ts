/**
 * The request metrics keep their counts in plain fields and register them for scrapes
 * (runtime/Metrics.ts). What /metrics shows must be exactly what Effect's own counter and
 * histogram would show for the same requests: the same series, buckets, sums and counts.
 */
import { Context, Effect, Metric } from "effect"
import { PrometheusMetrics } from "effect/observability"
import fc from "fast-check"
import t from "tap"
import { HttpMetrics } from "../../runtime/Metrics.ts"

const boundaries = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]
const methods = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"])

interface Request {
  readonly route: string
  readonly method: string
  readonly status: number
  readonly seconds: number
}

const scrape = (context: Context.Context<never>) => Effect.runSync(PrometheusMetrics.format().pipe(Effect.provideContext(context)))
const freshRegistry = () => Context.make(Metric.MetricRegistry, new Map())

/** The same requests through Effect's own metrics, updated one by one (what the module did before). */
const throughEffect = (requests: ReadonlyArray<Request>) => {
  const context = freshRegistry()
  for (const r of requests) {
    const method = methods.has(r.method) ? r.method : "OTHER"
    Metric.counter("http_requests_total", {
      description: "HTTP requests by route template, method and status",
      attributes: { route: r.route, method, status: String(r.status) }
    }).updateUnsafe(1, context)
    Metric.histogram("http_request_duration_seconds", {
      description: "HTTP request latency by route template and method, seconds",
      attributes: { route: r.route, method },
      boundaries
    }).updateUnsafe(r.seconds, context)
  }
  return scrape(context)
}

const throughHttpMetrics = (requests: ReadonlyArray<Request>) => {
  const context = freshRegistry()
  const metrics = new HttpMetrics(context)
  for (const r of requests) metrics.record(r.route, r.method, r.status, r.seconds)
  return scrape(context)
}


const request = fc.record({
  route: fc.constantFrom("/api/v1/models", "/v1/text-to-speech/{voice_id}/stream", "unmatched"),
  method: fc.constantFrom("GET", "POST", "HEAD", "MADEUP"),
  status: fc.constantFrom(200, 404, 499, 500),
  // Boundaries themselves (a value equal to a boundary belongs to its bucket), any latency, NaN.
  seconds: fc.oneof(fc.constantFrom(...boundaries), fc.double({ min: 0, max: 100 }))
})

t.test("a scrape shows what Effect's counter and histogram would for the same requests, in the same order", async (t) => {
  fc.assert(fc.property(fc.array(request, { minLength: 1, maxLength: 60 }), (requests) => {
    t.equal(throughHttpMetrics(requests), throughEffect(requests))
  }), { numRuns: 100 })
})

t.test("two instances on one registry add up, as updates of Effect's own metrics did", async (t) => {
  // Services started one after another in one process share the default registry.
  fc.assert(fc.property(fc.array(request, { minLength: 1, maxLength: 40 }), fc.array(fc.boolean(), { minLength: 40, maxLength: 40 }), (requests, toSecond) => {
    const context = freshRegistry()
    const instances = [new HttpMetrics(context), new HttpMetrics(context)]
    requests.forEach((r, i) => instances[toSecond[i] ? 1 : 0]!.record(r.route, r.method, r.status, r.seconds))
    t.equal(scrape(context), throughEffect(requests))
  }), { numRuns: 50 })
})

t.test("counts keep growing across scrapes", async (t) => {
  const context = freshRegistry()
  const metrics = new HttpMetrics(context)
  metrics.record("/api/v1/models", "GET", 200, 0.0003)
  t.match(scrape(context), /http_requests_total\{route="\/api\/v1\/models",method="GET",status="200"\} 1\b/)
  metrics.record("/api/v1/models", "GET", 200, 0.002)
  const text = scrape(context)
  t.match(text, /http_requests_total\{route="\/api\/v1\/models",method="GET",status="200"\} 2\b/)
  t.match(text, /http_request_duration_seconds_bucket\{route="\/api\/v1\/models",method="GET",le="0.0005"\} 1\b/)
  t.match(text, /http_request_duration_seconds_bucket\{route="\/api\/v1\/models",method="GET",le="0.0025"\} 2\b/)
  t.match(text, /http_request_duration_seconds_count\{route="\/api\/v1\/models",method="GET"\} 2\b/)
})
