/**
 * Child processes that do engine work for the main thread (ffmpeg decoding uploads, the Apertium
 * pipeline) run as many nice steps below it as the worker threads do (WORKER_NICE, set once at
 * start-up). A child inherits the nice of the thread that starts it, and these are started by the
 * main thread: at nice 0 two decodes would outweigh the two synthesizing workers ten to one.
 * Children started inside a worker (Flite) already have the worker's nice.
 */
import type { ChildProcess } from "node:child_process"
import { getPriority, setPriority } from "node:os"

let steps = 0

/** WORKER_NICE; 0 (the default, and what tests see) leaves children at the main thread's priority. */
export const setChildNice = (n: number): void => {
  steps = n
}

/**
 * Lowers a single-process child just started. It runs a few microseconds at the main thread's
 * priority first; threads it starts later inherit the new value. A child already gone is ignored.
 */
export const lowerChild = (child: ChildProcess): void => {
  if (steps === 0 || child.pid === undefined) return
  try {
    setPriority(child.pid, Math.min(19, getPriority(child.pid) + steps))
  } catch {
    // exited already, or not permitted: it runs at the main thread's priority
  }
}

/**
 * `command args` run through `nice -n steps` (coreutils/busybox), for a child that starts others at
 * once (a shell pipeline), which would race a `lowerChild` after the start. Not on Windows.
 */
export const nicedCommand = (command: string, args: ReadonlyArray<string>): readonly [string, ReadonlyArray<string>] =>
  steps > 0 && process.platform !== "win32" ? ["nice", ["-n", String(steps), command, ...args]] : [command, args]
