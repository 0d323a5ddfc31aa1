/**
 * Rate limits shared by every instance on the database (protocol/RateLimiter.ts).
 *
 * - `rate_buckets`: one token bucket per limiter and caller (`bucket` = `<limiter>:<caller>`).
 *   `tokens` as of `at` (the database clock); `allowed` is the last check's answer, so one
 *   `INSERT … ON CONFLICT DO UPDATE … RETURNING` both refills, takes and reports. A row whose
 *   bucket has refilled completely carries no information and may be deleted at any time.
 *
 * Frozen once released: change the schema in a new numbered migration, never here.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql/SqlClient"

export default Effect.gen(function*() {
  const sql = yield* SqlClient
  yield* sql.unsafe(`
    CREATE TABLE rate_buckets (
      bucket text PRIMARY KEY,
      tokens double precision NOT NULL,
      at timestamptz NOT NULL,
      allowed boolean NOT NULL
    )`)
  yield* sql.unsafe(`CREATE INDEX rate_buckets_at ON rate_buckets (at)`)
})
