/**
 * One long-lived Apertium pipeline for one pair, fed request after request in null-flush mode
 * (ApertiumModes.ts): a request is the escaped text followed by `\0`, the answer is everything up
 * to the next `\0` on stdout. Starting a pipeline costs 0.2-0.4 s of CPU on a quiet machine (a
 * dozen programs load their transducers) and many seconds on a loaded one; a warm chunk about
 * 1 ms, hence one process kept per pair.
 *
 * Start-up is its own phase, never a request's: `start()` spawns the pipeline and sends it a
 * warm-up request, under `startTimeoutMs`; it is ready when the answer comes back. A request that
 * finds its pair not ready is refused at once with `Starting` (the route answers 503 with
 * Retry-After) and, when nothing is starting it, starts it; a pair whose last start failed
 * answers that failure and starts again. A ready pipeline that exits or overruns a request's
 * `timeoutMs` is killed (the whole process group: bash and every program in it) and restarted in
 * the background at once; requests queued behind it wait for the restart, which counts against
 * none of them. Plain Node, no Effect: ApertiumTranslator.ts wraps it.
 *
 * Requests run one at a time in arrival order from a bounded queue. An aborted request that is
 * still queued is dropped; one already written is left to finish (about a millisecond) and its
 * answer thrown away.
 *
 * Hazard: Apertium's stream format gives meaning to `\ [ ] ^ $ @ * / < > { } #` and to `\0`;
 * input is escaped and control characters are removed before it is written (`encodeRequest`).
 */
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process"
import { nicedCommand } from "../ChildNice.ts"

export class ApertiumProcessError extends Error {
  constructor(
    /** `Unavailable`: the programs are missing. `Busy`: the queue is full. `Starting`: not ready yet. */
    readonly reason: "Unavailable" | "Failed" | "TimedOut" | "Busy" | "Aborted" | "Starting",
    message: string
  ) {
    super(message)
  }
}

export interface ApertiumProcessOptions {
  /** The null-flush pipeline to run under `bash -c` (ApertiumModes.nullFlushPipeline). */
  readonly pipeline: () => Promise<string>
  /** Longest one request may take once written, ms. */
  readonly timeoutMs: number
  /** Longest a start may take, from spawn to the warm-up's answer, ms (default 120 s: a loaded machine). */
  readonly startTimeoutMs?: number
  /** Most requests waiting behind the running one. */
  readonly maxQueue: number
  /** Told every change of state, with the error that caused it (a death, a failed start). */
  readonly onStateChange?: (state: ApertiumState, cause?: ApertiumProcessError) => void
}

/** Where a pipeline is: never started, starting, serving, or its last start failed. */
export type ApertiumState = "idle" | "starting" | "ready" | "failed"

/** The warm-up request: one word, so every program of the pipeline has read its transducers. */
const WARM_UP = "a"

interface Job {
  readonly input: string
  readonly resolve: (text: string) => void
  readonly reject: (error: ApertiumProcessError) => void
  settled: boolean
}

const RESERVED = /[\\[\]^$@*/<>{}#]/gu
// Controls other than tab and newline (C0, DEL, C1) mean nothing in text and \0 ends a request.
// eslint-disable-next-line no-control-regex
const CONTROLS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/gu
/**
 * `^` opens a lexical unit in Apertium's stream, and an escaped one near the end of a request
 * ("dog^", "a ^$") still makes a later stage of Apertium 3.8 wait for the rest of the unit,
 * wedging the pipeline until the timeout. So `^` never reaches Apertium: it travels as a private
 * use character that every stage passes through as text, and comes back as `^`.
 */
const CARET_STAND_IN = "\ue05e"

/** Text as one null-flush request: escaped, newline runs as a superblank, `[]\0` at the end. */
export const encodeRequest = (text: string): string =>
  text
    .replace(/\r\n?/gu, "\n")
    .replace(CONTROLS, "")
    .replaceAll(CARET_STAND_IN, "")
    .replaceAll("^", CARET_STAND_IN)
    .replace(RESERVED, (c) => `\\${c}`)
    .replace(/\n+/gu, (run) => `[${run}]`) + "[]\0"

/**
 * An answer as plain text: a superblank `[...]` becomes its content (the newlines we sent),
 * a word-bound blank `[[...]]` is dropped and `\x` becomes `x`. Apertium writes the caller's own
 * `*` and `#` back unescaped, so they are kept as text (with `-n` it adds no unknown-word marks).
 */
export const decodeAnswer = (raw: string): string => {
  let out = ""
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i]!
    if (c === "\\") {
      if (i + 1 < raw.length) out += raw[++i]
    } else if (c === "[" && raw[i + 1] === "[") {
      const end = raw.indexOf("]]", i + 2)
      i = end < 0 ? raw.length : end + 1
    } else if (c !== "[" && c !== "]") {
      out += c
    }
  }
  return out.replaceAll(CARET_STAND_IN, "^")
}

