/**
 * The contract between the inference pool and engine code running on its worker threads.
 *
 * An engine module exports its handlers with `defineTasks({ "tts.synthesize": ... })`;
 * `engines/worker.ts` merges every module's tasks into the registry that `serveTasks` dispatches
 * on. The pool side (`runtime/WorkerPool.ts`) only sees `TaskRequest` and `TaskReply`.
 *
 * Everything here runs on a worker thread and imports neither piscina nor Effect runtime state:
 * engines stay independent of the pool that runs them.
 */
import { readlinkSync } from "node:fs"
import { getPriority } from "node:os"
import { parentPort, threadId } from "node:worker_threads"
import { trimNativeHeap } from "./NativeHeap.ts"
import { addSpares } from "./SpareBuffers.ts"

/** What a handler may know about where it runs. */
export interface TaskContext {
  readonly kind: string
  /** Worker thread id; module-level state (loaded models) belongs to this thread. */
  readonly threadId: number
  /**
   * Set when the caller streams (`Inference.stream`): hands one piece of the result to the main
   * thread now, moving the listed buffers. A handler that streams still returns its summary,
   * which reaches the caller after every emitted piece.
   */
  readonly emit?: ((piece: unknown, transfer?: ReadonlyArray<ArrayBuffer>) => void) | undefined
  /**
   * True once the caller has gone (disconnect, cancel). Long handlers check it between blocks of
   * work and stop early; what they return then is dropped.
   */
  readonly cancelled: () => boolean
}

export type TaskHandler<I = any, O = any> = (input: I, ctx: TaskContext) => O | Promise<O>

export type TaskRegistry = { readonly [kind: string]: TaskHandler }

/** Keeps the handlers' own types so callers can name them with `TaskInput` / `TaskOutput`. */
export const defineTasks = <const T extends TaskRegistry>(tasks: T): T => tasks

export type TaskInput<R extends TaskRegistry, K extends keyof R> = Parameters<R[K]>[0]
/** The value `WorkerPool.run` succeeds with: a `Transfer` arrives as its `value`. */
export type TaskOutput<R extends TaskRegistry, K extends keyof R> = Unwrapped<Awaited<ReturnType<R[K]>>>
/** Distributes over a union, so a handler that returns `Transfer<A> | A` yields `A`. */
type Unwrapped<T> = T extends Transfer<infer A> ? A : T

/**
 * A result whose buffers move to the main thread instead of being copied (for audio: a 10 min
 * 22050 Hz Float32 track is 53 MB). After the handler returns, the listed buffers are detached
 * on the worker side. Hazards: list each buffer once; never list the buffer of a pooled Node
 * `Buffer` (`Buffer.from`, small `allocUnsafe`), it is shared and untransferable; a typed
 * array that views part of a larger buffer moves the whole buffer.
 */
export class Transfer<A> {
  constructor(readonly value: A, readonly buffers: ReadonlyArray<ArrayBuffer>) {}
}

export const transfer = <A>(value: A, buffers: ReadonlyArray<ArrayBuffer>): Transfer<A> => new Transfer(value, buffers)

/**
 * Failure with a reason, thrown by handlers. Any thrown object with a string `reason` (such as an
 * Effect tagged error) is reported the same way; its `_tag`, else `name`, becomes the name.
 */
export class TaskError extends Error {
  override readonly name: string
  constructor(readonly reason: string, message: string, name = "TaskError") {
    super(message)
    this.name = name
  }
}

/**
 * A worker-side error as a plain object. Structured clone keeps only an Error's name (for
 * built-in names), message and stack, so the reason would be lost; the stack stays on the worker
 * and must never reach a client.
 */
export interface TaskFailure {
  readonly name: string
  readonly reason?: string
  readonly message: string
}

