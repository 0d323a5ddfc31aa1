/**
 * The WebSocket text-to-speech session actor (actors/TtsSession.ts) on its own: typed messages in
 * through its Inbox, typed messages out through a recording socket, a fake Synthesizer (no worker
 * pool), a fake debit, and Effect's TestClock, so the idle timeout is reached without waiting.
 * The wire (frames, close codes) is tested over real sockets in test/protocol/WebSocket*.test.ts.
 */
import { Deferred, Effect } from "effect"
import { TestClock } from "effect/testing"
import t from "tap"
import { settle, withRecordingSession } from "../support/ttsSession.ts"
import { SpeechError } from "../../engines/tts/SpeechError.ts"
import { asOneBlock, type SynthesisRequest } from "../../actors/Synthesizer.ts"
import type { SessionMode } from "../../actors/TtsSession.ts"
import type { Inbox, SessionEnd, SessionOutput, SessionRequest } from "../../actors/TtsSessionMessages.ts"
import { int16ToBytesLE } from "../../engines/audio/Pcm.ts"
import type { SynthesizeOutput } from "../../engines/tts/tasks.ts"

const RATE = 24000
/** Ten samples per character of the text, each the character's code: recognisable audio. */
const fakePcm = (text: string): Int16Array => Int16Array.from({ length: text.length * 10 }, (_, i) => text.charCodeAt(Math.floor(i / 10)))
const fakeOutput = (request: SynthesisRequest): SynthesizeOutput => ({
  pcm: fakePcm(request.text),
  sampleRate: request.sampleRate,
  engineSampleRate: RATE,
  words: [],
  engineMs: 0
})

interface Harness {
  readonly inbox: Inbox
  readonly outputs: Array<SessionOutput>
  readonly debits: Array<number>
  readonly ended: Deferred.Deferred<SessionEnd>
  readonly send: (fields: Partial<Omit<SessionRequest, "_tag">>) => Effect.Effect<void>
}

/**
 * Runs `body` against a session whose synthesizer is `synthesize`; the session fiber is
 * interrupted when `body` ends (a no-op if it has ended).
 */
const withSession = <A>(
  options: {
    readonly mode: SessionMode
    readonly idleTimeoutMs?: number
    readonly synthesize?: (r: SynthesisRequest) => Effect.Effect<SynthesizeOutput, SpeechError>
    readonly socketGate?: Effect.Effect<void>
  },
  body: (h: Harness) => Effect.Effect<A>
): Promise<A> => {
  const debits: Array<number> = []
  const synthesize = options.synthesize ?? ((r: SynthesisRequest) => Effect.succeed(fakeOutput(r)))
  return withRecordingSession({
    mode: options.mode,
    ...(options.idleTimeoutMs !== undefined ? { idleTimeoutMs: options.idleTimeoutMs } : {}),
    ...(options.socketGate !== undefined ? { socketGate: options.socketGate } : {}),
    synthesizeStream: (r, onBlock) => asOneBlock(synthesize(r), onBlock),
    credits: { debit: (_userId: string, amount: number) => Effect.sync(() => debits.push(amount)) },
    describe: (failure) => ({ code: "failed", message: String((failure as { message?: unknown }).message) })
  }, (h) => body({ ...h, debits }))
}

const tags = (outputs: ReadonlyArray<SessionOutput>) => outputs.map((o) => o._tag)

t.test("flush: the buffered text is synthesized, its audio sent and debited, then flushDone; empty text ends the stream", async (t) => {
  const { outputs, end, debits } = await withSession({ mode: "single" }, (h) =>
    Effect.gen(function*() {
      yield* h.send({ text: " " })
      yield* h.send({ text: "Tere. " })
      const beforeFlush = h.outputs.length
      yield* h.send({ flush: true })
      yield* h.send({ text: "" })
      const end = yield* Deferred.await(h.ended)
      t.equal(beforeFlush, 0, "short text waits in the buffer until the flush")
      return { outputs: h.outputs, end, debits: h.debits }
    }))
  t.same(tags(outputs), ["Audio", "FlushDone", "Final"])
  const audio = outputs[0] as Extract<SessionOutput, { _tag: "Audio" }>
  t.equal(audio.text, "Tere. ", "the chunk as the client sent it")
  t.equal(audio.lead, 0)
  t.same([...audio.audio], [...int16ToBytesLE(fakePcm("Tere."))], "the synthesized (trimmed) text's audio, s16le")
  t.equal(audio.durationMs, (50 * 1000) / RATE)
  t.same(debits, [5], "one credit per character synthesized")
  t.same(end, { kind: "Normal", reason: "end of stream" })
})

t.test("cancel mid-stream: the running synthesis is interrupted, nothing of it is sent or debited, its flush is done, the cancel is acknowledged", async (t) => {
  let calls = 0
  let interrupted = false
  const started = Effect.runSync(Deferred.make<void>())
  const { outputs, end, debits } = await withSession({
    mode: "single",
    synthesize: (r) =>
      ++calls === 1
        ? Effect.andThen(Deferred.succeed(started, undefined), Effect.never).pipe(Effect.onInterrupt(() => Effect.sync(() => (interrupted = true))))
        : Effect.succeed(fakeOutput(r))
  }, (h) =>
    Effect.gen(function*() {
      yield* h.send({ text: "See lause ei jõua kunagi kuulajani. ", flush: true })
      yield* Deferred.await(started)
      yield* h.send({ cancel: true })
      yield* h.send({ text: "Uus. ", flush: true })
      yield* h.send({ text: "" })
      return { outputs: h.outputs, end: yield* Deferred.await(h.ended), debits: h.debits }
    }))
  t.ok(interrupted, "the synthesis in flight was interrupted")
  // Issue 38: the flush before the cancel lost its flushDone; a client waiting for it hung.
  t.same(tags(outputs), ["FlushDone", "Cancelled", "Audio", "FlushDone", "Final"], "no audio of the cancelled speech; its flush is done, then the ack")
  t.equal((outputs[2] as Extract<SessionOutput, { _tag: "Audio" }>).text, "Uus. ")
  t.same(debits, [4], "only the speech delivered is debited")
  t.same(end, { kind: "Normal", reason: "end of stream" })
})

