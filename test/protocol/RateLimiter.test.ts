/** The per-caller token bucket (protocol/RateLimiter.ts), on an explicit clock. */
import fc from "fast-check"
import t from "tap"
import { RateLimiter } from "../../protocol/RateLimiter.ts"

t.test("a burst passes, the next call waits for a token, tokens come back at the rate", async (t) => {
  const limiter = new RateLimiter({ perSecond: 2, burst: 3 })
  for (let i = 0; i < 3; i++) t.same(limiter.take("a", 0), { allowed: true })
  t.same(limiter.take("a", 0), { allowed: false, retryAfterS: 1 })
  t.same(limiter.take("b", 0), { allowed: true }, "another caller has its own bucket")
  t.same(limiter.take("a", 499), { allowed: false, retryAfterS: 1 })
  t.same(limiter.take("a", 500), { allowed: true }, "one token after half a second at 2/s")
  t.same(limiter.take("a", 10_000).allowed, true)
})

t.test("the number of callers held is bounded", async (t) => {
  const limiter = new RateLimiter({ perSecond: 1, burst: 1, maxCallers: 100 })
  for (let i = 0; i < 10_000; i++) limiter.take(`caller-${i}`, i)
  t.equal(limiter.size(), 100)
})

t.test("property: over any window no caller gets more than burst + rate × seconds", async () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 20 }),
      fc.integer({ min: 1, max: 30 }),
      fc.array(fc.integer({ min: 0, max: 400 }), { minLength: 1, maxLength: 300 }),
      (perSecond, burst, gaps) => {
        const limiter = new RateLimiter({ perSecond, burst })
        let now = 0
        let allowed = 0
        for (const g of gaps) {
          now += g
          if (limiter.take("x", now).allowed) allowed++
        }
        return allowed <= burst + Math.floor((now / 1000) * perSecond) + 1e-9
      }
    )
  )
})

t.test("check looks without taking: only take empties a bucket", async (t) => {
  const limiter = new RateLimiter({ perSecond: 1, burst: 2 })
  for (let i = 0; i < 10; i++) t.same(limiter.check("a", 0), { allowed: true })
  t.same(limiter.take("a", 0), { allowed: true })
  t.same(limiter.take("a", 0), { allowed: true })
  t.same(limiter.check("a", 0), { allowed: false, retryAfterS: 1 })
  t.same(limiter.check("a", 1000), { allowed: true }, "refilled by time, as take sees it")
})
