/**
 * Service metrics in Prometheus text format, built on Effect's `Metric` registry.
 *
 * Request metrics are labelled by route template (never the raw path, which would let clients
 * create unbounded label sets), method (known methods only) and status. Metric objects per label
 * set are cached so the per-request cost is a few map lookups and two unsafe updates.
 */
import { Context, Effect, Metric } from "effect"
import { PrometheusMetrics } from "effect/observability"

/** Seconds; covers fast JSON answers up to long syntheses. */
const latencyBoundaries = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]

/**
 * Methods labelled as themselves; any other token uWS accepts (it takes any) is `OTHER`, or a
 * client could make a new series per request (20,000 made-up methods grew /metrics to 35 MB).
 */
const labelledMethods = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"])

interface RouteSeries {
  readonly counters: Map<number, Metric.Counter<number>>
  readonly histogram: Metric.Histogram<number>
}

export class HttpMetrics {
  /** Route template, then method: both are looked up as they come (no concatenated key to hash per request). */
  private readonly byRoute = new Map<string, Map<string, RouteSeries>>()

  constructor(private readonly context: Context.Context<never>) {}

  /** Records one finished request; `seconds` is wall time from arrival to last byte. */
  record(route: string, requestMethod: string, status: number, seconds: number): void {
    const method = labelledMethods.has(requestMethod) ? requestMethod : "OTHER"
    let byMethod = this.byRoute.get(route)
    if (byMethod === undefined) this.byRoute.set(route, byMethod = new Map())
    let entry = byMethod.get(method)
    if (entry === undefined) {
      entry = {
        counters: new Map(),
        histogram: Metric.histogram("http_request_duration_seconds", {
          description: "HTTP request latency by route template and method, seconds",
          attributes: { route, method },
          boundaries: latencyBoundaries
        })
      }
      byMethod.set(method, entry)
    }
    let counter = entry.counters.get(status)
    if (counter === undefined) {
      counter = Metric.counter("http_requests_total", {
        description: "HTTP requests by route template, method and status",
        attributes: { route, method, status: String(status) }
      })
      entry.counters.set(status, counter)
    }
    counter.updateUnsafe(1, this.context)
    entry.histogram.updateUnsafe(seconds, this.context)
  }
}

/** Gauges whose value is read at scrape time from a live source (pool, sessions). */
export interface GaugeSource {
  readonly name: string
  readonly description: string
  readonly read: () => number
}

export const renderMetrics = (sources: ReadonlyArray<GaugeSource>) =>
  Effect.gen(function*() {
    for (const s of sources) {
      yield* Metric.update(Metric.gauge(s.name, { description: s.description }), s.read())
    }
    return yield* PrometheusMetrics.format()
  })

/** Speech-to-text pipeline metrics live with their actor; listed here by the same registry. */
export { sttMetrics } from "../actors/SttMetrics.ts"
