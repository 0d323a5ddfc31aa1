/**
 * WorkerPool against real worker threads running `test/fixtures/poolTestTasks.ts` through the
 * tsx bootstrap. Assertions are on order and events (tasks announce their start on a
 * BroadcastChannel), never on durations; timeouts are only a safety net for a hang.
 */
import { Deferred, Effect, Exit, Fiber, Scope } from "effect"
import t from "tap"
import { threadId as mainThreadId } from "node:worker_threads"
import { WorkerPool, type WorkerPoolOptions, type WorkerPoolService } from "../../runtime/WorkerPool.ts"
import { type EngineError, Inference, type PoolStats } from "../../engines/Inference.ts"
import { channelName, type PoolTestEvent } from "../fixtures/poolTestTasks.ts"

const fixture = new URL("../fixtures/poolTestTasks.ts", import.meta.url).href

/** Start events from the workers, in arrival order; `open` releases a `test.gate` task. */
class Events {
  readonly order: Array<string> = []
  private readonly threads = new Map<string, number>()
  private readonly waiters = new Map<string, Array<(threadId: number) => void>>()
  private readonly channel = new BroadcastChannel(channelName)
  constructor() {
    this.channel.onmessage = (event: MessageEvent) => {
      const data = event.data as PoolTestEvent
      if (!("started" in data)) return
      this.order.push(data.started)
      this.threads.set(data.started, data.threadId)
      for (const wake of this.waiters.get(data.started) ?? []) wake(data.threadId)
      this.waiters.delete(data.started)
    }
  }
  seen(id: string): boolean {
    return this.threads.has(id)
  }
  /** Succeeds with the task's thread id once it has started on a worker. */
  started(id: string): Effect.Effect<number> {
    return safely(`start of ${id}`, Effect.promise(() => {
      const known = this.threads.get(id)
      if (known !== undefined) return Promise.resolve(known)
      return new Promise<number>((resolve) => this.waiters.set(id, [...(this.waiters.get(id) ?? []), resolve]))
    }))
  }
  open(id: string): void {
    this.channel.postMessage({ open: id } satisfies PoolTestEvent)
  }
  close(): void {
    this.channel.close()
  }
}

const events = new Events()
t.teardown(() => events.close())

/** Safety net only: a broken pool hangs rather than fails, and a hang should name what hung. */
const safely = <A, E, R>(what: string, effect: Effect.Effect<A, E, R>) =>
  effect.pipe(Effect.timeoutOrElse({ duration: "120 seconds", orElse: () => Effect.die(new Error(`timed out waiting for ${what}`)) }))

/** The untyped pool (the fixture's kinds are not the production registry's), in its own scope. */
const withPool = <A, E>(options: Omit<WorkerPoolOptions, "filename">, body: (pool: WorkerPoolService) => Effect.Effect<A, E>) =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    return yield* body(yield* WorkerPool.make({ filename: fixture, ...options }))
  })))

const statsReach = (pool: WorkerPoolService, what: string, ok: (s: PoolStats) => boolean) =>
  safely(what, Effect.gen(function*() {
    while (!ok(pool.stats())) yield* Effect.sleep("5 millis")
  }))

type Run = { id: string; threadId: number }
const sleepTask = (pool: WorkerPoolService, id: string, ms = 0, priority?: "realtime" | "batch") =>
  pool.run<Run>("test.sleep", { id, ms }, priority ? { priority } : {})
const gateTask = (pool: WorkerPoolService, id: string) => pool.run<Run>("test.gate", { id })
const forkNow = <A, E>(effect: Effect.Effect<A, E>) => Effect.forkChild(effect, { startImmediately: true })

t.test("ping round-trips through a worker thread", (t) =>
  withPool({ workers: 1, maxQueue: 4 }, (pool) =>
    Effect.gen(function*() {
      const pong = yield* safely("ping", pool.ping)
      t.equal(pong.pid, process.pid)
      t.not(pong.threadId, mainThreadId)
      t.match(pool.stats(), { threads: 1, queueSize: 0, running: 0, completed: 2 }, "the start-up probe and this ping")
    })))

t.test("buffers move both ways instead of being copied", (t) =>
  withPool({ workers: 1, maxQueue: 4 }, (pool) =>
    Effect.gen(function*() {
      const n = 22050 * 30 // 30 s of 22050 Hz audio, 2.6 MB
      for (const kind of ["test.echoBuffer", "test.echoPiscinaMove"]) {
        const samples = Float32Array.from({ length: n }, (_, i) => (i % 100) / 100)
        const result = yield* safely(kind, pool.run<{ samples: Float32Array; sum?: number } | Float32Array>(
          kind,
          { samples },
          { transfer: [samples.buffer] }
        ))
        t.equal(samples.byteLength, 0, `${kind}: input was transferred, not copied`)
        const echoed = result instanceof Float32Array ? result : result.samples
        t.ok(echoed instanceof Float32Array, `${kind}: a Float32Array arrives`)
        t.equal(echoed.length, n)
        t.equal(echoed[99], Math.fround(0.99), "values survive")
        if (!(result instanceof Float32Array)) t.ok(result.sum! > 0, "other fields of the result arrive too")
        t.equal(yield* pool.run<boolean>("test.lastReturnedDetached", null), true, `${kind}: result was moved off the worker`)
      }
    })))

