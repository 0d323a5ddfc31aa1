/**
 * WORKER_NICE: each worker thread lowers its own priority, and only its own (Linux keeps a nice
 * value per thread). Read back from the kernel, from inside the pool's threads.
 */
import { Effect } from "effect"
import { getPriority } from "node:os"
import t from "tap"
import { WorkerPool } from "../../runtime/WorkerPool.ts"

const fixture = new URL("../fixtures/poolTestTasks.ts", import.meta.url).href
type Nice = { readonly thread: number; readonly process: number }

const nicesOf = (nice: number | undefined, runs: number) =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const pool = yield* WorkerPool.make({ filename: fixture, workers: 2, maxQueue: 8, ...(nice === undefined ? {} : { nice }) })
    return yield* Effect.all(Array.from({ length: runs }, () => pool.run<Nice>("test.nice", null)), { concurrency: "unbounded" })
  })))

const linux = process.platform === "linux"

t.test("workers run the given steps below the main thread, which keeps its priority", { skip: !linux && "nice per thread is Linux's" }, async (t) => {
  const before = getPriority(process.pid)
  const seen = await nicesOf(7, 6)
  for (const n of seen) {
    t.equal(n.process, before, "the main thread is untouched")
    t.equal(n.thread, Math.min(19, before + 7), "the worker thread is 7 steps lower")
  }
  t.equal(getPriority(process.pid), before)
})

t.test("no nice (or 0) leaves the workers at the process's priority", { skip: !linux && "nice per thread is Linux's" }, async (t) => {
  const before = getPriority(process.pid)
  for (const nice of [undefined, 0]) {
    for (const n of await nicesOf(nice, 2)) t.equal(n.thread, before, `nice ${nice}`)
  }
})

t.test("the steps stop at 19, the lowest priority", { skip: !linux && "nice per thread is Linux's" }, async (t) => {
  for (const n of await nicesOf(19, 2)) t.equal(n.thread, 19)
})
