/**
 * The inference worker pool: piscina threads behind an Effect service.
 *
 * Callers `run(kind, input)` a task registered in the worker's task module (`engines/tasks.ts`
 * explains how kinds are registered). The pool bounds the number of waiting tasks, runs realtime
 * work before batch work, moves listed buffers instead of copying them, and turns interruption
 * of the calling fiber into cancellation of the task.
 *
 * Waiting tasks are held here, in two FIFO lanes, and handed to piscina only when a thread is
 * free, so piscina's own queue stays empty. piscina 5.3 cannot do this itself: a task carrying an
 * AbortSignal that finds no idle thread goes to an internal "skip queue" that bypasses both a
 * custom `taskQueue` and `maxQueue` (so the bound and the priority would silently not apply), and
 * undistributed tasks are re-queued at the tail, so even its own queue is not FIFO.
 */
import { Effect, Layer, type Scope } from "effect"
import { stat } from "node:fs/promises"
import { getPriority } from "node:os"
import { pathToFileURL } from "node:url"
import { Piscina } from "piscina"
import { EngineError, type EngineErrorReason, Inference, type PoolStats, type Priority, type RunOptions, type SessionHandle, type SessionOptions } from "../engines/Inference.ts"
import { isSessionHostAnnouncement } from "../engines/sessions.ts"
import { isStreamMessage, type Pong, type StreamMessage, type TaskFailure, type TaskOutcome, type TaskRequest } from "../engines/tasks.ts"
import { isSpareSize, SPARES_HELD_BYTES } from "../engines/SpareBuffers.ts"
import { espeakLockBuffer } from "../engines/tts/EspeakLock.ts"
import { makePoolSessions } from "./PoolSessions.ts"

/**
 * Spares sent with one task, at most: a streamed sentence takes one output per piece (0.5, 1,
 * 2, 2 … s: a long sentence ten or more), a whole sentence one. Fewer than a streamed sentence uses left the rest piling up
 * here, dropped attached: the churn the spares are there to end. What a task does not use stays
 * in its worker, up to the worker's own cap (SPARES_HELD_BYTES).
 */
const SPARES_PER_TASK = 16

export interface WorkerPoolOptions {
  /** Task module (path or file URL) served by each worker; default `engines/worker.ts`. */
  readonly filename?: string
  /** Threads, at most; one task per thread at a time. */
  readonly workers: number
  /** Tasks that may wait for a thread before `run` fails with QueueFull. */
  readonly maxQueue: number
  /**
   * When set, threads idle this long (ms) end, down to one; their loaded models go with them.
   * Unset keeps every thread, and its models, for the life of the pool.
   */
  readonly idleTimeoutMs?: number
  /**
   * Nice steps each worker thread runs below the main thread (Linux: WORKER_NICE says why);
   * 0 or unset: the same priority.
   */
  readonly nice?: number
  /**
   * Sessions (`openSession`) one thread hosts at most (STT_SESSIONS_PER_WORKER); default 4.
   * engines/Inference.ts says why sessions sit beside the task slots, not in them.
   */
  readonly sessionsPerWorker?: number
}

/**
 * The pool before it is typed by a registry: `run` takes any kind, so tests can serve a fixture
 * task module. Production code sees it only as `Inference`, through `WorkerPool.layer`.
 */
export interface WorkerPoolService {
  readonly run: <A = unknown>(kind: string, input: unknown, options?: RunOptions) => Effect.Effect<A, EngineError>
  readonly stream: <A = unknown>(kind: string, input: unknown, onPiece: (piece: unknown) => void, options?: RunOptions) => Effect.Effect<A, EngineError>
  readonly openSession: (kind: string, init: unknown, onEvent: (event: unknown) => void, options?: SessionOptions) => Effect.Effect<SessionHandle, EngineError, Scope.Scope>
  readonly ping: Inference["Service"]["ping"]
  readonly ready: Inference["Service"]["ready"]
  readonly stats: () => PoolStats
  readonly recycle: Inference["Service"]["recycle"]
}

