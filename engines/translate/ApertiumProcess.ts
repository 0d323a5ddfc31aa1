/**
 * One long-lived Apertium pipeline for one pair, fed request after request in null-flush mode
 * (ApertiumModes.ts): a request is the escaped text followed by `\0`, the answer is everything up
 * to the next `\0` on stdout. Starting a pipeline costs about 0.1 s (a dozen programs load their
 * transducers); a warm chunk about 1 ms, hence one process kept per pair, started on first use.
 *
 * Requests run one at a time in arrival order from a bounded queue. An aborted request that is
 * still queued is dropped; one already written is left to finish (about a millisecond) and its
 * answer thrown away. A request that takes longer than `timeoutMs` kills the pipeline (the whole
 * process group: bash and every program in it) and the next request starts a fresh one; so does
 * a pipeline that exits. Plain Node, no Effect: ApertiumTranslator.ts wraps it.
 *
 * Hazard: Apertium's stream format gives meaning to `\ [ ] ^ $ @ * / < > { } #` and to `\0`;
 * input is escaped and control characters are removed before it is written (`encodeRequest`).
 */
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process"
import { nicedCommand } from "../ChildNice.ts"

export class ApertiumProcessError extends Error {
  constructor(
    /** `Unavailable`: the programs are missing. `Busy`: the queue is full. */
    readonly reason: "Unavailable" | "Failed" | "TimedOut" | "Busy" | "Aborted",
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
  /** Most requests waiting behind the running one. */
  readonly maxQueue: number
}

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
  #starting = false
  #closed = false

  constructor(options: ApertiumProcessOptions) {
    this.#options = options
  }

  /** Whether a pipeline is running now (started on first use, restarted after a failure). */
  get running(): boolean {
    return this.#child !== undefined
  }

  /** The pipeline's process id, when running (for tests that kill it). */
  get pid(): number | undefined {
    return this.#child?.pid
  }

  translate(text: string, signal?: AbortSignal): Promise<string> {
    return new Promise((resolve, reject) => {
      if (this.#closed) return reject(new ApertiumProcessError("Failed", "the translator is shut down"))
      if (signal?.aborted === true) return reject(new ApertiumProcessError("Aborted", "aborted"))
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
  }

  #pump(): void {
    if (this.#current !== undefined || this.#starting || this.#closed) return
    // Aborted jobs left the queue already; settled ones can still be here only if rejected by close.
    while (this.#queue.length > 0 && this.#queue[0]!.settled) this.#queue.shift()
    if (this.#queue.length === 0) return
    if (this.#child === undefined) return void this.#start()
    const job = this.#queue.shift()!
    this.#current = job
    this.#timer = setTimeout(() => this.#fail(new ApertiumProcessError("TimedOut", `no answer within ${this.#options.timeoutMs} ms`)), this.#options.timeoutMs)
    this.#child.stdin.write(job.input)
  }

  #start(): void {
    this.#starting = true
    this.#options.pipeline().then(
      (pipeline) => {
        this.#starting = false
        if (this.#closed) return
        this.#spawn(pipeline)
        this.#pump()
      },
      (error: NodeJS.ErrnoException) => {
        this.#starting = false
        const missing = error.code === "ENOENT"
        const failure = new ApertiumProcessError(
          missing ? "Unavailable" : "Failed",
          missing ? "Apertium is not installed (apertium-wblank-mode not found)" : `cannot read the Apertium mode: ${error.message}`
        )
        // Nothing can run without a pipeline: fail what waits, and try again on the next request.
        for (const job of this.#queue.splice(0)) job.reject(failure)
      }
    )
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

  /** The running request fails with `error`; the pipeline is killed and restarted when needed. */
  #fail(error: ApertiumProcessError): void {
    this.#kill()
    const job = this.#current
    this.#current = undefined
    job?.reject(error)
    this.#pump()
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
