/**
 * One WebSocket text-to-speech session (SPEC 4.2 `stream-input`, and ElevenLabs' multi-context
 * `multi-stream-input`): an actor, i.e. one control fiber reading a bounded inbox, plus one
 * pipeline fiber per context in a FiberMap. `stream-input` is the same machine with exactly one
 * context whose frames carry no `contextId`.
 *
 * Per context: text is appended to a buffer; TextChunker decides when a piece becomes a
 * synthesis; pieces and markers (flushDone, isFinal, cancel acks) go through one bounded work
 * queue, so every marker is sent after the audio queued before it. A producer starts each
 * synthesis on the pool ("realtime" lane) and hands it over through a one-slot queue; the
 * deliverer sends its blocks as the engine makes them (the chunk's last frame carries the
 * alignment). At most two chunks of audio exist per context besides what the socket holds, and
 * `send` waits while the client is not reading, so a client that stops reading pauses its own
 * synthesis one chunk later. The control fiber never blocks on the socket, so such a client can
 * still cancel.
 *
 * Credits: one per character (code point) of synthesized text (trimmed), debited when its audio is about to be
 * sent, so cancelled or undeliverable audio is never charged and nothing needs refunding. The cost
 * of that choice: up to two chunks are synthesized for an account that then turns out empty.
 *
 * Idle: closed (Failure) after `idleTimeoutMs` with no inbound message, no message sent and no
 * synthesis running; so a listening client is not cut off mid-stream, and one that stops reading
 * is. Time is read from Effect's Clock, so tests drive it with TestClock.
 *
 * The session speaks typed messages (actors/TtsSessionMessages.ts), never frames: the bridge
 * (runtime/WebSocketServer.ts) decodes and encodes them with protocol/ws/. Endings: Normal after
 * `{text:""}` (single) or `close_socket` (multi); Failure for synthesis failures and idleness
 * (SPEC 7), after an error; Violation for client faults (malformed frame, too much pending text,
 * too many contexts, out of credits), after an error. protocol/ws/CloseCodes.ts gives their codes.
 */
import { Cause, Clock, Deferred, Duration, Effect, Exit, Fiber, FiberMap, Metric, Option, Queue } from "effect"
import { mulawEncode } from "../engines/audio/Mulaw.ts"
import type { OutputFormat } from "../engines/audio/OutputFormat.ts"
import { int16ToBytesLE } from "../engines/audio/Pcm.ts"
import type { SynthesizeSummary } from "../engines/tts/tasks.ts"
import { SPEED_MAX, SPEED_MIN } from "../engines/tts/TtsEngine.ts"
import { Credits } from "../storage/Credits.ts"
import { CreditPurpose, ttsCredits } from "./CreditPolicy.ts"
import { type ResolvedVoice, Synthesizer } from "./Synthesizer.ts"
import { forEachBlock } from "./SentenceStream.ts"
import { payWithFirstFrame, Unpaid } from "./ChunkCharge.ts"
import { type Chunk, takeChunks, toChunk } from "../engines/text/TextChunker.ts"
import { countCharacters } from "../engines/text/TextLength.ts"
import type { ContextId, Inbox, SessionEnd, SessionInput, SessionOutput, SessionRequest, SessionSocket } from "./TtsSessionMessages.ts"

export type SessionMode = "single" | "multi"

/** Hz of every audio frame of stream-input, and of multi-stream-input without output_format (SPEC 4.2: raw s16le, 24000 Hz, mono). */
export const WS_SAMPLE_RATE = 24000
/** Text waiting for synthesis per session (buffers plus queued chunks), code points (SPEC 8's 8000). */
export const MAX_PENDING_CHARS = 8000
/** Open contexts per multi-context socket; contexts still finishing after close_context count up to twice this. */
export const MAX_CONTEXTS = 10
/** Pieces and markers queued per context; the pending-text bound is the one that bites first for text. */
const WORK_QUEUE_CAPACITY = 1024

export interface SessionOptions {
  readonly mode: SessionMode
  readonly voice: ResolvedVoice
  readonly userId: string
  /**
   * Audio of every frame: `pcm` (s16le) or `ulaw` at its rate; synthesized at that rate (resampled
   * in the worker). `wav` is never passed: frames carry no header.
   */
  readonly format: Pick<OutputFormat, "container" | "sampleRate">
  /** End (Failure) after this long without an inbound message, an outbound message or a synthesis running, ms. */
  readonly idleTimeoutMs: number
  readonly socket: SessionSocket
  readonly inbox: Inbox
  /** The error's code and message for a failure (the edge's error table). */
  readonly describe: (failure: unknown) => { readonly code: string; readonly message: string }
}

