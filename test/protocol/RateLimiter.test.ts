/**
 * The per-caller token bucket (protocol/RateLimiter.ts) in the database, on an explicit clock
 * (the `now` argument) and on the database's clock; embedded PGlite or PostgreSQL as the
 * environment selects.
 */
import { Effect } from "effect"
import fc from "fast-check"
import { SqlClient } from "effect/sql/SqlClient"
import t from "tap"
import { type RateLimitOptions, RateLimiter } from "../../protocol/RateLimiter.ts"
import { useTestDatabase } from "../support/database.ts"

const db = useTestDatabase(t)
const sql = await db.run(Effect.gen(function*() {
  return yield* SqlClient
}))
const limiterOf = async (options: RateLimitOptions) => new RateLimiter(sql, options)
const run = db.run

t.test("a burst passes, the next call waits for a token, tokens come back at the rate", async (t) => {
  const limiter = await limiterOf({ name: "t1", perSecond: 2, burst: 3 })
  for (let i = 0; i < 3; i++) t.same(await run(limiter.take("a", 0)), { allowed: true })
  t.same(await run(limiter.take("a", 0)), { allowed: false, retryAfterS: 1 })
  t.same(await run(limiter.take("b", 0)), { allowed: true }, "another caller has its own bucket")
  t.same(await run(limiter.take("a", 499)), { allowed: false, retryAfterS: 1 })
  t.same(await run(limiter.take("a", 500)), { allowed: true }, "one token after half a second at 2/s")
  t.same((await run(limiter.take("a", 10_000))).allowed, true)
})

t.test("limiters of different names do not share buckets; two objects of one name do (as instances do)", async (t) => {
  const one = await limiterOf({ name: "t2", perSecond: 1, burst: 2 })
  const other = await limiterOf({ name: "t2-other", perSecond: 1, burst: 2 })
  const again = await limiterOf({ name: "t2", perSecond: 1, burst: 2 })
  t.same(await run(one.take("x", 0)), { allowed: true })
  t.same(await run(again.take("x", 0)), { allowed: true })
  t.same(await run(one.take("x", 0)), { allowed: false, retryAfterS: 1 }, "the second object took the other token")
  t.same(await run(other.take("x", 0)), { allowed: true })
})

t.test("concurrent takes of one bucket never hand out more than the burst", async (t) => {
  const limiter = await limiterOf({ name: "t3", perSecond: 0.001, burst: 5 })
  const decisions = await Promise.all(Array.from({ length: 20 }, () => run(limiter.take("c"))))
  t.equal(decisions.filter((d) => d.allowed).length, 5, "database clock, 20 at once: exactly the burst")
})

t.test("full buckets are pruned, so the table stays bounded; a pruned bucket is a full one", async (t) => {
  const limiter = await limiterOf({ name: "t4", perSecond: 1, burst: 2 })
  for (let i = 0; i < 50; i++) await run(limiter.take(`caller-${i}`, i * 10))
  t.equal(await run(limiter.prune(1_000)), 0, "none full yet (2 s to refill)")
  t.equal(await run(limiter.prune(10_000)), 50)
  t.same(await run(limiter.take("caller-0", 10_000)), { allowed: true })
  t.same(await run(limiter.take("caller-0", 10_000)), { allowed: true })
  t.same(await run(limiter.take("caller-0", 10_000)), { allowed: false, retryAfterS: 1 })
})

t.test("property: over any window no caller gets more than burst + rate × seconds", async () => {
  let n = 0
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 1, max: 20 }),
      fc.integer({ min: 1, max: 30 }),
      fc.array(fc.integer({ min: 0, max: 400 }), { minLength: 1, maxLength: 60 }),
      async (perSecond, burst, gaps) => {
        const l = new RateLimiter(sql, { name: `t5-${n++}`, perSecond, burst })
        let now = 0
        let allowed = 0
        for (const g of gaps) {
          now += g
          if ((await run(l.take("x", now))).allowed) allowed++
        }
        return allowed <= burst + Math.floor((now / 1000) * perSecond) + 1e-9
      }
    ),
    { numRuns: 30 }
  )
})

t.test("check looks without taking: only take empties a bucket", async (t) => {
  const limiter = await limiterOf({ name: "t6", perSecond: 1, burst: 2 })
  for (let i = 0; i < 10; i++) t.same(await run(limiter.check("a", 0)), { allowed: true })
  t.same(await run(limiter.take("a", 0)), { allowed: true })
  t.same(await run(limiter.take("a", 0)), { allowed: true })
  t.same(await run(limiter.check("a", 0)), { allowed: false, retryAfterS: 1 })
  t.same(await run(limiter.check("a", 1000)), { allowed: true }, "refilled by time, as take sees it")
})
