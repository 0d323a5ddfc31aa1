/**
 * The decode gate (actors/DecodeGate.ts): `permits` run, `maxWaiting` wait, the next one is
 * refused at once with EngineError QueueFull (503 server_busy); an interrupted waiter leaves the
 * queue; the counts go back to zero. The "work" is a Deferred the test completes, so nothing here
 * depends on timing.
 */
import { Deferred, Effect, Exit, Fiber } from "effect"
import t from "tap"
import { makeDecodeGate, type DecodeGateStats } from "../../actors/DecodeGate.ts"

/** Lets forked fibers run up to their next suspension. */
const settle = Effect.sleep("10 millis")

t.test("permits run, maxWaiting wait, the next is refused with QueueFull", async (t) => {
  const published: Array<DecodeGateStats> = []
  let refused = 0
  const gate = makeDecodeGate({
    permits: 1,
    maxWaiting: 1,
    publish: (s) => Effect.sync(() => void published.push(s)),
    refused: Effect.sync(() => void refused++)
  })
  await Effect.runPromise(Effect.gen(function*() {
    const release = yield* Deferred.make<void>()
    const order: Array<string> = []
    const job = (name: string) => gate.run(Effect.andThen(Effect.sync(() => void order.push(`${name} start`)), Deferred.await(release)))
    const a = yield* Effect.forkChild(job("a"))
    yield* settle
    const b = yield* Effect.forkChild(job("b"))
    yield* settle
    t.same(gate.stats(), { active: 1, waiting: 1, peakActive: 1 })
    const c = yield* Effect.exit(job("c"))
    t.ok(Exit.isFailure(c), "the third is refused")
    const error = Exit.isFailure(c) ? (c.cause.reasons[0] as { error?: { _tag?: string; reason?: string } })?.error : undefined
    t.match(error, { _tag: "EngineError", reason: "QueueFull" })
    t.equal(refused, 1)
    t.same(order, ["a start"], "b waits while a runs")
    yield* Deferred.succeed(release, undefined)
    yield* Fiber.join(a)
    yield* Fiber.join(b)
    t.same(order, ["a start", "b start"])
    t.same(gate.stats(), { active: 0, waiting: 0, peakActive: 1 })
  }))
  t.same(published.at(-1), { active: 0, waiting: 0, peakActive: 1 }, "the last published counts are zero")
  t.ok(published.every((s) => s.active <= 1 && s.waiting <= 1), "never past the bounds")
})

t.test("an interrupted waiter leaves the queue; a failing job frees its permit", async (t) => {
  const gate = makeDecodeGate({ permits: 1, maxWaiting: 1 })
  await Effect.runPromise(Effect.gen(function*() {
    const release = yield* Deferred.make<void>()
    const a = yield* Effect.forkChild(gate.run(Deferred.await(release)))
    yield* settle
    const b = yield* Effect.forkChild(gate.run(Effect.void))
    yield* settle
    t.equal(gate.stats().waiting, 1)
    yield* Fiber.interrupt(b)
    t.same(gate.stats(), { active: 1, waiting: 0, peakActive: 1 }, "the waiter is gone")
    const c = yield* Effect.forkChild(gate.run(Effect.fail("boom" as const)))
    yield* settle
    t.equal(gate.stats().waiting, 1, "its place is free again")
    yield* Deferred.succeed(release, undefined)
    yield* Fiber.join(a)
    const exit = yield* Fiber.await(c)
    t.ok(Exit.isFailure(exit), "the job's own failure comes through")
    t.same(gate.stats(), { active: 0, waiting: 0, peakActive: 1 })
    yield* gate.run(Effect.void)
    t.same(gate.stats(), { active: 0, waiting: 0, peakActive: 1 }, "the permit came back")
  }))
})
