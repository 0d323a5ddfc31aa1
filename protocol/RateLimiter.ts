/**
 * A token bucket per caller, for endpoints a client may call many times a second (translation
 * chunks) and for sign-in attempts. Each caller's bucket holds at most `burst` tokens and gains
 * `perSecond` tokens a second; a call takes one token or is refused with the seconds until one
 * is back.
 *
 * Shared by every instance on one database: the buckets are rows of `rate_buckets` (migration
 * 0009), and one check is one atomic `INSERT … ON CONFLICT DO UPDATE … RETURNING` that refills
 * from the stored timestamp by the database's clock (instances' clocks never enter), then takes.
 * Concurrent checks of one bucket serialise on its row, so N instances allow the configured rate,
 * not N times it. Works the same on embedded PGlite.
 *
 * Storage is bounded by pruning: a bucket untouched for `burst / perSecond` seconds is full
 * again, and a full bucket is the same as no row, so such rows are deleted (at most once a
 * minute per limiter and process, on the request path).
 */
import { Effect } from "effect"
import type { SqlClient } from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"

export interface RateLimitOptions {
  /** Distinguishes limiters sharing the table (part of every bucket's key). */
  readonly name: string
  /** Tokens gained per second (the sustained rate). */
  readonly perSecond: number
  /** Bucket size (the burst a quiet caller may send at once). */
  readonly burst: number
}

export type RateDecision = { readonly allowed: true } | { readonly allowed: false; readonly retryAfterS: number }

const PRUNE_EVERY_MS = 60_000

/**
 * `$3` the cost (1 take, 0 look), `$4` the clock in ms or NULL for the database's. The refill
 * expression is repeated rather than computed once because ON CONFLICT's SET sees only `b` and
 * `excluded`.
 */
const statement = (burst: number, perSecond: number) => {
  const now = `coalesce(to_timestamp($4::double precision / 1000), clock_timestamp())`
  const refilled = `least(${burst}::double precision, b.tokens + greatest(0, extract(epoch FROM (${now} - b.at))) * ${perSecond}::double precision)`
  return `
    INSERT INTO rate_buckets AS b (bucket, tokens, at, allowed)
    VALUES ($1, $2::double precision - $3::double precision, ${now}, true)
    ON CONFLICT (bucket) DO UPDATE SET
      tokens = ${refilled} - CASE WHEN ${refilled} >= 1 THEN $3::double precision ELSE 0 END,
      at = greatest(b.at, ${now}),
      allowed = ${refilled} >= 1
    RETURNING tokens, allowed`
}

export class RateLimiter {
  private readonly text: string
  private lastPrune = 0

  constructor(private readonly sql: SqlClient, readonly options: RateLimitOptions) {
    if (!(options.perSecond > 0) || !(options.burst >= 1)) throw new Error(`rate limit ${options.name}: perSecond > 0 and burst >= 1 required`)
    this.text = statement(options.burst, options.perSecond)
  }

  /** Takes a token of `caller`'s bucket if there is one; `now` in ms (tests), else the database clock. */
  take(caller: string, now?: number): Effect.Effect<RateDecision, SqlError> {
    return this.run(caller, 1, now)
  }

  /** Whether `caller` has a token, without taking it (limits that count only failures). */
  check(caller: string, now?: number): Effect.Effect<RateDecision, SqlError> {
    return this.run(caller, 0, now)
  }

  /** Deletes this limiter's buckets that are full again by `now`; answers how many. */
  prune(now?: number): Effect.Effect<number, SqlError> {
    const fullAfterS = this.options.burst / this.options.perSecond
    return this.sql.unsafe<{ n: number | string }>(
      `WITH gone AS (
         DELETE FROM rate_buckets
         WHERE bucket LIKE $1 AND at < coalesce(to_timestamp($2::double precision / 1000), clock_timestamp()) - make_interval(secs => $3::double precision)
         RETURNING 1)
       SELECT count(*) AS n FROM gone`,
      [`${likeEscape(this.options.name)}:%`, now ?? null, fullAfterS]
    ).pipe(Effect.map((rows) => Number(rows[0]?.n ?? 0)))
  }

  private run(caller: string, cost: 0 | 1, now: number | undefined): Effect.Effect<RateDecision, SqlError> {
    const decide = this.sql.unsafe<{ tokens: number | string; allowed: boolean }>(
      this.text,
      [`${this.options.name}:${caller}`, this.options.burst, cost, now ?? null]
    ).pipe(Effect.map((rows): RateDecision => {
      const row = rows[0]!
      if (row.allowed) return { allowed: true }
      const tokens = Number(row.tokens)
      return { allowed: false, retryAfterS: Math.max(1, Math.ceil((1 - tokens) / this.options.perSecond)) }
    }))
    if (now !== undefined || Date.now() - this.lastPrune < PRUNE_EVERY_MS) return decide
    this.lastPrune = Date.now()
    return this.prune().pipe(Effect.ignore, Effect.andThen(decide))
  }
}

const likeEscape = (s: string) => s.replace(/[\\%_]/g, (c) => `\\${c}`)
