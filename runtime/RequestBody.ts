/**
 * Streaming request-body reader over uWS `onData`.
 *
 * uWS drops body bytes that arrive while no `onData` handler is attached, so the handler is
 * attached synchronously when the request arrives and chunks are queued until a consumer asks.
 * Hazards handled here: uWS neuters each chunk's ArrayBuffer when the callback returns (we copy),
 * the queue is bounded by pausing the socket (`res.pause()`), and the size limit is enforced as
 * bytes arrive: a body past its limit fails with 413 without being read to the end.
 */
import type { HttpResponse } from "@based/uws"
import { Effect } from "effect"
import { type ApiError, badRequest, payloadTooLarge } from "../protocol/ApiError.ts"
import type { BodyReader } from "../protocol/Http.ts"

/** Bytes queued before the socket is paused, while nobody consumes. */
const highWaterBytes = 256 * 1024

/**
 * How often a socket left paused after its whole body arrived is read for a hang-up, ms: the
 * longest a disconnected client's request goes on (and is charged) unnoticed.
 */
const hangUpProbeMs = 500

export class RequestBody implements BodyReader {
  private readonly queue: Array<Uint8Array> = []
  private queuedBytes = 0
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
    expectsBody: boolean
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
        // Must copy: the ArrayBuffer is neutered as soon as this callback returns.
        const copy = new Uint8Array(chunk.byteLength)
        copy.set(new Uint8Array(chunk))
        this.received += copy.byteLength
        if (copy.byteLength > 0) {
          this.queue.push(copy)
          this.queuedBytes += copy.byteLength
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

  private next(): Effect.Effect<Uint8Array | undefined> {
    return Effect.callback<Uint8Array | undefined>((resume) => {
      const take = () => {
        const chunk = this.queue.shift()
        if (chunk !== undefined) {
          this.queuedBytes -= chunk.byteLength
          // Hazard: resuming re-arms uWS's 10 s idle timer. Once the whole body has arrived the
          // socket stays paused until the response is written (`release`), or a transcription
          // longer than 10 s would have its connection closed under it; meanwhile it is only
          // probed for a hang-up (`probeForHangUp`).
          if (this.paused && !this.ended && this.queuedBytes < highWaterBytes / 2) {
            this.paused = false
            this.res.resume()
          }
          resume(Effect.succeed(chunk))
          return true
        }
        if (this.ended) {
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
