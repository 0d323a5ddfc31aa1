/**
 * storage/BalanceHints.ts: what a process promises before the database answers is always paid
 * when nobody else spends the balance, whatever the interleaving of its own statements (begun,
 * run in the database, answered, in any order); hints expire and forget the oldest users first.
 */
import fc from "fast-check"
import t from "tap"
import { makeBalanceHints } from "../../storage/BalanceHints.ts"

type Phase = "begun" | "ran" | "answered"
interface Statement {
  readonly amount: number
  /** Refunds and grants add; debits and reservations take (refused when short). */
  readonly adds: boolean
  readonly early: boolean
  phase: Phase
  result: number | undefined
  /** A take of the same user began after this promise and ran before it (the bounded race). */
  overtaken: boolean
}

t.test("one process: a promise (covers) is refused only when a later statement of the user overtook it in the database", async (t) => {
  const request = fc.record({ amount: fc.integer({ min: 1, max: 400 }), adds: fc.boolean(), early: fc.boolean() })
  fc.assert(fc.property(fc.integer({ min: 0, max: 1000 }), fc.array(request, { minLength: 1, maxLength: 25 }), fc.array(fc.nat(), { minLength: 200, maxLength: 200 }), (initial, requests, choices) => {
    const hints = makeBalanceHints(30_000, 100, () => 0)
    let balance = initial // the database's
    const statements: Array<Statement> = []
    let next = 0
    // Warm the hint with one statement, as a first request would.
    hints.begin("u")
    hints.end("u", balance)
    for (const choice of choices) {
      const open = statements.filter((s) => s.phase !== "answered")
      const moves = open.length + (next < requests.length ? 1 : 0)
      if (moves === 0) break
      const pick = choice % moves
      if (pick === open.length) {
        const r = requests[next++]!
        // An early caller asks first and starts its statement in the same tick (as SpeechRequest).
        const promised = r.early && !r.adds && hints.covers("u", r.amount)
        hints.begin("u")
        statements.push({ amount: r.amount, adds: r.adds, early: promised, phase: "begun", result: undefined, overtaken: false })
        continue
      }
      const s = open[pick]!
      if (s.phase === "begun") {
        if (!s.adds) for (const earlier of statements) if (earlier.early && earlier.phase === "begun" && statements.indexOf(earlier) < statements.indexOf(s)) earlier.overtaken = true
        if (s.adds) balance += s.amount
        else if (balance >= s.amount) balance -= s.amount
        else {
          if (s.early && !s.overtaken) return false // promised from a wrong hint, then refused
          s.phase = "ran"
          continue
        }
        s.result = balance
        s.phase = "ran"
      } else {
        hints.end("u", s.result)
        s.phase = "answered"
      }
    }
    return true
  }), { numRuns: 2000 })
  t.pass("no promise was refused but for a later statement that overtook it")
})

t.test("a heard balance is trusted for ttlMs only, not while a statement is in flight, and a failed statement drops it", async (t) => {
  let now = 0
  const hints = makeBalanceHints(1000, 100, () => now)
  t.notOk(hints.covers("u", 1), "never heard of")
  hints.begin("u")
  hints.end("u", 50)
  t.ok(hints.covers("u", 20))
  t.notOk(hints.covers("u", 31), "50 - 20 promised leaves 30")
  hints.begin("u")
  t.notOk(hints.covers("u", 1), "not while a statement is in flight")
  hints.end("u", 30)
  t.ok(hints.covers("u", 30))
  hints.begin("u")
  hints.end("u", 0)
  now = 1001
  hints.begin("u")
  hints.end("u", 500)
  now = 2002
  t.notOk(hints.covers("u", 1), "stale after ttlMs")
  hints.begin("u")
  hints.end("u", undefined)
  t.notOk(hints.covers("u", 1), "dropped after a failure")
})

t.test("answers of one busy spell are merged as their minimum (they may arrive out of order)", async (t) => {
  const hints = makeBalanceHints(30_000, 100, () => 0)
  hints.begin("u")
  hints.begin("u")
  hints.end("u", 700) // the newer state answered first
  hints.end("u", 900) // the older one last
  t.notOk(hints.covers("u", 701))
  t.ok(hints.covers("u", 700))
})

t.test("at most maxUsers are remembered: the one heard longest ago is forgotten", async (t) => {
  const hints = makeBalanceHints(30_000, 2, () => 0)
  const heard = (u: string) => (hints.begin(u), hints.end(u, 10))
  heard("a")
  heard("b")
  heard("a") // heard again: now the newest
  heard("c")
  t.notOk(hints.covers("b", 1), "b forgotten")
  t.ok(hints.covers("a", 1))
  t.ok(hints.covers("c", 1))
})