export const WorkerPool = {
  /** The pool for the life of the layer's scope, as the `Inference` service; see `make`. */
  layer: (options: WorkerPoolOptions): Layer.Layer<Inference, EngineError> =>
    // The registry's types are the worker module's own (`engines/worker.ts`), which the pool
    // serves unless a test names another module; a kind it lacks fails as TaskFailed UnknownKind.
    Layer.effect(Inference, Effect.map(makeWorkerPool(options), (pool) => Inference.of(pool as unknown as Inference["Service"]))),
  make: (options: WorkerPoolOptions) => makeWorkerPool(options)
}

/** A busy pool with no task finished for this long is stuck, not busy, ms (longest tasks: ~20 s). */
const STALL_MS = 60_000

const bootstrap = new URL("./worker.mjs", import.meta.url).href
const defaultTaskModule = new URL(`../engines/worker.${new URL(import.meta.url).pathname.endsWith(".ts") ? "ts" : "js"}`, import.meta.url).href // .js in dist/

/** A task waiting in a lane; `start` hands it to piscina. */
interface Waiting {
  readonly start: () => void
  readonly close: () => void
}

/** Three FIFO lanes; realtime drains first, background last. Sizes are bounded by `maxQueue`, so arrays suffice. */
class Lanes {
  private readonly lanes: Record<Priority, Array<Waiting>> = { realtime: [], batch: [], background: [] }
  get size(): number {
    return this.lanes.realtime.length + this.lanes.batch.length + this.lanes.background.length
  }
  push(priority: Priority, task: Waiting): void {
    this.lanes[priority].push(task)
  }
  shift(): Waiting | undefined {
    return this.lanes.realtime.shift() ?? this.lanes.batch.shift() ?? this.lanes.background.shift()
  }
  remove(task: Waiting): void {
    for (const lane of Object.values(this.lanes)) {
      const i = lane.indexOf(task)
      if (i !== -1) lane.splice(i, 1)
    }
  }
  drain(): Array<Waiting> {
    const all = [...this.lanes.realtime, ...this.lanes.batch, ...this.lanes.background]
    this.lanes.realtime.length = 0
    this.lanes.batch.length = 0
    this.lanes.background.length = 0
    return all
  }
}

/**
 * Starts the threads and fails with WorkerCrashed unless a task round-trips through one. Closing
 * the scope refuses new tasks, fails waiting ones with Closed, lets running ones finish
 * (interrupted callers have already aborted theirs) and then ends the threads.
 */
