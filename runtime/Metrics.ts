/**
 * Service metrics in Prometheus text format, built on Effect's `Metric` registry.
 *
 * Request metrics are labelled by route template (never the raw path, which would let clients
 * create unbounded label sets), method (known methods only) and status. Their counts live in
 * plain fields here, registered once per label set with `Metric.registerUnsafe` and read only
 * when /metrics is scraped. `updateUnsafe` per request looked the series up in the registry
 * each time (the merged-attributes reference and the registry, each a miss-then-default
 * lookup in the context, then the registry's map, for each of two metrics): `GET /models`
 * serves 6–8 % more requests per second this way (bench/http's load, alternating builds).
 */
import { Context, Effect, Metric } from "effect"
import { PrometheusMetrics } from "effect/observability"

/** Seconds; covers fast JSON answers up to long syntheses. Ascending. */
const latencyBoundaries = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]

/**
 * Methods labelled as themselves; any other token uWS accepts (it takes any) is `OTHER`, or a
 * client could make a new series per request (20,000 made-up methods grew /metrics to 35 MB).
 */
const labelledMethods = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"])

const ignore = () => {}

/** One counter series: a number bumped per request, read at scrape time. */
class CountSeries {
  count = 0
  constructor(metric: Metric.Counter<number>, context: Context.Context<never>) {
    Metric.registerUnsafe(metric, context, { get: () => ({ count: this.count, incremental: true }), update: ignore, modify: ignore })
  }
}

/**
 * One histogram series, in the state Effect's own histogram reports (cumulative counts per
 * boundary; the +Inf bucket is `count`), so the exporter renders it unchanged.
 */
class LatencySeries {
  private readonly perBucket = new Uint32Array(latencyBoundaries.length + 1)
  private count = 0
  private sum = 0
  private min = Number.MAX_VALUE
  private max = -Number.MAX_VALUE

  constructor(metric: Metric.Histogram<number>, context: Context.Context<never>) {
    Metric.registerUnsafe(metric, context, { get: () => this.state(), update: ignore, modify: ignore })
  }

  observe(value: number): void {
    // 16 boundaries: a scan from the fast end finds most answers in the first few. Written as
    // "not <=" so that NaN lands in +Inf alone, as in Effect's own histogram.
    let i = 0
    while (i < latencyBoundaries.length && !(value <= latencyBoundaries[i]!)) i++
    this.perBucket[i]!++
    this.count++
    this.sum += value
    if (value < this.min) this.min = value
    if (value > this.max) this.max = value
  }

  private state(): Metric.HistogramState {
    let cumulated = 0
    const buckets = latencyBoundaries.map((boundary, i): [number, number] => [boundary, cumulated += this.perBucket[i]!])
    return { buckets, count: this.count, min: this.min, max: this.max, sum: this.sum }
  }
}

interface RouteSeries {
  readonly byStatus: Map<number, CountSeries>
  /** Registered after the request's counter, in the order Effect's own metrics registered them. */
  latency: LatencySeries | undefined
}

type SeriesTable = Map<string, Map<string, RouteSeries>>

/**
 * Series by registry: instances on one registry (services started one after another in one
 * process, as tests do) add to the same series, as `updateUnsafe` did; a second registration
 * of a series would replace the first and hide its counts.
 */
const tables = new WeakMap<Map<string, unknown>, SeriesTable>()

export class HttpMetrics {
  /** Route template, then method: both are looked up as they come (no concatenated key to hash per request). */
  private readonly byRoute: SeriesTable

  constructor(private readonly context: Context.Context<never>) {
    const registry = Context.get(context, Metric.MetricRegistry)
    let table = tables.get(registry)
    if (table === undefined) tables.set(registry, table = new Map())
    this.byRoute = table
  }

  /** Records one finished request; `seconds` is wall time from arrival to last byte. */
  record(route: string, requestMethod: string, status: number, seconds: number): void {
    const method = labelledMethods.has(requestMethod) ? requestMethod : "OTHER"
    let byMethod = this.byRoute.get(route)
    if (byMethod === undefined) this.byRoute.set(route, byMethod = new Map())
    let series = byMethod.get(method)
    if (series === undefined) byMethod.set(method, series = { byStatus: new Map(), latency: undefined })
    let counter = series.byStatus.get(status)
    if (counter === undefined) {
      const metric = Metric.counter("http_requests_total", {
        description: "HTTP requests by route template, method and status",
        attributes: { route, method, status: String(status) }
      })
      series.byStatus.set(status, counter = new CountSeries(metric, this.context))
    }
    counter.count++
    series.latency ??= new LatencySeries(
      Metric.histogram("http_request_duration_seconds", {
        description: "HTTP request latency by route template and method, seconds",
        attributes: { route, method },
        boundaries: latencyBoundaries
      }),
      this.context
    )
    series.latency.observe(seconds)
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