/** Server-side counters, also what tests watch to see synthesis pause under backpressure. */
export const chunksSynthesized = Metric.counter("tts_ws_chunks_synthesized_total", {
  description: "Chunks of WebSocket text synthesized"
})
export const audioFramesSent = Metric.counter("tts_ws_audio_frames_sent_total", {
  description: "WebSocket audio frames handed to the socket"
})

export const clampSpeed = (speed: number): number => Math.min(SPEED_MAX, Math.max(SPEED_MIN, speed))

type Ending = SessionEnd

type Work =
  | { readonly _tag: "Speak"; readonly chunk: Chunk; readonly speed: number }
  | { readonly _tag: "FlushDone" }
  | { readonly _tag: "Cancelled" }
  | { readonly _tag: "Final" }
type Result =
  | Exclude<Work, { _tag: "Speak" }>
  | {
    readonly _tag: "Audio"
    readonly chunk: Chunk
    /** The chunk's PCM blocks as the engine makes them; ends with the synthesis. */
    readonly blocks: Queue.Queue<Int16Array, Cause.Done>
    readonly synthesis: Fiber.Fiber<SynthesizeSummary, unknown>
  }

/** State of one context; owned by the control fiber except `queuedChars`, which the producer lowers. */
interface Context {
  /** Echoed as `contextId`; undefined on stream-input. */
  readonly id: ContextId
  /** FiberMap key: fresh per context incarnation, so a reused id never meets its predecessor. */
  readonly key: number
  readonly work: Queue.Queue<Work>
  buffer: string
  speed: number
  /** Characters (code points) of queued Speak work not yet taken by the producer. */
  queuedChars: number
  /**
   * Flushes asked for whose flushDone is not yet sent: raised when one is queued, lowered in the
   * same step as its frame is written. A cancel owes the client this many (see `cancel`).
   */
  flushesOwed: number
}

