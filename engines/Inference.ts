/**
 * The inference contract as the main thread sees it: the `Inference` service runs one task of
 * the worker registry (`engines/worker.ts`) on a thread of the pool. `run` is typed by that
 * registry, so a misspelled kind, a wrong input or a wrong result type fails to compile.
 *
 * `runtime/WorkerPool.ts` provides this tag over piscina. Engine services (`Tts`, `Recognizer`,
 * `SpeakerEmbedding`, `CloneAnalysis`) are built on it; actors use those, never the pool.
 * Nothing here is loaded by a worker thread: task modules import `engines/tasks.ts` only.
 */
import { Context, Data, type Effect } from "effect"
import type { Pong, TaskFailure, TaskInput, TaskOutput } from "./tasks.ts"
import type { Tasks } from "./worker.ts"

/** Every task kind the workers serve. */
export type TaskKind = keyof Tasks & string
export type InputOf<K extends TaskKind> = TaskInput<Tasks, K>
export type OutputOf<K extends TaskKind> = TaskOutput<Tasks, K>

/**
 * Realtime tasks (live sessions, streamed segments) leave the queue before any batch task
 * (synchronous requests), and batch before background (queued recognition jobs), so a long
 * job never delays a caller who is waiting on the line.
 */
export type Priority = "realtime" | "batch" | "background"

export interface RunOptions {
  /** Default batch. */
  readonly priority?: Priority
  /**
   * Buffers inside `input` to move to the worker instead of copying. Ownership passes at the
   * call: they are detached once the task is dispatched, which may be later if it waits.
   */
  readonly transfer?: ReadonlyArray<ArrayBuffer>
  /**
   * The task writes its audio output through engines/SpareBuffers.ts: buffers given to `recycle`
   * go to its thread with it.
   */
  readonly spares?: boolean
}

/**
 * `QueueFull`: too many tasks already wait (HTTP 503, retryable). `TaskFailed`: the engine threw;
 * `failure` carries its name, reason and message, never a stack. `WorkerCrashed`: the thread
 * died under the task (uncaught error, exit, out of memory). `Closed`: the pool is shutting down.
 */
export type EngineErrorReason = "QueueFull" | "TaskFailed" | "WorkerCrashed" | "Closed"

export class EngineError extends Data.TaggedError("EngineError")<{
  readonly reason: EngineErrorReason
  readonly kind: string
  readonly message: string
  readonly failure?: TaskFailure
}> {
  /** Worth trying again later: the pool was busy, or a thread died (a new one replaces it). */
  get isRetryable(): boolean {
    return this.reason === "QueueFull" || this.reason === "WorkerCrashed"
  }
}

export interface PoolStats {
  /** Live worker threads. */
  readonly threads: number
  /** Tasks waiting for a thread. */
  readonly queueSize: number
  /** Tasks on a thread now. */
  readonly running: number
  /** Tasks that ran to an outcome (success or TaskFailed) since start. */
  readonly completed: number
}

export class Inference extends Context.Service<Inference, {
  /**
   * Runs a task on a worker thread. Interrupting the calling fiber cancels it: a waiting task
   * is dropped at once; a running one is left to finish and its result dropped (the caller
   * returns at once, the thread stays busy until then).
   */
  readonly run: <K extends TaskKind>(kind: K, input: InputOf<K>, options?: RunOptions) => Effect.Effect<OutputOf<K>, EngineError>
  /**
   * Runs a task that hands pieces of its result over as it makes them (`TaskContext.emit`):
   * `onPiece` is called on the main thread, in order, outside any fiber (keep it to a queue
   * offer); the effect succeeds with the handler's summary after the last piece. Interrupting
   * the caller also tells the running handler (`TaskContext.cancelled`), which stops at its next
   * piece and frees the thread. The piece type is the handler's own; callers name it.
   */
  readonly stream: <K extends TaskKind>(
    kind: K,
    input: InputOf<K>,
    onPiece: (piece: unknown) => void,
    options?: RunOptions
  ) => Effect.Effect<OutputOf<K>, EngineError>
  /** Round trip through a worker thread; put a timeout on it. */
  readonly ping: Effect.Effect<Pong, EngineError>
  /** Readiness ("can serve"), not load: a busy pool is ready while it makes progress. */
  readonly ready: Effect.Effect<void, EngineError>
  readonly stats: () => PoolStats
  /**
   * Gives back the buffer of a task's output once nothing reads it any more (its bytes are on
   * the socket): it goes to a worker with a later `spares` task and is detached here
   * (engines/SpareBuffers.ts says why). Hazard: every view of it reads as empty from then on.
   * Buffers outside SpareBuffers' sizes, shared ones and those beyond the pool's cap are ignored.
   */
  readonly recycle: (buffer: ArrayBufferLike) => void
}>()("speech/engines/Inference") {}
