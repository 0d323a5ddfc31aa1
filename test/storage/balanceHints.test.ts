/**
 * storage/BalanceHints.ts: what a process may promise before the database answers never exceeds
 * the balance it last heard, expires, and forgets the oldest users first.
 */
import fc from "fast-check"
import t from "tap"
import { makeBalanceHints } from "../../storage/BalanceHints.ts"

t.test("never promises more in total than the balance last heard; unknown users get no promise", async (t) => {
  fc.assert(fc.property(fc.nat(10_000), fc.array(fc.integer({ min: 1, max: 500 }), { maxLength: 60 }), (balance, amounts) => {
    const hints = makeBalanceHints(30_000, 100, () => 0)
    if (hints.covers("u", 1)) return false
    hints.heard("u", balance)
    let promised = 0
    for (const amount of amounts) if (hints.covers("u", amount)) promised += amount
    const greedy = amounts.reduce((left, a) => (a <= left ? left - a : left), balance)
    return promised <= balance && balance - promised === greedy
  }))
  t.pass("property held")
})

t.test("a heard balance is trusted for ttlMs only, and the database's next word replaces it", async (t) => {
  let now = 0
  const hints = makeBalanceHints(1000, 100, () => now)
  hints.heard("u", 50)
  t.ok(hints.covers("u", 20))
  now = 1001
  t.notOk(hints.covers("u", 1), "stale after ttlMs")
  hints.heard("u", 5)
  t.notOk(hints.covers("u", 6), "the new word counts, not the old one")
  t.ok(hints.covers("u", 5))
})

t.test("at most maxUsers are remembered: the one heard longest ago is forgotten", async (t) => {
  const hints = makeBalanceHints(30_000, 2, () => 0)
  hints.heard("a", 10)
  hints.heard("b", 10)
  hints.heard("a", 10) // heard again: now the newest
  hints.heard("c", 10)
  t.notOk(hints.covers("b", 1), "b forgotten")
  t.ok(hints.covers("a", 1))
  t.ok(hints.covers("c", 1))
})