/** Message posted to a worker. */
export interface TaskRequest {
  readonly kind: string
  readonly input: unknown
  /**
   * Streaming tasks only: the stream's id. Emitted pieces go to the main thread on the worker's
   * own port (`parentPort`, which piscina hands on as its 'message' event) as `{ stream, piece }`,
   * then one `{ stream, end: true }` once the handler has finished (the caller waits for it, so
   * that no piece can arrive after the result, which travels on piscina's own port). One port
   * for the life of the thread rather than a MessageChannel made and transferred per task:
   * 10-30 µs of CPU per task saved (measured in isolation), and nothing to close.
   */
  readonly stream?: number
  /** Streaming tasks only: an Int32Array over shared memory; element 0 becomes 1 on cancel. */
  readonly cancel?: Int32Array
  /** Output buffers the main thread is done with, moved here for reuse (engines/SpareBuffers.ts). */
  readonly spares?: ReadonlyArray<ArrayBuffer>
}

/** What a streaming task posts on the worker's port. */
export type StreamMessage = { readonly stream: number; readonly piece: unknown } | { readonly stream: number; readonly end: true }

export const isStreamMessage = (message: unknown): message is StreamMessage =>
  typeof message === "object" && message !== null && typeof (message as { stream?: unknown }).stream === "number"

export type TaskOutcome =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly error: TaskFailure }

/** What `serveTasks` hands to the worker bootstrap, which turns `transfer` into a piscina move. */
export interface TaskReply {
  readonly outcome: TaskOutcome
  readonly transfer: ReadonlyArray<ArrayBuffer>
}

export const toTaskFailure = (error: unknown): TaskFailure => {
  if (typeof error !== "object" || error === null) return { name: "Error", message: String(error) }
  const e = error as { _tag?: unknown; name?: unknown; reason?: unknown; message?: unknown }
  const name = typeof e._tag === "string" ? e._tag : typeof e.name === "string" ? e.name : "Error"
  const message = typeof e.message === "string" ? e.message : String(error)
  return typeof e.reason === "string" ? { name, reason: e.reason, message } : { name, message }
}

// piscina's public symbols are registered (`Symbol.for`), so a handler that returned
// `Piscina.move(x)` itself can be unwrapped here without importing piscina. Wrapping such a
// value in the outcome instead would clone it into an empty object.
const piscinaTransferable = Symbol.for("Piscina.transferable")
const piscinaValue = Symbol.for("Piscina.valueOf")

const toReply = (result: unknown): TaskReply => {
  if (result instanceof Transfer) return { outcome: { ok: true, value: result.value }, transfer: result.buffers }
  if (typeof result === "object" && result !== null && piscinaTransferable in result && piscinaValue in result) {
    const r = result as { [piscinaTransferable]: unknown; [piscinaValue]: unknown }
    return { outcome: { ok: true, value: r[piscinaValue] }, transfer: [r[piscinaTransferable]].flat() as Array<ArrayBuffer> }
  }
  return { outcome: { ok: true, value: result }, transfer: [] }
}

/**
 * The worker's task function for a registry. Handler errors become `{ ok: false }` outcomes
 * rather than rejections, so they reach the pool as values and never look like a crashed worker.
 */
export const serveTasks = (registry: TaskRegistry) => async (request: TaskRequest): Promise<TaskReply> => {
  const { stream, cancel } = request
  const port = stream === undefined ? undefined : parentPort!
  const handler = Object.hasOwn(registry, request.kind) ? registry[request.kind] : undefined
  if (handler === undefined) {
    // A stream always gets its end marker, a failed one too: the pool waits for it (and for the
    // pieces before it, which travel on this port, not piscina's) before resuming the caller.
    port?.postMessage({ stream: stream!, end: true } satisfies StreamMessage)
    return {
      outcome: { ok: false, error: { name: "TaskError", reason: "UnknownKind", message: `no task kind "${request.kind}" in this worker` } },
      transfer: []
    }
  }
  if (request.spares !== undefined) addSpares(request.spares)
  const ctx: TaskContext = {
    kind: request.kind,
    threadId,
    emit: port === undefined ? undefined : (piece, transfer) => port.postMessage({ stream: stream!, piece } satisfies StreamMessage, transfer ?? []),
    cancelled: cancel === undefined ? () => false : () => Atomics.load(cancel, 0) !== 0
  }
  try {
    return toReply(await handler(request.input, ctx))
  } catch (error) {
    return { outcome: { ok: false, error: toTaskFailure(error) }, transfer: [] }
  } finally {
    port?.postMessage({ stream: stream!, end: true } satisfies StreamMessage)
  }
}