t.test("recycled output buffers go to the worker with the next task that takes spares, and are reused there", (t) =>
  withPool({ workers: 1, maxQueue: 4 }, (pool) =>
    Effect.gen(function*() {
      type Output = { pcm: Int16Array; capacity: number; spares: { count: number; bytes: number } }
      const first = yield* safely("first output", pool.run<Output>("test.output", { samples: 40_000, fill: 7 }))
      t.equal(first.pcm.length, 40_000)
      t.equal(first.capacity, 128 * 1024, "an output above the spare minimum is rounded up to a power of two")
      // Given back: ignored unless the buffer is worth reusing and is not shared or a duplicate.
      pool.recycle(first.pcm.buffer)
      pool.recycle(first.pcm.buffer)
      pool.recycle(new ArrayBuffer(1024))
      pool.recycle(new SharedArrayBuffer(1 << 20))
      const noSpares = yield* safely("held", pool.run<{ count: number }>("test.sparesHeld", null))
      t.equal(noSpares.count, 0, "a task that does not take spares gets none")
      t.equal(first.pcm.buffer.byteLength, 128 * 1024, "still attached here until a spares task is dispatched")
      const second = yield* safely("second output", pool.run<Output>("test.output", { samples: 35_000, fill: 9 }, { spares: true }))
      t.equal(first.pcm.buffer.byteLength, 0, "the recycled buffer was moved to the worker (detached here)")
      t.equal(second.capacity, 128 * 1024, "the worker wrote its next output into the spare")
      t.equal(second.spares.count, 0, "which it no longer holds")
      t.ok(second.pcm.every((v) => v === 9), "the output holds the new samples only")
      t.equal(second.pcm.length, 35_000, "a view of the samples, not of the whole spare")
      const small = yield* safely("small output", pool.run<Output>("test.output", { samples: 100, fill: 1 }))
      t.equal(small.capacity, 200, "small outputs are exact")
    })))

t.test("a full queue fails fast with QueueFull", (t) =>
  withPool({ workers: 1, maxQueue: 2 }, (pool) =>
    Effect.gen(function*() {
      const gate = yield* forkNow(gateTask(pool, "full.gate"))
      yield* events.started("full.gate")
      const waiting = [yield* forkNow(sleepTask(pool, "full.1")), yield* forkNow(sleepTask(pool, "full.2", 0, "realtime"))]
      yield* statsReach(pool, "two queued tasks", (s) => s.queueSize === 2)
      const error = yield* Effect.flip(sleepTask(pool, "full.3"))
      t.match(error, { _tag: "EngineError", reason: "QueueFull", kind: "test.sleep" })
      t.equal(error.isRetryable, true)
      events.open("full.gate")
      yield* safely("queued tasks", Fiber.join(gate))
      for (const fiber of waiting) yield* safely("queued tasks", Fiber.join(fiber))
      t.notOk(events.seen("full.3"), "the refused task never ran")
    })))

t.test("a busy pool with a full queue is still ready (readiness is not load)", (t) =>
  withPool({ workers: 1, maxQueue: 2 }, (pool) =>
    Effect.gen(function*() {
      yield* safely("idle readiness", pool.ready)
      const gate = yield* forkNow(gateTask(pool, "ready.gate"))
      yield* events.started("ready.gate")
      const waiting = [yield* forkNow(sleepTask(pool, "ready.1")), yield* forkNow(sleepTask(pool, "ready.2"))]
      yield* statsReach(pool, "a full queue", (s) => s.queueSize === 2)
      // What /readyz used before: a ping cannot even queue now.
      t.match(yield* Effect.flip(pool.ping), { reason: "QueueFull" }, "a ping is refused by the full queue")
      yield* safely("busy readiness", pool.ready)
      t.pass("ready while every thread is busy and the queue is full")
      events.open("ready.gate")
      yield* safely("queued tasks", Fiber.join(gate))
      for (const fiber of waiting) yield* safely("queued tasks", Fiber.join(fiber))
    })))

