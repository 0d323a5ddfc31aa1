/**
 * BlockMailbox: a waiting reader runs inside the `offer` that wakes it (no scheduler turn
 * between a block's arrival and its handling), blocks keep their order across waits, the end
 * comes after the last block, and an interrupted reader is simply gone.
 */
import { Effect, Fiber } from "effect"
import fc from "fast-check"
import t from "tap"
import { BlockMailbox, forEachBlock } from "../../actors/BlockMailbox.ts"

t.test("a waiting reader handles the block before offer returns", async (t) => {
  const handled: Array<number> = []
  const order: Array<string> = []
  await Effect.runPromise(Effect.gen(function*() {
    const box = new BlockMailbox<number>()
    const reader = yield* Effect.forkChild(forEachBlock(box, (b) => Effect.sync(() => void handled.push(b))), { startImmediately: true })
    // From outside any fiber, as the pool's message handler calls it.
    yield* Effect.sync(() => {
      setTimeout(() => {
        box.offer(1)
        order.push(`after offer: ${handled.join(",")}`)
        box.offer(2)
        box.end()
        order.push(`after end: ${handled.join(",")}`)
      }, 1)
    })
    yield* Fiber.join(reader)
  }))
  t.same(handled, [1, 2])
  t.same(order, ["after offer: 1", "after end: 1,2"])
})

t.test("blocks offered while no one waits are taken together, then the end", async (t) => {
  const box = new BlockMailbox<string>()
  box.offer("a")
  box.offer("b")
  box.end()
  box.offer("late") // ignored after the end
  const first = await Effect.runPromise(box.takeAll)
  const second = await Effect.runPromise(box.takeAll)
  t.same(first, ["a", "b"])
  t.equal(second, undefined)
})

t.test("an interrupted reader leaves; later offers wake nobody", async (t) => {
  const box = new BlockMailbox<number>()
  const seen: Array<number> = []
  await Effect.runPromise(Effect.gen(function*() {
    const reader = yield* Effect.forkChild(forEachBlock(box, (b) => Effect.sync(() => void seen.push(b))), { startImmediately: true })
    yield* Fiber.interrupt(reader)
  }))
  box.offer(7)
  t.same(seen, [])
  t.same(await Effect.runPromise(box.takeAll), [7])
})

t.test("property: any interleaving of offers and reads delivers every block once, in order", async (t) => {
  await fc.assert(fc.asyncProperty(
    fc.array(fc.oneof(fc.constant<"yield">("yield"), fc.integer({ min: 0, max: 1000 })), { maxLength: 60 }),
    fc.boolean(),
    async (script, slowReader) => {
      const box = new BlockMailbox<number>()
      const got: Array<number> = []
      const sent: Array<number> = []
      await Effect.runPromise(Effect.gen(function*() {
        const reader = yield* Effect.forkChild(
          forEachBlock(box, (b) => (slowReader ? Effect.andThen(Effect.yieldNow, Effect.sync(() => void got.push(b))) : Effect.sync(() => void got.push(b)))),
          { startImmediately: true }
        )
        for (const step of script) {
          if (step === "yield") yield* Effect.yieldNow
          else {
            sent.push(step)
            box.offer(step)
          }
        }
        box.end()
        yield* Fiber.join(reader)
      }))
      return JSON.stringify(got) === JSON.stringify(sent)
    }
  ), { numRuns: 200 })
  t.pass("every interleaving kept the blocks")
})