export const runTtsSession = Effect.fn("TtsSession.run")(function*(options: SessionOptions) {
  const synthesizer = yield* Synthesizer
  const credits = yield* Credits
  const clock = yield* Clock.Clock
  const now = () => clock.currentTimeMillisUnsafe()
  const { socket, mode, voice, userId, format } = options
  const encode = (pcm: Int16Array): Uint8Array => (format.container === "ulaw" ? mulawEncode(pcm) : int16ToBytesLE(pcm))
  const recycle = (pcm: Int16Array) => Effect.sync(() => synthesizer.recycle(pcm)) // once its frame (base64) is sent
  const ended = yield* Deferred.make<Ending>()
  const finish = (ending: Ending) => Deferred.doneUnsafe(ended, Exit.succeed(ending))
  const fibers = yield* FiberMap.make<number>()
  /** Open contexts by wire id ("" on stream-input). */
  const contexts = new Map<string, Context>()
  /** Open and finishing contexts, for the pending-text bound. */
  const live = new Set<Context>()
  let nextKey = 0
  /** Last inbound frame, outbound frame or finished synthesis, ms since epoch. */
  let lastActivity = now()
  /** Syntheses running (or waiting for a worker): the server is busy for the client, not idle. */
  let synthesizing = 0
  let inputEnded = false

  const send = (output: SessionOutput) =>
    Effect.map(socket.send(output), () => {
      lastActivity = now()
    })

  // ---- per-context pipeline -------------------------------------------------------------------

  /** Starts each chunk's synthesis and hands it over at once; the next starts when it has ended. */
  const produce = (ctx: Context, results: Queue.Queue<Result>) =>
    Effect.gen(function*() {
      for (;;) {
        const work = yield* Queue.take(ctx.work)
        if (work._tag !== "Speak") {
          yield* Queue.offer(results, work)
          if (work._tag === "Final") return
          continue
        }
        ctx.queuedChars -= countCharacters(work.chunk.raw)
        const blocks = yield* Queue.unbounded<Int16Array, Cause.Done>()
        const request = { voice, text: work.chunk.text, speed: work.speed, sampleRate: format.sampleRate, priority: "realtime" as const }
        // Counted in the fiber: a cancel can interrupt it before it starts, and nothing would count it down.
        let counted = false
        const synthesis = yield* Effect.forkChild(Effect.suspend(() => ((counted = true), synthesizing++, synthesizer.synthesizeStream(request, (pcm) => Queue.offerUnsafe(blocks, pcm)))).pipe(
          Effect.tap(() => Metric.update(chunksSynthesized, 1)),
          Effect.ensuring(Effect.andThen(Queue.end(blocks), Effect.sync(() => ((synthesizing -= counted ? 1 : 0), (lastActivity = now())))))
        ), { startImmediately: true }) // to the pool dispatch at once, not after an event-loop turn
        yield* Queue.offer(results, { _tag: "Audio", chunk: work.chunk, blocks, synthesis })
        const exit = yield* Fiber.await(synthesis)
        // A failure is the deliverer's to report, in order, after the audio before it.
        if (exit._tag === "Failure") return Cause.hasInterruptsOnly(exit.cause) ? yield* Effect.interrupt : undefined
      }
    })

  /** Sends an error frame in order, then ends the session. */
  const fail = (ctx: Context, failure: unknown, kind: "Violation" | "Failure") =>
    Effect.gen(function*() {
      const { code: status, message } = options.describe(failure)
      if (kind === "Failure") yield* Effect.logWarning("WebSocket session failed", { status, message })
      yield* send({ _tag: "Error", code: status, message, contextId: ctx.id })
      finish({ kind, reason: status })
    })

  const deliver = (ctx: Context, results: Queue.Queue<Result>) =>
    Effect.gen(function*() {
      for (;;) {
        const result = yield* Queue.take(results)
        switch (result._tag) {
          case "Audio": {
            // Blocks go out as they come but one: the last carries the alignment, known at the end.
            // The chunk is debited with its first frame (actors/ChunkCharge.ts), not on its first block;
            // a debit behind a frame sent early is joined before the next frame (or after the last).
            let held: Int16Array | undefined
            let paid = false
            let debited: Fiber.Fiber<unknown, Unpaid> | undefined
            const charge = { userId, cost: ttsCredits(result.chunk.text), origin: { purpose: CreditPurpose.ttsWebSocket } }
            const settleDebit = Effect.suspend(() => (debited === undefined ? Effect.void : Effect.ensuring(Fiber.join(debited), Effect.sync(() => void (debited = undefined)))))
            const sendPaid = (frame: SessionOutput) => Effect.suspend(() =>
              paid ? Effect.andThen(settleDebit, send(frame)) : ((paid = true), Effect.map(payWithFirstFrame(credits, charge, send(frame)), (fiber) => void (debited = fiber))))
            const unpaid = (failure: unknown) => fail(ctx, failure, (failure as { reason?: unknown }).reason === "InsufficientCredits" ? "Violation" : "Failure")
            const refusal = <A, E, R>(sent: Effect.Effect<A, E, R>) => sent.pipe(Effect.as(undefined), Effect.catchIf((e): e is Unpaid & E => e instanceof Unpaid, (e) => Effect.succeed(e.failure)))
            const notPaid = yield* refusal(forEachBlock(result.blocks, (pcm) =>
              Effect.gen(function*() {
                if (held !== undefined) yield* Effect.andThen(sendPaid({ _tag: "AudioBlock", contextId: ctx.id, audio: encode(held) }), recycle(held))
                held = pcm
              })))
            if (notPaid !== undefined) return yield* unpaid(notPaid)
            const exit = yield* Fiber.await(result.synthesis)
            if (exit._tag === "Failure") {
              if (Cause.hasInterruptsOnly(exit.cause)) return yield* Effect.interrupt
              return yield* fail(ctx, Cause.squash(exit.cause), "Failure")
            }
            const { samples, sampleRate, words } = exit.value
            const frame: SessionOutput = { _tag: "Audio", contextId: ctx.id, audio: encode(held ?? new Int16Array(0)), text: result.chunk.raw, lead: result.chunk.lead, words, durationMs: (samples * 1000) / sampleRate }
            // A chunk with no audio at all is not charged.
            const lastNotPaid = yield* refusal((held === undefined ? send(frame) : Effect.andThen(sendPaid(frame), recycle(held))).pipe(Effect.andThen(settleDebit)))
            if (lastNotPaid !== undefined) return yield* unpaid(lastNotPaid)
            yield* Metric.update(audioFramesSent, 1)
            break
          }
          case "FlushDone":
            // Written and counted in one step, so a cancel interrupting this fiber sees it as sent
            // exactly when it was (waiting for a slow reader happens before, interruptibly).
            yield* socket.ready
            yield* Effect.sync(() => {
              socket.sendNow({ _tag: "FlushDone", contextId: ctx.id })
              ctx.flushesOwed--
              lastActivity = now()
            })
            break
          case "Cancelled":
            yield* send({ _tag: result._tag, contextId: ctx.id })
            break
          case "Final":
            yield* send({ _tag: "Final", contextId: ctx.id })
            if (mode === "single") finish({ kind: "Normal", reason: "end of stream" })
            return
        }
      }
    })

  const runContext = (ctx: Context) =>
    Effect.gen(function*() {
      const results = yield* Queue.bounded<Result>(1)
      yield* Effect.forkChild(produce(ctx, results))
      yield* deliver(ctx, results)
    }).pipe(
      // The client left; the server interrupts the session as well.
      Effect.catchTag("SocketGone", () => Effect.void),
      Effect.ensuring(Effect.sync(() => live.delete(ctx)))
    )

  const openContext = (id: ContextId, from?: Context) =>
    Effect.gen(function*() {
      const ctx: Context = {
        id,
        key: nextKey++,
        work: yield* Queue.bounded<Work>(WORK_QUEUE_CAPACITY),
        buffer: "",
        speed: from?.speed ?? 1,
        queuedChars: 0,
        flushesOwed: 0
      }
      live.add(ctx)
      contexts.set(id ?? "", ctx)
      yield* FiberMap.run(fibers, ctx.key, runContext(ctx))
      return ctx
    })

  // ---- control: frames → context state ----------------------------------------------------------

  /** A client fault: the error now, then the end (Violation). */
  const violation = (code: string, message: string, contextId?: ContextId): Ending => {
    socket.sendNow({ _tag: "Error", code, message, contextId })
    return { kind: "Violation", reason: code }
  }

  const pendingChars = () => {
    let n = 0
    for (const c of live) n += countCharacters(c.buffer) + c.queuedChars
    return n
  }

  /** Queues work; undefined on success, else the ending (queue full). */
  const enqueue = (ctx: Context, work: Work): Ending | undefined => {
    if (!Queue.offerUnsafe(ctx.work, work)) {
      return violation("too_many_messages", `more than ${WORK_QUEUE_CAPACITY} requests wait in this context; wait for flushDone`, ctx.id)
    }
    if (work._tag === "Speak") ctx.queuedChars += countCharacters(work.chunk.raw)
    if (work._tag === "FlushDone") ctx.flushesOwed++
    return undefined
  }

  const speakAll = (ctx: Context, chunks: ReadonlyArray<Chunk>): Ending | undefined => {
    for (const chunk of chunks) {
      const e = enqueue(ctx, { _tag: "Speak", chunk, speed: ctx.speed })
      if (e !== undefined) return e
    }
    return undefined
  }

  /** Synthesize the whole buffer now (flush, try_trigger_generation, end of input). */
  const speakBuffer = (ctx: Context): Ending | undefined => {
    const chunk = toChunk(ctx.buffer)
    // A blank buffer is kept: it leads the next chunk, so the alignment still spells it.
    return chunk === undefined ? undefined : ((ctx.buffer = ""), speakAll(ctx, [chunk]))
  }

  const append = (ctx: Context, text: string): Ending | undefined => {
    if (pendingChars() + countCharacters(text) > MAX_PENDING_CHARS) {
      return violation("text_too_long", `more than ${MAX_PENDING_CHARS} characters would wait for synthesis; send more after the audio arrives (flush, then wait for flushDone)`, ctx.id)
    }
    const { chunks, rest } = takeChunks(ctx.buffer + text)
    ctx.buffer = rest
    return speakAll(ctx, chunks)
  }

  /**
   * Drops the context's buffered and queued speech and interrupts its synthesis. Every flush asked
   * for before the cancel still gets its flushDone (its audio will never come, so it is done),
   * then the cancel is acknowledged: clients that wait for flushDone never hang on a cancel.
   * Which flushes those are used to depend on timing (queued markers were dropped with the queue).
   */
  const cancel = (ctx: Context) =>
    Effect.gen(function*() {
      yield* FiberMap.remove(fibers, ctx.key)
      live.delete(ctx)
      const fresh = yield* openContext(ctx.id, ctx)
      for (let i = 0; i < ctx.flushesOwed; i++) {
        const e = enqueue(fresh, { _tag: "FlushDone" })
        if (e !== undefined) return e
      }
      return enqueue(fresh, { _tag: "Cancelled" })
    })

  /** Text, speed, try_trigger_generation and flush of one frame, for its context. */
  const applyToContext = (ctx: Context, frame: SessionRequest, textMeansEnd: boolean): Ending | undefined => {
    if (frame.speed !== undefined) ctx.speed = clampSpeed(frame.speed)
    const text = frame.text
    if (text !== undefined) {
      if (text === "") {
        if (textMeansEnd) {
          inputEnded = true
          return speakBuffer(ctx) ?? enqueue(ctx, { _tag: "Final" })
        }
        // multi-stream-input: empty text is ElevenLabs' keep-alive; activity was already noted.
      } else if (text !== " ") { // " " is the init frame or, later, a keep-alive: never appended
        const e = append(ctx, text)
        if (e !== undefined) return e
      }
    }
    if (frame.tryTrigger || frame.flush) {
      const e = speakBuffer(ctx)
      if (e !== undefined) return e
    }
    return frame.flush ? enqueue(ctx, { _tag: "FlushDone" }) : undefined
  }

  const handleSingle = (frame: SessionRequest) =>
    Effect.gen(function*() {
      let ctx = contexts.get("")!
      if (frame.cancel) {
        const e = yield* cancel(ctx)
        if (e !== undefined) return e
        ctx = contexts.get("")!
      }
      return applyToContext(ctx, frame, true)
    })

  const closeSocket = Effect.gen(function*() {
    inputEnded = true
    for (const ctx of contexts.values()) {
      const e = speakBuffer(ctx) ?? enqueue(ctx, { _tag: "Final" })
      if (e !== undefined) return e
    }
    contexts.clear()
    // Every context sends its isFinal after its audio; then the socket closes normally.
    yield* Effect.forkChild(Effect.andThen(FiberMap.awaitEmpty(fibers), Effect.sync(() => finish({ kind: "Normal", reason: "close_socket" }))))
    return undefined
  })

  const handleMulti = (frame: SessionRequest) =>
    Effect.gen(function*() {
      if (frame.closeSocket) return yield* closeSocket
      const key = frame.contextId ?? ""
      let ctx = contexts.get(key)
      if (frame.closeContext) {
        if (ctx === undefined) return undefined
        // Already-flushed (queued) speech finishes; the unflushed buffer is dropped (ElevenLabs).
        const e = frame.flush ? speakBuffer(ctx) : undefined
        if (e !== undefined) return e
        ctx.buffer = ""
        contexts.delete(key)
        return enqueue(ctx, { _tag: "Final" })
      }
      if (frame.cancel && ctx !== undefined) {
        const e = yield* cancel(ctx)
        if (e !== undefined) return e
        ctx = contexts.get(key)
      }
      const needsContext = (frame.text !== undefined && frame.text !== "") || frame.flush || frame.tryTrigger || frame.speed !== undefined
      if (ctx === undefined) {
        if (!needsContext) return undefined
        if (contexts.size >= MAX_CONTEXTS || live.size >= 2 * MAX_CONTEXTS) {
          return violation("too_many_contexts", `at most ${MAX_CONTEXTS} contexts may be open on one socket; close_context the ones you no longer need`, frame.contextId)
        }
        ctx = yield* openContext(frame.contextId ?? "")
      }
      return applyToContext(ctx, frame, false)
    })

  const handle = (input: SessionInput) =>
    Effect.suspend((): Effect.Effect<Ending | undefined> => {
      if (input._tag === "Unreadable") return Effect.succeed(violation("invalid_message", input.message))
      if (inputEnded) return Effect.succeed(undefined) // after end of input, messages only keep the socket alive
      return mode === "single" ? handleSingle(input) : handleMulti(input)
    })

  const control = Effect.gen(function*() {
    for (;;) {
      // Time spent synthesizing is not idleness (a cold worker may take seconds for the first
      // chunk): look again in a second; the clock restarts when the synthesis ends.
      const left = synthesizing > 0 ? 1000 : lastActivity + options.idleTimeoutMs - now()
      if (left <= 0) {
        const message = `no frame for ${Number((options.idleTimeoutMs / 1000).toFixed(1))} s; the session is closed`
        socket.sendNow({ _tag: "Error", code: "idle_timeout", message, contextId: undefined })
        return { kind: "Failure", reason: "idle timeout" } satisfies Ending
      }
      const next = yield* Effect.timeoutOption(options.inbox.take, Duration.millis(left))
      if (Option.isNone(next)) continue // re-check: audio sent meanwhile counts as activity
      lastActivity = now()
      const ending = yield* handle(next.value)
      if (ending !== undefined) return ending
    }
  })

  if (mode === "single") yield* openContext(undefined)
  const controller = yield* Effect.forkChild(Effect.map(control, finish))
  const ending = yield* Deferred.await(ended)
  yield* Fiber.interrupt(controller)
  yield* FiberMap.clear(fibers)
  socket.end(ending)
}, Effect.scoped)
