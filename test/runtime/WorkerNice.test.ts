/**
 * WORKER_NICE: each worker thread lowers its own priority, and only its own (Linux keeps a nice
 * value per thread). Read back from the kernel inside the pool's threads, by `pool.ping`.
 */
import { Effect } from "effect"
import { getPriority } from "node:os"
import t from "tap"
import type { Pong } from "../../engines/tasks.ts"
import { WorkerPool } from "../../runtime/WorkerPool.ts"

const fixture = new URL("../fixtures/poolTestTasks.ts", import.meta.url).href

/** `runs` pings at once on a 2-thread pool: the nice values the threads report. */
const nicesOf = (nice: number | undefined, runs: number) =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const pool = yield* WorkerPool.make({ filename: fixture, workers: 2, maxQueue: 8, ...(nice === undefined ? {} : { nice }) })
    const pongs: ReadonlyArray<Pong> = yield* Effect.all(Array.from({ length: runs }, () => pool.ping), { concurrency: "unbounded" })
    return pongs.map((p) => p.nice)
  })))

const notLinux = process.platform !== "linux" && "nice per thread is Linux's"
/** A runner already at nice 13 or more would see 7 steps capped at 19: nothing to tell apart. */
const tooNice = getPriority() > 12 && "this process runs at nice > 12"

t.test("workers run the given steps below the main thread, which keeps its priority", { skip: notLinux || tooNice }, async (t) => {
  const before = getPriority()
  for (const nice of await nicesOf(7, 6)) t.equal(nice, Math.min(19, before + 7), "the worker thread is 7 steps lower")
  t.equal(getPriority(), before, "the main thread is untouched")
})

t.test("no nice (or 0) leaves the workers at the main thread's priority", { skip: notLinux }, async (t) => {
  const before = getPriority()
  for (const nice of [undefined, 0]) {
    for (const seen of await nicesOf(nice, 2)) t.equal(seen, before, `nice ${nice}`)
  }
})

t.test("the steps stop at 19, the lowest priority", { skip: notLinux }, async (t) => {
  for (const nice of await nicesOf(19, 2)) t.equal(nice, 19)
})
