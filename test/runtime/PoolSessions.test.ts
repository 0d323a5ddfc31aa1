/**
 * Session affinity in the worker pool (`openSession`, engines/Inference.ts): sessions spread
 * over the threads up to STT_SESSIONS_PER_WORKER each and are refused beyond (SessionsFull);
 * a session's messages, events and replies keep their order; a thread that dies fails only the
 * sessions it hosted (WorkerCrashed), the others go on and the replacement thread hosts new
 * ones; closing a session runs its handler's close; tasks still run while every session slot
 * is taken (sessions do not hold piscina's slots). Real worker threads on
 * test/fixtures/sessionTestTasks.ts; waits are on events, timeouts only a safety net.
 */
import { Effect, Exit, Scope } from "effect"
import t from "tap"
import { WorkerPool, type WorkerPoolService } from "../../runtime/WorkerPool.ts"
import type { EngineError, SessionHandle } from "../../engines/Inference.ts"

const fixture = new URL("../fixtures/sessionTestTasks.ts", import.meta.url).href

const safely = <A, E, R>(what: string, effect: Effect.Effect<A, E, R>) =>
  effect.pipe(Effect.timeoutOrElse({ duration: "120 seconds", orElse: () => Effect.die(new Error(`timed out waiting for ${what}`)) }))

const withPool = <A, E>(body: (pool: WorkerPoolService) => Effect.Effect<A, E, Scope.Scope>) =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    return yield* body(yield* WorkerPool.make({ filename: fixture, workers: 2, maxQueue: 8, sessionsPerWorker: 2 }))
  })))

/** Opens a session in a scope of its own, so a test can close it alone. */
const openIn = (pool: WorkerPoolService, name: string, events: Array<unknown> = []) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const session = yield* pool.openSession("test.echo", { name }, (e) => events.push(e)).pipe(Scope.provide(scope))
    return { session, scope, events }
  })

/** The EngineError an exit failed with (its reason is what the tests check). */
const errorOf = <A>(exit: Exit.Exit<A, EngineError>): Pick<EngineError, "reason"> | undefined => {
  if (!Exit.isFailure(exit)) return undefined
  const m = /"reason":"(\w+)"/.exec(JSON.stringify(exit))
  return m ? { reason: m[1] as EngineError["reason"] } : undefined
}

t.test("sessions spread over the threads, bounded per thread; a closed one frees its place", async (t) => {
  await withPool((pool) => Effect.gen(function*() {
    const opened = [] as Array<{ session: SessionHandle; scope: Scope.Closeable }>
    for (const name of ["a", "b", "c", "d"]) opened.push(yield* safely(`open ${name}`, openIn(pool, name)))
    const threads = opened.map((o) => o.session.threadId)
    t.equal(new Set(threads).size, 2, `two threads host them (${threads})`)
    t.equal(threads.filter((id) => id === threads[0]).length, 2, "two each")
    t.equal(pool.stats().sessions, 4, "stats count them")
    const full = yield* Effect.exit(openIn(pool, "e"))
    t.equal(errorOf(full)?.reason, "SessionsFull", "a fifth is refused at once: SessionsFull")

    // Every slot held by sessions, and tasks still run on both threads (TTS's lanes are not starved).
    const pongs = yield* safely("tasks beside sessions", Effect.all([pool.ping, pool.ping, pool.run<number>("test.block", { ms: 5 }, { priority: "realtime" })], { concurrency: "unbounded" }))
    t.equal(pongs.length, 3, "tasks run while every session place is taken")

    const before = (yield* opened[0]!.session.call<{ closed: number }>({ type: "stats" })).closed
    const sameThread = opened.find((o, i) => i > 0 && o.session.threadId === opened[0]!.session.threadId)!
    yield* Scope.close(opened[0]!.scope, Exit.void)
    t.equal(pool.stats().sessions, 3, "closing the scope ends it")
    const after = (yield* sameThread.session.call<{ closed: number }>({ type: "stats" })).closed
    t.equal(after, before + 1, "its handler's close ran on the worker before the close returned")
    const again = yield* safely("reopen", openIn(pool, "f"))
    t.equal(again.session.threadId, opened[0]!.session.threadId, "the freed place is taken by the next session")
    t.equal(Exit.isFailure(yield* Effect.exit(opened[0]!.session.send({ type: "echo", value: 1 }))), true, "a closed session refuses sends")
  }))
})

t.test("order: sends, events and replies of one session keep their order", async (t) => {
  await withPool((pool) => Effect.gen(function*() {
    const { session, events } = yield* openIn(pool, "ordered")
    for (let n = 0; n < 200; n++) yield* session.send({ type: "emit", n })
    const reply = yield* safely("echo", session.call<{ name: string; value: number }>({ type: "echo", value: 42 }))
    t.same(reply.value, 42)
    t.same(events.map((e) => (e as { n: number }).n), Array.from({ length: 200 }, (_, n) => n), "200 events in order, all before the reply")
    const failed = yield* Effect.exit(session.call({ type: "throw" }))
    t.equal(errorOf(failed)?.reason, "TaskFailed", "a throwing call fails that call: TaskFailed")
    t.same((yield* session.call<{ value: number }>({ type: "echo", value: 7 })).value, 7, "the session lives on")
    yield* session.send({ type: "throw" })
    const done = yield* safely("done", Effect.exit(session.done))
    t.equal(errorOf(done)?.reason, "TaskFailed", "a throwing send ends the session: done fails with TaskFailed")
    t.equal(pool.stats().sessions, 0, "and it is counted out")
    const refused = yield* Effect.exit(pool.openSession("test.echo", { name: "x", failOpen: true }, () => {}))
    t.equal(errorOf(refused)?.reason, "TaskFailed", "an open that throws fails the open")
    t.equal(pool.stats().sessions, 0, "and holds no place")
  }))
})

t.test("a thread that dies fails only its own sessions; the others go on, the replacement hosts new ones", async (t) => {
  await withPool((pool) => Effect.gen(function*() {
    const all = [] as Array<{ session: SessionHandle }>
    for (const name of ["p", "q", "r", "s"]) all.push(yield* openIn(pool, name))
    const doomedThread = all[0]!.session.threadId
    const doomed = all.filter((o) => o.session.threadId === doomedThread)
    const spared = all.filter((o) => o.session.threadId !== doomedThread)
    yield* doomed[0]!.session.send({ type: "crash" })
    for (const o of doomed) {
      const exit = yield* safely("the crashed session's end", Effect.exit(o.session.done))
      t.equal(errorOf(exit)?.reason, "WorkerCrashed", "a session on the dead thread: WorkerCrashed")
      t.equal(errorOf(yield* Effect.exit(o.session.call({ type: "echo", value: 1 })))?.reason, "WorkerCrashed", "and every later call fails alike")
    }
    for (const o of spared) {
      const r = yield* safely("a spared session", o.session.call<{ value: number }>({ type: "echo", value: 5 }))
      t.equal(r.value, 5, "a session on the other thread answers")
    }
    t.equal(pool.stats().sessions, 2, "the dead thread's sessions are counted out")
    // The replacement announces itself as it loads: the two free places are on it.
    const fresh = yield* safely("open on the replacement", openIn(pool, "t"))
    t.not(fresh.session.threadId, doomedThread, "a new session lands on a live thread")
    t.equal((yield* fresh.session.call<{ value: number }>({ type: "echo", value: 9 })).value, 9)
  }))
})
