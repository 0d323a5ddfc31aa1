/**
 * The process-wide lock around native espeak-ng work that is not thread-safe (EspeakNative.ts):
 * one word in a SharedArrayBuffer holding the Linux thread id of its owner (0: free).
 * WorkerPool passes the main thread's buffer (`espeakLockBuffer`) to every worker as
 * `workerData.espeakLock`; a thread without one (a test or bench in the main thread) uses this
 * module's, which is the buffer the main thread passes on. Kept apart from the engines so the
 * main thread can hand it over without loading them.
 *
 * Hazard: a worker thread can end while it holds the lock (an engine bug, an exit inside the
 * synthesis callback; V8 runs no `finally` when it terminates a thread), and every other thread
 * would then wait for ever. So a waiter looks every OWNER_CHECK_MS at whether the owner's
 * thread still exists (/proc/self/task/<tid>) and takes the lock over from a dead one. What the
 * dead thread was doing touched only its own library copy.
 */
import { existsSync, readlinkSync } from "node:fs"
import { workerData } from "node:worker_threads"

/** The main thread's lock word; WorkerPool hands it to workers. */
export const espeakLockBuffer = new SharedArrayBuffer(4)

/** How often a waiter checks that the lock's owner is still alive, ms. */
const OWNER_CHECK_MS = 200

let word: Int32Array | undefined
let self: number | undefined

/** This thread's Linux thread id ("/proc/thread-self" links to "<pid>/task/<tid>"). */
const threadSelf = (): number => (self ??= Number(readlinkSync("/proc/thread-self").split("/").pop()))

/** Runs `f` while holding the lock; blocks the thread while another holds it. Not reentrant. */
export const espeakLocked = <A>(f: () => A): A => {
  if (word === undefined) {
    const passed = (workerData as { espeakLock?: unknown } | null)?.espeakLock
    word = new Int32Array(passed instanceof SharedArrayBuffer ? passed : espeakLockBuffer)
  }
  const me = threadSelf()
  for (;;) {
    const owner = Atomics.compareExchange(word, 0, 0, me)
    if (owner === 0) break
    if (owner === me) throw new Error("espeakLocked is not reentrant")
    if (Atomics.wait(word, 0, owner, OWNER_CHECK_MS) === "timed-out" && !existsSync(`/proc/self/task/${owner}`)) {
      Atomics.compareExchange(word, 0, owner, 0)
    }
  }
  try {
    return f()
  } finally {
    Atomics.store(word, 0, 0)
    Atomics.notify(word, 0, 1)
  }
}
