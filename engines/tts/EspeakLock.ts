/**
 * The process-wide lock around native espeak-ng work that is not thread-safe (EspeakNative.ts):
 * one word in a SharedArrayBuffer. WorkerPool passes the main thread's buffer
 * (`espeakLockBuffer`) to every worker as `workerData.espeakLock`; a thread without one (a test
 * or bench in the main thread) uses this module's, which is the buffer the main thread passes
 * on. Kept apart from the engines so the main thread can hand it over without loading them.
 */
import { workerData } from "node:worker_threads"

/** The main thread's lock word; WorkerPool hands it to workers. */
export const espeakLockBuffer = new SharedArrayBuffer(4)

let word: Int32Array | undefined

/** Runs `f` while holding the lock; blocks the thread while another holds it. Not reentrant. */
export const espeakLocked = <A>(f: () => A): A => {
  if (word === undefined) {
    const passed = (workerData as { espeakLock?: unknown } | null)?.espeakLock
    word = new Int32Array(passed instanceof SharedArrayBuffer ? passed : espeakLockBuffer)
  }
  while (Atomics.compareExchange(word, 0, 0, 1) !== 0) Atomics.wait(word, 0, 1)
  try {
    return f()
  } finally {
    Atomics.store(word, 0, 0)
    Atomics.notify(word, 0, 1)
  }
}
