/**
 * Streaming request-body reader over uWS `onData`.
 *
 * uWS drops body bytes that arrive while no `onData` handler is attached, so the handler is
 * attached synchronously when the request arrives and chunks are queued until a consumer asks.
 * Hazards handled here: uWS neuters each chunk's ArrayBuffer when the callback returns (we copy),
 * the queue is bounded by pausing the socket (`res.pause()`) and, where uWS reads on regardless,
 * by spilling to a file (`SpillFile`), and the size limit is enforced as bytes arrive: a body
 * past its limit fails with 413 without being read to the end.
 */
import type { HttpResponse } from "@based/uws"
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import { closeSync, mkdirSync, openSync, read, rmSync, unlinkSync, writeSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { type ApiError, badRequest, payloadTooLarge, toApiError } from "../protocol/ApiError.ts"
import type { BodyReader } from "../protocol/Http.ts"
import { localIoError } from "../storage/BlobStore.ts"

/** Bytes queued before the socket is paused, while nobody consumes. */
const highWaterBytes = 256 * 1024

/**
 * How often a socket left paused after its whole body arrived is read for a hang-up, ms: the
 * longest a disconnected client's request goes on (and is charged) unnoticed.
 */
const hangUpProbeMs = 500

/**
 * Bytes held in memory past which a chunk that arrives while the socket is paused is written to
 * the spill file instead. `pause()` does not stop a read uWS is in the middle of: while each
 * `recv` fills its 512 KiB buffer it reads again, calling onData each time, without returning
 * to the event loop or looking at the pause. A fast sender (a 100 MB upload over loopback)
 * keeps the buffer full, and 20-60 MB arrived in one such burst while paused; no consumer can
 * run meanwhile (its disk writes complete on the event loop), so held in memory they were the
 * RSS growth of a large upload.
 */
const spillAfterBytes = 4 * highWaterBytes

/** Most bytes one body spills; past it, chunks queue in memory again (as with no spill file). */
const maxSpillBytes = 1024 * 1024 * 1024

/** A queued chunk that went to the spill file: `length` bytes at offset `at`. */
interface Spilled {
  readonly at: number
  readonly length: number
}

/** What a failed read-back of the spill file answers: the error table's answer for a local storage failure. */
const spillFailure = (cause: unknown): ApiError => toApiError(localIoError("request body spill", cause)).error

const byteLength = (entry: Uint8Array | Spilled) => (entry instanceof Uint8Array ? entry.byteLength : entry.length)

/**
 * The overrun of one body: an unlinked temporary file (removed the moment it is created, so
 * nothing is left behind whatever happens; the open descriptor keeps its bytes), written
 * synchronously from onData (the event loop is held by uWS's read burst anyway; the bytes go to
 * the page cache, not to the process's heap) and read back in order as the consumer gets to them.
 * Any failure (no such directory, full disk) leaves the rest of the body in memory, as before.
 */
class SpillFile {
  private fd: number | undefined
  private end = 0
  private reads = 0
  private closed = false
  private failed = false

  constructor(private readonly dir: string) {}

  /** Appends `bytes`; undefined when they could not be written (keep them in memory). */
  append(bytes: Uint8Array): Spilled | undefined {
    if (this.failed || this.closed || this.end + bytes.byteLength > maxSpillBytes) return undefined
    try {
      if (this.fd === undefined) {
        const file = path.join(this.dir, `body-spill-${randomBytes(8).toString("hex")}`)
        // The data directory's tmp may not exist yet (it is made on first use); once per spilled body.
        mkdirSync(this.dir, { recursive: true })
        this.fd = openSync(file, "wx+", 0o600)
        try {
          unlinkSync(file)
        } catch (e) {
          closeSync(this.fd)
          this.fd = undefined
          rmSync(file, { force: true })
          throw e
        }
      }
      // Positional: a failed write leaves `end` where it was, the partial bytes are never read.
      for (let done = 0; done < bytes.byteLength;) {
        done += writeSync(this.fd, bytes, done, bytes.byteLength - done, this.end + done)
      }
    } catch {
      this.failed = true
      return undefined
    }
    const spilled = { at: this.end, length: bytes.byteLength }
    this.end += bytes.byteLength
    return spilled
  }

  /** Reads a spilled chunk back into new memory (the consumer may keep it). */
  read(entry: Spilled, done: (result: Effect.Effect<Uint8Array, ApiError>) => void): void {
    if (this.closed || this.fd === undefined) {
      return done(Effect.fail(spillFailure(new Error("spill file closed"))))
    }
    // allocUnsafe: every byte is overwritten, or the short read is refused below.
    const out = Buffer.allocUnsafe(entry.length)
    this.reads++
    read(this.fd, out, 0, entry.length, entry.at, (e, n) => {
      this.reads--
      if (this.closed && this.reads === 0) this.closeNow()
      const failure = e ?? (n === entry.length ? undefined : new Error(`short read: ${n} of ${entry.length} bytes`))
      done(failure === undefined ? Effect.succeed(out) : Effect.fail(spillFailure(failure)))
    })
  }

  /** Closes the file, once no read is in flight (its descriptor could otherwise be reused under it). */
  close(): void {
    this.closed = true
    if (this.reads === 0) this.closeNow()
  }

  private closeNow(): void {
    const fd = this.fd
    this.fd = undefined
    if (fd !== undefined) closeSync(fd)
  }
}

export class RequestBody implements BodyReader {
  private readonly queue: Array<Uint8Array | Spilled> = []
  /** Bytes queued, in memory and spilled: what pause and resume go by. */
  private queuedBytes = 0
  /** Bytes queued in memory. */
  private memoryBytes = 0
  private spill: SpillFile | undefined
  private received = 0
  private ended: boolean
  private paused = false
  private consumed = false
  /** Set once the reply is out: later bytes of the body are dropped as they arrive. */
  private discarding = false
  private wake: (() => void) | undefined
  private probe: ReturnType<typeof setInterval> | undefined

  constructor(
    private readonly res: HttpResponse,
    /** From Content-Length; undefined when chunked or absent. */
    private readonly declaredLength: number | undefined,
    expectsBody: boolean,
    /** Where the spill file is created (and at once unlinked); undefined: the OS temp dir. */
    private readonly spillDir: string = tmpdir()
  ) {
    this.ended = !expectsBody
    if (expectsBody) {
      res.onData((chunk, isLast) => {
        if (this.discarding) {
          // The reply is out; uWS still frames the rest of the body, we only drop it.
          this.received += chunk.byteLength
          if (isLast) this.ended = true
          return
        }
        const bytes = new Uint8Array(chunk)
        this.received += bytes.byteLength
        if (bytes.byteLength > 0) {
          // Paused and still called: uWS is reading on past the pause (see spillAfterBytes).
          const spilled = this.paused && this.memoryBytes >= spillAfterBytes
            ? (this.spill ??= new SpillFile(this.spillDir)).append(bytes)
            : undefined
          if (spilled !== undefined) {
            this.queue.push(spilled)
          } else {
            // Must copy: the ArrayBuffer is neutered as soon as this callback returns.
            const copy = new Uint8Array(bytes.byteLength)
            copy.set(bytes)
            this.queue.push(copy)
            this.memoryBytes += copy.byteLength
          }
          this.queuedBytes += bytes.byteLength
        }
        if (isLast) {
          this.ended = true
          if (this.paused) this.probeForHangUp()
        }
        if (!this.ended && this.queuedBytes >= highWaterBytes && !this.paused) {
          this.paused = true
          res.pause()
        }
        this.notify()
      })
    }
  }

  /** Called from onAborted: wakes a waiting consumer so its fiber can finish. */
  abort(): void {
    this.ended = true
    this.stopProbe()
    // A consumer still taking chunks after this (its fiber is being interrupted) fails on a
    // spilled one rather than getting a body with a hole in it.
    this.spill?.close()
    this.notify()
  }

  /** Resumes a socket left paused by the reader; called right before the response is written. */
  release(): void {
    this.stopProbe()
    if (this.paused) {
      this.paused = false
      this.res.resume()
    }
  }

  /** True while bytes of the body are still to arrive from the client. */
  get unread(): boolean {
    return !this.ended
  }

  /**
   * Bytes of the body still to arrive, when Content-Length declared them; undefined for a
   * chunked body, whose end only its terminating chunk tells.
   */
  get remaining(): number | undefined {
    if (this.ended) return 0
    return this.declaredLength === undefined ? undefined : Math.max(0, this.declaredLength - this.received)
  }

  /**
   * From now on the body is dropped as it arrives, and queued chunks are freed. Called when the
   * reply is written before the body was read to its end (an early 401 or 413): uWS keeps
   * framing the rest of the body by its Content-Length, so the connection stays in step.
   */
  discard(): void {
    this.discarding = true
    this.queue.length = 0
    this.queuedBytes = 0
    this.memoryBytes = 0
    this.spill?.close()
    this.release()
  }

  /**
   * A paused socket is not read, so uWS would not see the client hang up (no onAborted) and a
   * long request (a transcription) would run, and be charged, to its end. uWS can go on
   * delivering chunks of a read already made after `pause`, the last one included, so a body
   * can end with its socket paused. It cannot simply be resumed: `resume` re-arms uWS's 10 s
   * idle timer, which closes a connection whose answer takes longer. So it is resumed for one
   * turn of the event loop at a time (I/O is polled between a timer and `setImmediate`; a
   * FIN or reset waiting then fires onAborted) and paused again, which stops the timer.
   */
  private probeForHangUp(): void {
    // Runs only while the socket is paused: `release` and `abort` stop it before anything else
    // touches the response (after an abort, the response must not be touched at all).
    this.probe = setInterval(() => {
      this.res.resume()
      setImmediate(() => {
        if (this.probe !== undefined) this.res.pause()
      })
    }, hangUpProbeMs)
  }

  private stopProbe(): void {
    if (this.probe !== undefined) clearInterval(this.probe)
    this.probe = undefined
  }

  private notify(): void {
    const w = this.wake
    this.wake = undefined
    w?.()
  }

  private next(): Effect.Effect<Uint8Array | undefined, ApiError> {
    return Effect.callback<Uint8Array | undefined, ApiError>((resume) => {
      const take = () => {
        const chunk = this.queue.shift()
        if (chunk !== undefined) {
          this.queuedBytes -= byteLength(chunk)
          if (chunk instanceof Uint8Array) this.memoryBytes -= chunk.byteLength
          // Hazard: resuming re-arms uWS's 10 s idle timer. Once the whole body has arrived the
          // socket stays paused until the response is written (`release`), or a transcription
          // longer than 10 s would have its connection closed under it; meanwhile it is only
          // probed for a hang-up (`probeForHangUp`).
          if (this.paused && !this.ended && this.queuedBytes < highWaterBytes / 2) {
            this.paused = false
            this.res.resume()
          }
          if (chunk instanceof Uint8Array) resume(Effect.succeed(chunk))
          else this.spill!.read(chunk, resume)
          return true
        }
        if (this.ended) {
          this.spill?.close()
          resume(Effect.succeed(undefined))
          return true
        }
        return false
      }
      // A wake-up can find nothing to take (uWS may deliver an empty, non-final chunk): the
      // waiter then stays registered for the next one.
      const waiter = () => {
        if (!take()) this.wake = waiter
      }
      if (!take()) this.wake = waiter
      return Effect.sync(() => {
        this.wake = undefined
      })
    })
  }

  readonly chunks = <E>(limitBytes: number, onChunk: (chunk: Uint8Array) => Effect.Effect<void, E>) => {
    const self = this
    return Effect.gen(function*() {
      if (self.consumed) return yield* Effect.fail<ApiError | E>(badRequest("request body already consumed"))
      self.consumed = true
      if (self.declaredLength !== undefined && self.declaredLength > limitBytes) {
        return yield* Effect.fail(payloadTooLarge(limitBytes))
      }
      let total = 0
      while (true) {
        const chunk = yield* self.next()
        if (chunk === undefined) break
        total += chunk.byteLength
        if (total > limitBytes) return yield* Effect.fail(payloadTooLarge(limitBytes))
        yield* onChunk(chunk)
      }
      return total
    })
  }

  readonly bytes = (limitBytes: number): Effect.Effect<Uint8Array, ApiError> => {
    const parts: Array<Uint8Array> = []
    return this.chunks(limitBytes, (c) => Effect.sync(() => void parts.push(c))).pipe(
      Effect.map((total) => {
        if (parts.length === 1) return parts[0]!
        const out = new Uint8Array(total)
        let at = 0
        for (const p of parts) {
          out.set(p, at)
          at += p.byteLength
        }
        return out
      })
    )
  }
}
