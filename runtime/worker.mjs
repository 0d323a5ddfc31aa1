/**
 * Piscina worker bootstrap. piscina's worker imports `filename` with a plain `import()`, which
 * cannot load TypeScript, so every pool points piscina here and names its real task module in
 * `workerData.taskModule` (a file URL; `engines/worker.ts` in production, a fixture in tests).
 *
 * The tsx loader is registered in the worker itself: a worker inherits `process.execArgv`, so
 * under `tsx` or tap it may already have a TypeScript loader, but under plain `node` it has none,
 * and registering again alongside an inherited one is harmless.
 */
import { getPriority, setPriority } from "node:os"
import { workerData } from "node:worker_threads"
import { move, transferableSymbol, valueSymbol } from "piscina"

const { taskModule, nice } = workerData

/**
 * WORKER_NICE: this thread runs `nice` steps below the thread that started it (the main thread),
 * before it takes any task. Linux only: there setpriority(2) with pid 0 changes the calling thread
 * alone; elsewhere it would lower the whole process, the main thread with it. Not piscina's
 * niceIncrement: that calls nice(2) outside its error handling, so a refusal (a seccomp profile)
 * would end the thread before it is ready, and piscina stops replacing threads after one fails so.
 * Refused here, the thread keeps the main thread's priority and the pool logs it at start-up.
 */
if (process.platform === "linux" && Number.isInteger(nice) && nice > 0) {
  try {
    setPriority(0, Math.min(19, getPriority(0) + nice))
  } catch {
    // see above: reported through pool.ping
  }
}
if (/\.[cm]?tsx?$/.test(new URL(taskModule).pathname)) {
  const { register } = await import("tsx/esm/api")
  register()
}
const { default: serve, hostSessions } = await import(taskModule)
// Long-lived sessions (engines/sessions.ts): announced before piscina marks this thread ready.
if (typeof hostSessions === "function") hostSessions()

/**
 * Returns the outcome; buffers listed by the handler are moved. piscina looks for a movable only
 * on the top-level return value (a `move()` nested inside an object is cloned into `{}`), so the
 * whole outcome is wrapped in one movable whose transfer list is the handler's buffers.
 */
export default async function runTask(request) {
  const { outcome, transfer } = await serve(request)
  if (transfer.length === 0) return outcome
  const buffers = [...new Set(transfer)]
  return move({
    get [transferableSymbol]() {
      return buffers
    },
    get [valueSymbol]() {
      return outcome
    }
  })
}
