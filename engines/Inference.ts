/**
 * The inference contract as the main thread sees it: the `Inference` service runs one task of
 * the worker registry (`engines/worker.ts`) on a thread of the pool. `run` is typed by that
 * registry, so a misspelled kind, a wrong input or a wrong result type fails to compile.
 *
 * `runtime/WorkerPool.ts` provides this tag over piscina. Engine services (`Tts`, `Recognizer`,
 * `SpeakerEmbedding`, `CloneAnalysis`) are built on it; actors use those, never the pool.
 * Nothing here is loaded by a worker thread: task modules import `engines/tasks.ts` only.
 */
import { Context, Data, type Effect, type Scope } from "effect"
import type { SessionInit } from "./sessions.ts"
import type { Pong, TaskFailure, TaskInput, TaskOutput } from "./tasks.ts"
import type { Sessions, Tasks } from "./worker.ts"

/** Every task kind the workers serve. */
export type TaskKind = keyof Tasks & string
export type InputOf<K extends TaskKind> = TaskInput<Tasks, K>
export type OutputOf<K extends TaskKind> = TaskOutput<Tasks, K>
/** Every session kind the workers host (`engines/sessions.ts`). */
export type SessionKind = keyof Sessions & string
export type SessionInitOf<K extends SessionKind> = SessionInit<Sessions, K>

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
 * died under the task or session (uncaught error, exit, out of memory). `SessionsFull`: every
 * thread already hosts its bound of sessions (retryable). `Closed`: the pool is shutting down.
 */
export type EngineErrorReason = "QueueFull" | "TaskFailed" | "WorkerCrashed" | "SessionsFull" | "Closed"

export class EngineError extends Data.TaggedError("EngineError")<{
  readonly reason: EngineErrorReason
  readonly kind: string
  readonly message: string
  readonly failure?: TaskFailure
}> {
  /** Worth trying again later: the pool was busy, or a thread died (a new one replaces it). */
  get isRetryable(): boolean {
    return this.reason === "QueueFull" || this.reason === "WorkerCrashed" || this.reason === "SessionsFull"
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
  /** Sessions open (or opening) on the threads now. */
  readonly sessions: number
}

/**
 * SESSION AFFINITY. A realtime recognition keeps decoder state for its whole life, so it cannot
 * be a series of pool tasks that land on any thread. `openSession(kind, init, onEvent)` places one
 * long-lived session on one worker thread and talks to it over a MessagePort of its own:
 *
 *  - Placement: the thread that hosts the fewest sessions, bounded by `sessionsPerWorker`
 *    (STT_SESSIONS_PER_WORKER); when every thread is at the bound the open fails at once with
 *    EngineError `SessionsFull` (retryable; the caller answers "busy", it never queues).
 *  - Not a task: a session does NOT hold a piscina slot. Its messages are handled on the
 *    worker's event loop between tasks (the pool's `atomics: "async"` keeps that loop running
 *    while the thread waits for work). A task that held the thread for the session's life would
 *    take one of the 2 cores away from every other caller, TTS's realtime lane included, for
 *    minutes; this way a session costs the thread only the CPU of the blocks it is sent.
 *    Hazards of that choice: (1) piscina does not see session work, so a task may be handed to
 *    a thread that is busy with a session message and start up to one message's work later
 *    (a 100-200 ms block of audio: ~10-30 ms of PocketSphinx); (2) the other way round, a
 *    session's messages wait while its thread runs a task, so a long batch task (a 20 s segment
 *    of a synchronous transcription: seconds) delays that thread's partials by as much;
 *    (3) the pool's `idleTimeoutMs` (unused in production) may end a thread that piscina
 *    believes idle while it hosts sessions: they then fail as a crash would.
 *  - Order: `send`s and `call`s of one session reach the worker's handler one at a time, in the
 *    order made; events and replies come back in the order the handler made them.
 *  - Failure: a thread that dies fails only the sessions it hosted: their `done` fails with
 *    `WorkerCrashed` (its port closes), pending `call`s fail alike, later sends fail at once;
 *    the actor maps this to `transcriber_error`. A handler that throws on a `call` fails that
 *    call (`TaskFailed`), the session lives on; one that throws on a `send` ends the session
 *    with `TaskFailed` (no one else to tell).
 *  - End: closing the scope (or `close`) asks the handler to free what it holds and waits until
 *    it has; interrupting the opener during the open closes the half-open session alike.
 */
export interface SessionHandle {
  /** The hosting worker thread. */
  readonly threadId: number
  /** A message for the handler; nothing comes back (events may). Fails once the session is over. */
  readonly send: (message: unknown, transfer?: ReadonlyArray<ArrayBuffer>) => Effect.Effect<void, EngineError>
  /** A message whose handler's return value is the answer. The reply type is the handler's own. */
  readonly call: <A>(message: unknown, transfer?: ReadonlyArray<ArrayBuffer>) => Effect.Effect<A, EngineError>
  /** Succeeds when the session is closed, fails when it ended any other way (crash, a failed send). */
  readonly done: Effect.Effect<void, EngineError>
  /** Ends the session and waits until its handler has let go (idempotent). */
  readonly close: Effect.Effect<void>
}

export interface SessionOptions {
  /** Buffers inside `init` to move, not copy. */
  readonly transfer?: ReadonlyArray<ArrayBuffer>
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
  /**
   * Opens a long-lived session on one worker (see SessionHandle for the contract). `onEvent` is
   * called on the main thread outside any fiber, in order (keep it to a queue offer). The
   * session ends with the scope.
   */
  readonly openSession: <K extends SessionKind>(
    kind: K,
    init: SessionInitOf<K>,
    onEvent: (event: unknown) => void,
    options?: SessionOptions
  ) => Effect.Effect<SessionHandle, EngineError, Scope.Scope>
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