t.test("realtime tasks overtake queued batch tasks", (t) =>
  withPool({ workers: 1, maxQueue: 8 }, (pool) =>
    Effect.gen(function*() {
      const fibers = [yield* forkNow(gateTask(pool, "prio.gate"))]
      yield* events.started("prio.gate")
      for (const id of ["prio.b1", "prio.b2", "prio.b3"]) fibers.push(yield* forkNow(sleepTask(pool, id, 0, "batch")))
      yield* statsReach(pool, "three batch tasks queued", (s) => s.queueSize === 3)
      fibers.push(yield* forkNow(sleepTask(pool, "prio.r1", 0, "realtime")))
      fibers.push(yield* forkNow(sleepTask(pool, "prio.b4")))
      fibers.push(yield* forkNow(sleepTask(pool, "prio.r2", 0, "realtime")))
      yield* statsReach(pool, "all queued", (s) => s.queueSize === 6)
      events.open("prio.gate")
      for (const fiber of fibers) yield* safely("all tasks", Fiber.join(fiber))
      const expected = ["prio.gate", "prio.r1", "prio.r2", "prio.b1", "prio.b2", "prio.b3", "prio.b4"]
      // A start is announced on a BroadcastChannel, a result comes back on the pool's port: the
      // last announcement can still be on its way when the last task's result is in.
      for (const id of expected) yield* events.started(id)
      t.same(events.order.filter((id) => id.startsWith("prio.")), expected)
    })))

t.test("interrupting a queued task drops it before it runs", (t) =>
  withPool({ workers: 1, maxQueue: 4 }, (pool) =>
    Effect.gen(function*() {
      const gate = yield* forkNow(gateTask(pool, "drop.gate"))
      yield* events.started("drop.gate")
      const queued = yield* forkNow(sleepTask(pool, "drop.queued"))
      yield* statsReach(pool, "one queued task", (s) => s.queueSize === 1)
      yield* Fiber.interrupt(queued)
      t.equal(pool.stats().queueSize, 0, "the lane is empty at once")
      events.open("drop.gate")
      yield* safely("gate", Fiber.join(gate))
      // One thread, FIFO: had the dropped task stayed queued it would have started before this one.
      yield* safely("next task", sleepTask(pool, "drop.next"))
      t.notOk(events.seen("drop.queued"), "the interrupted task never ran")
    })))

t.test("interrupting a running task returns at once; the task finishes on its thread, which is never terminated", (t) =>
  withPool({ workers: 1, maxQueue: 4 }, (pool) =>
    Effect.gen(function*() {
      // Terminating a thread inside native inference (onnxruntime) aborts the whole process, so
      // a running task is left to end and its result dropped.
      const running = yield* forkNow(gateTask(pool, "leave.gate"))
      const thread = yield* events.started("leave.gate")
      yield* Fiber.interrupt(running)
      t.equal(pool.stats().running, 1, "the interrupt returned while the task still holds its thread")
      const next = yield* forkNow(pool.ping)
      events.open("leave.gate")
      const pong = yield* safely("ping after the task ended", Fiber.join(next))
      t.equal(pong.threadId, thread, "the same thread answers: it was not terminated")
      t.match(pool.stats(), { threads: 1, running: 0, queueSize: 0 })
    })))

t.test("failures carry their reason", (t) =>
  withPool({ workers: 1, maxQueue: 4 }, (pool) =>
    Effect.gen(function*() {
      const failed = yield* Effect.flip(pool.run("test.fail", { reason: "VoiceNotFound" }))
      t.match(failed, { _tag: "EngineError", reason: "TaskFailed", kind: "test.fail", message: "fixture failed with VoiceNotFound" })
      t.same(failed.failure, { name: "FixtureError", reason: "VoiceNotFound", message: "fixture failed with VoiceNotFound" }, "no stack crosses")
      t.equal(failed.isRetryable, false)

      const unknown = yield* Effect.flip(pool.run("tts.nope", null))
      t.match(unknown, { reason: "TaskFailed", failure: { reason: "UnknownKind" } })
      // Streamed, it still ends: a failure that comes back as a result waits for the stream's end
      // marker (crashes and uncloneable input resume at once), and the worker posts one here too.
      const unknownStream = yield* Effect.flip(safely("unknown stream", pool.stream("tts.nope", null, () => {})))
      t.match(unknownStream, { reason: "TaskFailed", failure: { reason: "UnknownKind" } })

      const uncloneable = yield* Effect.flip(pool.run("test.sleep", { id: "x", ms: 0, f: () => 1 }))
      t.match(uncloneable, { reason: "TaskFailed", failure: { name: "DataCloneError", reason: "InputNotCloneable" } })

      const crashed: EngineError = yield* Effect.flip(safely("crash", pool.run("test.crash", null)))
      t.match(crashed, { reason: "WorkerCrashed", kind: "test.crash" })
      t.equal(crashed.isRetryable, true)
      yield* safely("ping after crash", pool.ping)
    })))