export class ApertiumProcess {
  readonly #options: ApertiumProcessOptions
  readonly #queue: Array<Job> = []
  #child: ChildProcessWithoutNullStreams | undefined
  #current: Job | undefined
  #timer: NodeJS.Timeout | undefined
  #stdout = ""
  #stderr = ""
  #state: ApertiumState = "idle"
  /** Why the last start failed (state `failed`). */
  #startError: ApertiumProcessError | undefined
  /** Callers of `start()` waiting for the running start. */
  #waiters: Array<{ readonly resolve: () => void; readonly reject: (e: ApertiumProcessError) => void }> = []
  #starts = 0
  #closed = false

  constructor(options: ApertiumProcessOptions) {
    this.#options = options
  }

  get state(): ApertiumState {
    return this.#state
  }

  /** Why the last start failed, while the state is `failed`. */
  get startError(): ApertiumProcessError | undefined {
    return this.#startError
  }

  /** Starts begun so far (the first and every restart), for the metrics and tests. */
  get starts(): number {
    return this.#starts
  }

  /** Whether a pipeline is ready now. */
  get running(): boolean {
    return this.#state === "ready"
  }

  /** The pipeline's process id, when one is spawned (for tests that kill it). */
  get pid(): number | undefined {
    return this.#child?.pid
  }