/**
 * Loads a heavy resource (model, WASM instance) the first time a task needs it and keeps it for
 * the life of the thread: module state in a worker module is per thread, so each worker pays the
 * load once (PocketSphinx ≈ 0.7 s) and never per request. A failed load is forgotten so that the
 * next task retries. Hazard: a thread terminated to abort a running task takes its models with
 * it, and its replacement loads them again on first use.
 */
export const perThread = <A>(load: () => A | Promise<A>): (() => Promise<A>) => {
  let loaded: Promise<A> | undefined
  return () => {
    if (loaded === undefined) {
      loaded = Promise.resolve().then(load)
      loaded.catch(() => {
        loaded = undefined
      })
    }
    return loaded
  }
}

/**
 * A per-thread resource worth giving back when unused (speech-to-text models: a PocketSphinx
 * decoder is ~90 MB of native memory, Silero VAD ~20 MB, per thread that ran one). `use(idleMs,
 * f)` loads it on demand (as `perThread`) and holds it while `f` runs; once nothing has used it
 * for `idleMs`, `release` runs and the next use loads it again (PocketSphinx ≈ 0.6 s, Silero
 * ≈ 0.1 s). `idleMs` undefined or Infinity keeps it for the life of the thread.
 *
 * Hazard: the release is a timer, so it needs a worker whose event loop runs between tasks
 * (piscina `atomics: "async"`, runtime/WorkerPool.ts); a thread blocked in Atomics.wait would
 * release only when its next task comes.
 */
export const perThreadWhileUsed = <A>(load: () => A | Promise<A>, release: (resource: A) => void | Promise<void>) => {
  let loaded: Promise<A> | undefined
  let users = 0
  let timer: ReturnType<typeof setTimeout> | undefined
  const releaseIdle = (held: Promise<A>) => {
    timer = undefined
    if (users !== 0 || loaded !== held) return
    loaded = undefined
    held.then(release).then(trimNativeHeap, () => {})
  }
  return async <T>(idleMs: number | undefined, f: (resource: A) => T | Promise<T>): Promise<T> => {
    clearTimeout(timer)
    timer = undefined
    users++
    try {
      if (loaded === undefined) {
        const loading = Promise.resolve().then(load)
        loaded = loading
        loading.catch(() => {
          if (loaded === loading) loaded = undefined
        })
      }
      return await f(await loaded)
    } finally {
      users--
      const held = loaded
      if (users === 0 && held !== undefined && idleMs !== undefined && Number.isFinite(idleMs)) {
        timer = setTimeout(() => releaseIdle(held), Math.max(0, idleMs))
        timer.unref()
      }
    }
  }
}

/**
 * This thread's nice value, where the kernel keeps one per thread (Linux, named by
 * /proc/thread-self); undefined elsewhere.
 */
const threadNice = (): number | undefined => {
  try {
    return getPriority(Number(readlinkSync("/proc/thread-self").split("/").pop()))
  } catch {
    return undefined
  }
}

/** Built into every worker: readiness probes round-trip through a real thread. */
export const poolTasks = defineTasks({
  "pool.ping": (_input: unknown, ctx: TaskContext): Pong => ({ pid: process.pid, threadId: ctx.threadId, nice: threadNice() })
})

export interface Pong {
  readonly pid: number
  readonly threadId: number
  /** The thread's nice value (WORKER_NICE); undefined where threads have none of their own. */
  readonly nice: number | undefined
}