export const makeWorkerPool = Effect.fnUntraced(function*(options: WorkerPoolOptions) {
  const taskModule = options.filename === undefined
    ? defaultTaskModule
    : options.filename.startsWith("file:") ? options.filename : pathToFileURL(options.filename).href
  const services = yield* Effect.context<never>()
  const lanes = new Lanes()
  let running = 0
  let completed = 0
  /** performance.now() of the last task that finished, or of start-up. */
  let lastProgress = performance.now()
  let closed = false

  // libuv's threadpool (the main thread's fs, dns, crypto and zlib work) starts its threads on the
  // first request from any thread, and they inherit that thread's nice: let it be this one.
  yield* Effect.promise(() => stat(import.meta.dirname))
  const piscina = yield* Effect.acquireRelease(
    Effect.sync(() => {
      const pool = new Piscina<TaskRequest, TaskOutcome>({
        filename: bootstrap,
        // The espeak lock is process-wide: every pool of the process passes the same buffer.
        // `nice`: applied by each thread to itself (runtime/worker.mjs says why not piscina's niceIncrement).
        workerData: { taskModule, espeakLock: espeakLockBuffer, nice: options.nice ?? 0 },
        maxThreads: options.workers,
        minThreads: options.idleTimeoutMs === undefined ? options.workers : 1,
        idleTimeout: options.idleTimeoutMs ?? 0,
        concurrentTasksPerWorker: 1,
        // piscina's default ("sync") parks an idle thread in Atomics.wait, which stops its event
        // loop: timers would not fire until the next task, and engines give idle models back on a
        // timer (engines/tasks.ts perThreadWhileUsed). "async" waits with Atomics.waitAsync;
        // time to first audio measured the same (bench/tts, 9.7 vs 10.5 ms p50, within noise).
        atomics: "async",
        // Never reached while tasks wait in `lanes` (see the header); a bound all the same.
        maxQueue: options.workers
      })
      // Without a listener an 'error' event (a thread failing while idle, a close timeout)
      // would throw and take the process down.
      pool.on("error", (error: unknown) => {
        Effect.runForkWith(services)(
          Effect.logWarning("worker pool error", error instanceof Error ? error.message : String(error))
        )
      })
      return pool
    }),
    (pool) =>
      Effect.promise(() => {
        closed = true
        for (const task of lanes.drain()) task.close()
        sessions.closeAll()
        // Waits for running tasks (piscina's closeTimeout, 30 s), then terminates the threads.
        return pool.close()
      })
  )

  const sessions = makePoolSessions({ perWorker: options.sessionsPerWorker ?? 4, threads: () => piscina.threads.length, closed: () => closed })
  // A thread that ends (crash, exit, the pool closing) takes the sessions it hosted with it.
  piscina.on("workerDestroy", (worker: { threadId: number }) => sessions.threadGone(worker.threadId))

  /** Streaming tasks in flight, by stream id: where their workers' pieces go. */
  const streams = new Map<number, (message: StreamMessage) => void>()
  let lastStreamId = 0
  // Every thread's pieces arrive here (piscina emits what a worker posts on its parentPort).
  piscina.on("message", (message: unknown) => {
    if (isStreamMessage(message)) streams.get(message.stream)?.(message)
    else if (isSessionHostAnnouncement(message)) sessions.announce(message)
  })

  // Output buffers given back by callers, on their way to a worker (engines/SpareBuffers.ts).
  const spares: Array<ArrayBuffer> = []
  const recycle = (buffer: ArrayBufferLike) => {
    if (!(buffer instanceof ArrayBuffer) || !isSpareSize(buffer.byteLength) || spares.includes(buffer)) return
    if (spares.reduce((n, b) => n + b.byteLength, buffer.byteLength) <= SPARES_HELD_BYTES) spares.push(buffer)
  }
  /** Up to SPARES_PER_TASK spares, still attached (a buffer already sent elsewhere has byteLength 0). */
  const takeSpares = (): Array<ArrayBuffer> => spares.splice(0, SPARES_PER_TASK).filter((b) => b.byteLength > 0)

  const pump = () => {
    while (!closed && running < options.workers && lanes.size > 0) lanes.shift()!.start()
  }

  /** Before resuming the caller, so that `stats()` read right after a result is current. */
  const settled = (ranToOutcome: boolean) => {
    running--
    if (ranToOutcome) completed++
    lastProgress = performance.now()
    pump()
  }

  /**
   * One task, plain (`onPiece` undefined) or streaming. A streaming task gets a stream id (its
   * pieces, then an end marker, come back on its worker's port) and a shared cancel flag; it
   * resumes the caller only when both piscina's result and the end marker have arrived, because
   * the two travel on different ports and a result could otherwise overtake the last pieces.
   */
  const dispatch = <A>(kind: string, input: unknown, runOptions: RunOptions | undefined, onPiece: ((piece: unknown) => void) | undefined) =>
    Effect.callback<A, EngineError>((resume, signal) => {
      const fail = (reason: EngineErrorReason, message: string, failure?: TaskFailure) =>
        resume(Effect.fail(new EngineError({ reason, kind, message, ...(failure ? { failure } : {}) })))
      const stream = onPiece === undefined ? undefined : ++lastStreamId
      const cancel = onPiece === undefined ? undefined : new Int32Array(new SharedArrayBuffer(4))
      let outcome: TaskOutcome | undefined
      let ended = onPiece === undefined
      const forgetStream = () => {
        if (stream !== undefined) streams.delete(stream)
      }
      const finish = () => {
        if (outcome === undefined || !ended || signal.aborted) return
        forgetStream()
        if (outcome.ok) resume(Effect.succeed(outcome.value as A))
        else fail("TaskFailed", outcome.error.message, outcome.error)
      }
      if (stream !== undefined) {
        streams.set(stream, (message) => {
          if ("end" in message) {
            ended = true
            finish()
          } else if (!signal.aborted) onPiece!(message.piece)
        })
      }

      const task: Waiting = {
        start: () => {
          running++
          const given = runOptions?.spares === true && spares.length > 0 ? takeSpares() : []
          const base: TaskRequest = stream === undefined ? { kind, input } : { kind, input, stream, cancel: cancel! }
          const request: TaskRequest = given.length > 0 ? { ...base, spares: given } : base
          const transferList = given.length > 0 ? [...(runOptions?.transfer ?? []), ...given] : runOptions?.transfer ?? []
          // No AbortSignal for piscina: aborting a running task makes it terminate the thread,
          // and a thread terminated inside native inference (onnxruntime's session.run) aborts
          // the whole process (`terminate called after throwing an instance of 'Napi::Error'`).
          // An interrupted caller leaves instead; a streaming task sees the cancel flag and
          // stops at its next piece, any other task finishes and its result is dropped.
          piscina.run(request, transferList.length > 0 ? { transferList: transferList as Array<ArrayBuffer> } : {}).then(
            (result) => {
              settled(true)
              outcome = result
              finish()
            },
            (error: Error) => {
              settled(false)
              forgetStream()
              if (signal.aborted) return
              if (error.name === "DataCloneError") {
                // The input could not be posted: the caller's bug, not the thread's.
                fail("TaskFailed", error.message, { name: error.name, reason: "InputNotCloneable", message: error.message })
              } else if (closed) fail("Closed", "worker pool closed")
              else fail("WorkerCrashed", `worker thread failed: ${error.message}`)
            }
          )
        },
        close: () => {
          forgetStream()
          fail("Closed", "worker pool closed")
        }
      }

      if (closed) {
        forgetStream()
        return fail("Closed", "worker pool closed")
      }
      if (lanes.size === 0 && running < options.workers) task.start()
      else if (lanes.size >= options.maxQueue) {
        forgetStream()
        return fail("QueueFull", `worker pool queue is full (${options.maxQueue} tasks waiting)`)
      } else lanes.push(runOptions?.priority ?? "batch", task)
      // On interruption (`signal` has aborted): a waiting task just leaves its lane; a running
      // one keeps its thread until it ends or, streaming, notices the flag at its next piece.
      return Effect.sync(() => {
        lanes.remove(task)
        if (cancel !== undefined) Atomics.store(cancel, 0, 1)
        forgetStream()
      })
    })

  // Plain functions, not `Effect.fn`: every sentence of every session passes here, and a span
  // per task (nothing exports spans) was pure cost on the way to the first audio.
  const run = <A>(kind: string, input: unknown, runOptions?: RunOptions): Effect.Effect<A, EngineError> =>
    dispatch<A>(kind, input, runOptions, undefined)

  const stream = <A>(kind: string, input: unknown, onPiece: (piece: unknown) => void, runOptions?: RunOptions): Effect.Effect<A, EngineError> =>
    dispatch<A>(kind, input, runOptions, onPiece)

  const ping = run<Pong>("pool.ping", null, { priority: "realtime" })

  // A task module that cannot load (bad deploy, syntax error) must stop start-up: once a thread
  // fails while starting, piscina stops replacing threads, and later tasks would wait forever.
  // The first task goes to a thread piscina already counts as ready, so this fails, not hangs.
  const pong = yield* ping
  // A refused setpriority (a seccomp profile) leaves the threads at the main thread's priority.
  const wantedNice = Math.min(19, getPriority() + (options.nice ?? 0))
  if (pong.nice !== undefined && pong.nice !== wantedNice) {
    yield* Effect.logWarning("WORKER_NICE was not applied: the worker threads compete with the main thread (setpriority refused?)", { nice: pong.nice, wanted: wantedNice })
  }

  const ready = Effect.suspend((): Effect.Effect<void, EngineError> => {
    const fail = (reason: EngineErrorReason, message: string) => Effect.fail(new EngineError({ reason, kind: "pool.ready", message }))
    if (closed) return fail("Closed", "worker pool closed")
    if (piscina.threads.length === 0) return fail("WorkerCrashed", "no worker thread is alive")
    if (running === 0 && lanes.size === 0) return Effect.asVoid(ping)
    const idleMs = performance.now() - lastProgress
    return idleMs <= STALL_MS ? Effect.void : fail("WorkerCrashed", `busy, but no task has finished for ${Math.round(idleMs / 1000)} s`)
  })

  const service: WorkerPoolService = {
    run,
    stream,
    openSession: sessions.open,
    ping,
    ready,
    recycle,
    stats: () => ({
      threads: piscina.threads.length,
      // piscina holds a task only briefly, while a replacement thread starts.
      queueSize: lanes.size + piscina.queueSize,
      running,
      completed,
      sessions: sessions.count()
    })
  }
  return service
})