t.test("a task module that cannot load fails the layer instead of hanging tasks", (t) =>
  Effect.runPromise(Effect.gen(function*() {
    const missing = new URL("../fixtures/doesNotExist.ts", import.meta.url).href
    const error = yield* safely("layer", Effect.flip(Effect.provide(Inference.use((pool) => pool.ping), WorkerPool.layer({ filename: missing, workers: 1, maxQueue: 4 }))))
    t.match(error, { _tag: "EngineError", reason: "WorkerCrashed" })
  })))

t.test("closing the layer's scope drains the pool", (t) =>
  Effect.runPromise(Effect.gen(function*() {
    const scope = yield* Scope.make()
    const pool = yield* WorkerPool.make({ filename: fixture, workers: 1, maxQueue: 4 }).pipe(Scope.provide(scope))
    const running = yield* forkNow(gateTask(pool, "close.running"))
    yield* events.started("close.running")
    const queued = yield* forkNow(sleepTask(pool, "close.queued"))
    yield* statsReach(pool, "one queued task", (s) => s.queueSize === 1)

    const closing = yield* forkNow(Scope.close(scope, Exit.void))
    t.match(yield* safely("queued task", Effect.flip(Fiber.join(queued))), { reason: "Closed" }, "waiting tasks are refused")
    t.match(yield* Effect.flip(pool.ping), { reason: "Closed" }, "new tasks are refused")
    t.equal(closing.pollUnsafe(), undefined, "close waits for the running task")

    events.open("close.running")
    t.match(yield* safely("running task", Fiber.join(running)), { id: "close.running" }, "the running task finishes")
    yield* safely("close", Fiber.join(closing))
    t.match(pool.stats(), { threads: 0, running: 0, queueSize: 0 })
    t.notOk(events.seen("close.queued"))
  })))

// ---------------------------------------------------------------------------------------------
// Streaming tasks (`stream`): pieces in order before the result, cancel reaches the handler

type Piece = { i: number; samples: Float32Array }
type LastStream = { emitted: number; stoppedAt?: number }

t.test("a streamed task hands its pieces over in order, each before the result", (t) =>
  withPool({ workers: 1, maxQueue: 4 }, (pool) =>
    Effect.gen(function*() {
      const pieces: Array<Piece> = []
      const result = yield* safely("stream", pool.stream<{ emitted: number }>("test.blocks", { count: 50, pauseMs: 0 }, (p) => pieces.push(p as Piece)))
      t.same(result, { emitted: 50 })
      t.same(pieces.map((p) => p.i), Array.from({ length: 50 }, (_, i) => i), "every piece, in order, before the result")
      t.ok(pieces.every((p) => p.samples.length === 16 && p.samples[0] === p.i), "buffers arrive intact")
      t.match(pool.stats(), { threads: 1, running: 0, queueSize: 0 })
    })))

t.test("interrupting a streamed task tells the handler, which stops at its next piece and frees the thread", (t) =>
  withPool({ workers: 1, maxQueue: 4 }, (pool) =>
    Effect.gen(function*() {
      const count = 100_000 // 10 ms apart: about 17 minutes unless the cancel arrives
      let received = 0
      const third = yield* Deferred.make<void>()
      const fiber = yield* forkNow(pool.stream("test.blocks", { count, pauseMs: 10 }, () => {
        if (++received === 3) Deferred.doneUnsafe(third, Exit.void)
      }))
      yield* safely("three pieces", Deferred.await(third))
      yield* Fiber.interrupt(fiber)
      const atInterrupt = received
      // The only thread takes this once the streamed task has ended.
      const last = yield* safely("the stream's end", pool.run<LastStream>("test.lastStream", null))
      t.ok(last.stoppedAt !== undefined, `the handler saw the cancel (stopped at piece ${last.stoppedAt})`)
      t.ok(last.emitted < count, `${last.emitted} of ${count} pieces made`)
      t.equal(received, atInterrupt, "no piece reaches the caller after its interrupt")
      t.match(pool.stats(), { threads: 1, running: 0 })
    })))

t.test("a streamed task that fails or crashes after some pieces fails the caller after them; the pool goes on", (t) =>
  withPool({ workers: 1, maxQueue: 4 }, (pool) =>
    Effect.gen(function*() {
      const pieces: Array<number> = []
      const failed = yield* safely("failed stream", Effect.flip(pool.stream("test.blocks", { count: 10, pauseMs: 0, failAt: 3 }, (p) => pieces.push((p as Piece).i))))
      t.match(failed, { reason: "TaskFailed", failure: { reason: "FailedMidStream" } })
      t.same(pieces, [0, 1, 2], "the pieces before the failure arrived")
      const crashed = yield* safely("crash", Effect.flip(pool.stream("test.blocks", { count: 1000, pauseMs: 5, crashAt: 2 }, () => {})))
      t.equal(crashed.reason, "WorkerCrashed")
      const pong = yield* safely("ping after the crash", pool.ping)
      t.ok(pong.threadId > 0, "a new thread serves")
    })))