t.test("cancel with flushes pending (multi): every flush of the context gets its flushDone before the ack; other contexts go on", async (t) => {
  const started = Effect.runSync(Deferred.make<void>())
  const outputs = await withSession({
    mode: "multi",
    synthesize: (r) => (r.text.startsWith("Ei") ? Effect.andThen(Deferred.succeed(started, undefined), Effect.never) : Effect.succeed(fakeOutput(r)))
  }, (h) =>
    Effect.gen(function*() {
      yield* h.send({ contextId: "a", text: "Ei jõua kuulajani. ", flush: true })
      yield* Deferred.await(started)
      yield* h.send({ contextId: "a", text: "Ka see mitte. ", flush: true }) // queued behind the synthesis
      yield* h.send({ contextId: "b", text: "Teine. ", flush: true })
      yield* h.send({ contextId: "a", cancel: true })
      yield* h.send({ closeSocket: true })
      yield* Deferred.await(h.ended)
      return h.outputs
    }))
  const of = (id: string) => outputs.filter((o) => o.contextId === id).map((o) => o._tag)
  t.same(of("a"), ["FlushDone", "FlushDone", "Cancelled", "Final"], "both flushes done, then the ack; no audio of the cancelled speech")
  t.same(of("b"), ["Audio", "FlushDone", "Final"])
})

t.test("cancel while a flushDone waits for a client that is not reading: it is sent once, before the ack", async (t) => {
  const gate = Effect.runSync(Deferred.make<void>())
  const outputs = await withSession({ mode: "single", socketGate: Deferred.await(gate) }, (h) =>
    Effect.gen(function*() {
      yield* h.send({ flush: true }) // nothing buffered: the flushDone alone, held by the socket
      yield* h.send({ cancel: true })
      yield* Deferred.succeed(gate, undefined)
      yield* settle
      yield* h.send({ text: "" })
      yield* Deferred.await(h.ended)
      return h.outputs
    }))
  t.same(tags(outputs), ["FlushDone", "Cancelled", "Final"])
})

t.test("close_socket mid-stream (multi): audio in flight is still delivered, then isFinal per context and a normal close", async (t) => {
  const started = Effect.runSync(Deferred.make<void>())
  const gate = Effect.runSync(Deferred.make<void>())
  const { outputs, end, endedEarly } = await withSession({
    mode: "multi",
    synthesize: (r) => Effect.andThen(Deferred.succeed(started, undefined), Effect.as(Deferred.await(gate), fakeOutput(r)))
  }, (h) =>
    Effect.gen(function*() {
      yield* h.send({ contextId: "a", text: "Tere. " })
      yield* h.send({ closeSocket: true })
      yield* Deferred.await(started)
      const endedEarly = yield* Deferred.isDone(h.ended)
      yield* Deferred.succeed(gate, undefined)
      return { outputs: h.outputs, end: yield* Deferred.await(h.ended), endedEarly }
    }))
  t.notOk(endedEarly, "the session waits for the synthesis in flight")
  t.same(outputs.map((o) => [o._tag, o.contextId]), [["Audio", "a"], ["Final", "a"]])
  t.same(end, { kind: "Normal", reason: "close_socket" })
})

t.test("idle timeout: closed after idleTimeoutMs without a message, on the test clock; a message restarts the wait", async (t) => {
  const result = await withSession({ mode: "single", idleTimeoutMs: 20_000 }, (h) =>
    Effect.gen(function*() {
      yield* TestClock.adjust("10 seconds")
      yield* h.send({ text: " " }) // a keep-alive at 10 s
      yield* TestClock.adjust("19 seconds")
      yield* settle
      const at29 = yield* Deferred.isDone(h.ended)
      yield* TestClock.adjust("1 second")
      yield* settle
      const at30 = yield* Deferred.isDone(h.ended)
      return { at29, at30, outputs: h.outputs, end: at30 ? yield* Deferred.await(h.ended) : undefined }
    }))
  t.notOk(result.at29, "still open 19 s after the last message")
  t.ok(result.at30, "closed 20 s after the last message")
  t.same(result.outputs, [{ _tag: "Error", code: "idle_timeout", message: "no frame for 20 s; the session is closed", contextId: undefined }])
  t.same(result.end, { kind: "Failure", reason: "idle timeout" })
})

t.test("idle timeout: time spent synthesizing is not idleness", async (t) => {
  const started = Effect.runSync(Deferred.make<void>())
  const result = await withSession({
    mode: "single",
    idleTimeoutMs: 20_000,
    synthesize: () => Effect.andThen(Deferred.succeed(started, undefined), Effect.never)
  }, (h) =>
    Effect.gen(function*() {
      yield* h.send({ text: "Pikk süntees, mis ei lõpe kunagi ära. ", flush: true })
      yield* Deferred.await(started)
      for (let i = 0; i < 60; i++) {
        yield* TestClock.adjust("1 second")
        yield* settle
      }
      return { ended: yield* Deferred.isDone(h.ended), outputs: h.outputs }
    }))
  t.notOk(result.ended, "open after 60 s of one synthesis")
  t.same(result.outputs, [])
})