  /**
   * Starts the pipeline unless it is ready or starting; resolves when it is ready, rejects when
   * this start fails. Used by the warm-up at start-up and by tests; requests never wait on it.
   */
  start(): Promise<void> {
    if (this.#closed) return Promise.reject(new ApertiumProcessError("Failed", "the translator is shut down"))
    if (this.#state === "ready") return Promise.resolve()
    const ready = new Promise<void>((resolve, reject) => this.#waiters.push({ resolve, reject }))
    if (this.#state !== "starting") this.#begin()
    return ready
  }

  /**
   * Undefined when a request can be queued now; otherwise why not (`Starting`, or the failure of
   * the last start), having started the pipeline when nothing is starting it. Refused at once
   * rather than queued behind the start: a start can take longer than any request should wait,
   * and the client is told to come back (503 + Retry-After).
   */
  admit(): ApertiumProcessError | undefined {
    if (this.#closed) return new ApertiumProcessError("Failed", "the translator is shut down")
    if (this.#state === "ready") return undefined
    const failed = this.#state === "failed" ? this.#startError : undefined
    if (this.#state !== "starting") this.#begin()
    return failed ?? new ApertiumProcessError("Starting", "the translation engine for this pair is starting; retry in a moment")
  }

  translate(text: string, signal?: AbortSignal): Promise<string> {
    return new Promise((resolve, reject) => {
      if (this.#closed) return reject(new ApertiumProcessError("Failed", "the translator is shut down"))
      if (signal?.aborted === true) return reject(new ApertiumProcessError("Aborted", "aborted"))
      const refused = this.admit()
      if (refused !== undefined) return reject(refused)
      if (this.#queue.length >= this.#options.maxQueue) {
        return reject(new ApertiumProcessError("Busy", `more than ${this.#options.maxQueue} translations are waiting for this pair`))
      }
      const job: Job = {
        input: encodeRequest(text),
        settled: false,
        resolve: (t) => {
          signal?.removeEventListener("abort", onAbort)
          if (!job.settled) (job.settled = true), resolve(t)
        },
        reject: (e) => {
          signal?.removeEventListener("abort", onAbort)
          if (!job.settled) (job.settled = true), reject(e)
        }
      }
      const onAbort = () => {
        const at = this.#queue.indexOf(job)
        if (at >= 0) this.#queue.splice(at, 1)
        job.reject(new ApertiumProcessError("Aborted", "aborted"))
      }
      signal?.addEventListener("abort", onAbort, { once: true })
      this.#queue.push(job)
      this.#pump()
    })
  }

  /** Stops the pipeline and fails everything waiting. */
  close(): void {
    this.#closed = true
    this.#kill()
    const error = new ApertiumProcessError("Failed", "the translator is shut down")
    this.#current?.reject(error)
    this.#current = undefined
    for (const job of this.#queue.splice(0)) job.reject(error)
    for (const w of this.#waiters.splice(0)) w.reject(error)
  }

  #pump(): void {
    if (this.#current !== undefined || this.#state !== "ready" || this.#closed || this.#child === undefined) return
    // Aborted jobs left the queue already; settled ones can still be here only if rejected by close.
    while (this.#queue.length > 0 && this.#queue[0]!.settled) this.#queue.shift()
    if (this.#queue.length === 0) return
    const job = this.#queue.shift()!
    this.#write(job, this.#options.timeoutMs, () => new ApertiumProcessError("TimedOut", `no answer within ${this.#options.timeoutMs} ms`))
  }

  #write(job: Job, timeoutMs: number, timedOut: () => ApertiumProcessError): void {
    this.#current = job
    this.#timer = setTimeout(() => this.#fail(timedOut()), timeoutMs)
    this.#child!.stdin.write(job.input)
  }

  /** A start: read the mode, spawn, send the warm-up request; ready on its answer. */
  #begin(cause?: ApertiumProcessError): void {
    this.#startError = undefined
    this.#starts++
    this.#setState("starting", cause)
    const startTimeoutMs = this.#options.startTimeoutMs ?? 120_000
    this.#options.pipeline().then(
      (pipeline) => {
        if (this.#closed) return
        this.#spawn(pipeline)
        const warmUp: Job = {
          input: encodeRequest(WARM_UP),
          settled: false,
          resolve: () => {
            warmUp.settled = true
            this.#setState("ready")
            for (const w of this.#waiters.splice(0)) w.resolve()
          },
          reject: (e) => {
            warmUp.settled = true
            this.#startFailed(e)
          }
        }
        this.#write(warmUp, startTimeoutMs, () => new ApertiumProcessError("Failed", `the Apertium pipeline did not start within ${startTimeoutMs} ms`))
      },
      (error: NodeJS.ErrnoException) => {
        const missing = error.code === "ENOENT"
        this.#startFailed(new ApertiumProcessError(
          missing ? "Unavailable" : "Failed",
          missing ? "Apertium is not installed (apertium-wblank-mode not found)" : `cannot read the Apertium mode: ${error.message}`
        ))
      }
    )
  }

  /** Nothing can run without a pipeline: fail what waits; the next request starts again. */
  #startFailed(error: ApertiumProcessError): void {
    if (this.#closed) return
    this.#kill()
    this.#startError = error
    this.#setState("failed", error)
    for (const job of this.#queue.splice(0)) job.reject(error)
    for (const w of this.#waiters.splice(0)) w.reject(error)
  }

  #spawn(pipeline: string): void {
    // detached: the pipeline gets its own process group, so a kill reaches every program in it.
    // nice wraps bash (it execs it: the same pid, the same process group), so every program of the
    // pipeline starts below the main thread (engines/ChildNice.ts).
    const [command, args] = nicedCommand("bash", ["-c", pipeline, "apertium", "-n", ""])
    const child = spawn(command, args, { detached: true, stdio: ["pipe", "pipe", "pipe"] })
    this.#child = child
    this.#stdout = ""
    this.#stderr = ""
    child.stdout.setEncoding("utf8")
    child.stderr.setEncoding("utf8")
    child.stdout.on("data", (d: string) => {
      if (this.#child === child) this.#onStdout(d)
    })
    child.stderr.on("data", (d: string) => {
      if (this.#child === child) this.#stderr = (this.#stderr + d).slice(-2000)
    })
    // A write to a pipeline that just died raises EPIPE here; the exit handler reports it.
    child.stdin.on("error", () => {})
    child.on("error", (error) => {
      if (this.#child === child) this.#fail(new ApertiumProcessError("Failed", `the Apertium pipeline failed: ${error.message}`))
    })
    child.on("exit", (code, signal) => {
      if (this.#child !== child) return
      const detail = this.#stderr.trim().split("\n").slice(-2).join(" / ")
      const unavailable = code === 127
      this.#fail(new ApertiumProcessError(
        unavailable ? "Unavailable" : "Failed",
        `the Apertium pipeline exited (${signal ?? `code ${code}`})${detail === "" ? "" : `: ${detail}`}`
      ))
    })
  }

  #onStdout(data: string): void {
    this.#stdout += data
    for (let end = this.#stdout.indexOf("\0"); end >= 0; end = this.#stdout.indexOf("\0")) {
      const answer = this.#stdout.slice(0, end)
      this.#stdout = this.#stdout.slice(end + 1)
      const job = this.#current
      if (job === undefined) continue // a stray flush: nothing was asked
      clearTimeout(this.#timer)
      this.#current = undefined
      job.resolve(decodeAnswer(answer))
    }
    this.#pump()
  }

  /**
   * The written request (or the warm-up) fails with `error` and the pipeline is killed. A ready
   * pipeline is restarted at once in the background, so the next request finds it warm and the
   * restart counts against no request; a failed start stays failed until the next request.
   */
  #fail(error: ApertiumProcessError): void {
    this.#kill()
    const job = this.#current
    this.#current = undefined
    job?.reject(error)
    if (this.#state === "ready" && !this.#closed) this.#begin(error)
  }

  #setState(state: ApertiumState, cause?: ApertiumProcessError): void {
    this.#state = state
    this.#options.onStateChange?.(state, cause)
  }

  #kill(): void {
    clearTimeout(this.#timer)
    const child = this.#child
    this.#child = undefined
    if (child?.pid === undefined) return
    try {
      process.kill(-child.pid, "SIGKILL")
    } catch {
      child.kill("SIGKILL")
    }
  }
}
