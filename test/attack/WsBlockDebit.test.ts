/**
 * Attack on block streaming over the WebSocket (actors/TtsSession.ts `deliver`): a chunk is
 * debited "as its audio is sent", but its first block is held back until the next block arrives
 * (the last frame must carry the alignment). The debit used to be taken when the first block
 * ARRIVED, so a cancel (or a client gone, or a failed synthesis) between that block and the next
 * charged the whole chunk while not one frame of it had been sent.
 *
 * Measured against a real server (espeak, 231-character chunk, cancel sent 0-120 ms after the
 * flush in 3 ms steps): 1 of 41 cancels charged 235 credits with no audio frame before the ack.
 * The window is the time the engine takes to make the second piece (0.5 s of audio), longer on a
 * loaded pool; here it is held open with a synthesis that makes one block and then waits.
 *
 * Moving the debit to the first frame was not enough: the same sweep still charged 7 of 121
 * cancels with no frame, the cancel landing during (or right after) the debit's database round
 * trip. The last test holds that round trip open; actors/ChunkCharge.ts is the fix.
 */
import { Deferred, Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import t from "tap"
import { request, settle, type SessionHarness, withRecordingSession } from "../support/ttsSession.ts"
import { SpeechError } from "../../engines/tts/SpeechError.ts"
import type { SynthesisRequest } from "../../actors/Synthesizer.ts"
import type { SessionOutput } from "../../actors/TtsSessionMessages.ts"
import type { SynthesizeSummary } from "../../engines/tts/tasks.ts"

const RATE = 24000
/** A streamed synthesis: `blocks` blocks of 240 samples handed over, then `after` decides the end. */
type Streamer = (r: SynthesisRequest, onBlock: (pcm: Int16Array) => void) => Effect.Effect<SynthesizeSummary, SpeechError>

const summary = (samples: number): SynthesizeSummary => ({ sampleRate: RATE, samples, engineSampleRate: RATE, words: [], engineMs: 0 })

const withSession = <A>(
  streamer: Streamer,
  debit: (amount: number) => Effect.Effect<number, unknown>,
  body: (h: SessionHarness) => Effect.Effect<A>,
  idleTimeoutMs = 20_000,
  /** What `Credits.covers` answers: true takes the early path (frame first, then the debit). */
  covers = false
): Promise<A> =>
  withRecordingSession({
    mode: "single",
    idleTimeoutMs,
    synthesizeStream: streamer,
    // A refund is recorded as a negative debit, so the sum of `debits` is what the account paid.
    credits: { debit: (_u, amount) => debit(amount) as Effect.Effect<number, never>, refund: (_u, amount) => debit(-amount) as Effect.Effect<number, never>, covers: () => covers },
    describe: (failure) => ({ code: String((failure as { reason?: unknown }).reason ?? "failed"), message: "x" })
  }, body)

const tags = (outputs: ReadonlyArray<SessionOutput>) => outputs.map((o) => o._tag)
const block = () => new Int16Array(240).fill(7)

/** First block now, then nothing until interrupted (or `gate`), then a second block and the end. */
const oneBlockThenWait = (gate?: Deferred.Deferred<void>): Streamer => (_r, onBlock) =>
  Effect.gen(function*() {
    onBlock(block())
    if (gate === undefined) return yield* Effect.never
    yield* Deferred.await(gate)
    onBlock(block())
    return summary(480)
  })

t.test("cancel after the chunk's first block was made but before any frame of it was sent: nothing is debited", async (t) => {
  const debits: Array<number> = []
  const outputs = await withSession(oneBlockThenWait(), (n) => Effect.sync(() => debits.push(n)), (h) =>
    Effect.gen(function*() {
      yield* h.send({ text: " " })
      yield* h.send({ text: "See lause ei jõua kunagi kuulajani.", flush: true })
      const audioBeforeCancel = h.outputs.filter((o) => o._tag === "Audio" || o._tag === "AudioBlock").length
      t.equal(audioBeforeCancel, 0, "no frame of the chunk has been sent (its first block is held)")
      yield* h.send({ cancel: true })
      return h.outputs
    }))
  t.same(tags(outputs), ["FlushDone", "Cancelled"], "only the flush's flushDone (issue 38) and the cancel's ack")
  t.same(debits, [], "cancelled speech of which no frame was sent costs nothing (README: debited as its audio is sent)")
})

t.test("a chunk of several blocks: one debit, before its first frame; the last frame carries the audio's end", async (t) => {
  const gate = Effect.runSync(Deferred.make<void>())
  const events: Array<string> = []
  const outputs = await withSession(oneBlockThenWait(gate), (n) => Effect.sync(() => events.push(`debit ${n}`)), (h) =>
    Effect.gen(function*() {
      yield* h.send({ text: " " })
      yield* h.send({ text: "Tere hommikust.", flush: true })
      events.push(`frames ${h.outputs.length}`)
      yield* Deferred.succeed(gate, undefined)
      yield* settle
      events.push(`frames ${h.outputs.length}`)
      return h.outputs
    }))
  t.same(tags(outputs), ["AudioBlock", "Audio", "FlushDone"])
  t.same(events, ["frames 0", "debit 15", "frames 3"], "debited once, when the first frame was about to go")
})

t.test("a one-block chunk is debited before its only frame; an account that cannot pay gets quota_exceeded and no audio", async (t) => {
  const oneBlock: Streamer = (_r, onBlock) => Effect.sync(() => (onBlock(block()), summary(240)))
  const debits: Array<number> = []
  const ok = await withSession(oneBlock, (n) => Effect.sync(() => debits.push(n)), (h) =>
    Effect.gen(function*() {
      yield* h.send({ text: "Tere.", flush: true })
      return h.outputs
    }))
  t.same(tags(ok), ["Audio", "FlushDone"])
  t.same(debits, [5])
  const poor = await withSession(oneBlock, () => Effect.fail({ reason: "InsufficientCredits" }), (h) =>
    Effect.gen(function*() {
      yield* h.send({ text: "Tere.", flush: true })
      return { outputs: h.outputs, end: yield* Deferred.await(h.ended) }
    }))
  t.same(tags(poor.outputs), ["Error"], "the error, no audio of the chunk it cannot pay")
  t.equal(poor.end.kind, "Violation")
})

t.test("a synthesis that fails after its first block: the chunk is not debited (none of it was sent)", async (t) => {
  const failing: Streamer = (_r, onBlock) =>
    Effect.andThen(Effect.sync(() => onBlock(block())), Effect.fail(new SpeechError({ reason: "EngineFailed", message: "boom" })))
  const debits: Array<number> = []
  const result = await withSession(failing, (n) => Effect.sync(() => debits.push(n)), (h) =>
    Effect.gen(function*() {
      yield* h.send({ text: "Tere hommikust.", flush: true })
      return { outputs: h.outputs, end: yield* Deferred.await(h.ended) }
    }))
  t.same(tags(result.outputs), ["Error"])
  t.equal(result.end.kind, "Failure")
  t.same(debits, [], "undelivered audio costs nothing")
})

t.test("cancel while the chunk's debit is in the database: the frame is not sent and the debit is given back", async (t) => {
  const inDatabase = Effect.runSync(Deferred.make<void>())
  const answered = Effect.runSync(Deferred.make<void>())
  const debits: Array<number> = []
  const debit = (n: number) =>
    n < 0 ? Effect.sync(() => debits.push(n)) : Effect.gen(function*() {
      yield* Deferred.succeed(inDatabase, undefined)
      yield* Deferred.await(answered) // the statement commits whatever happens to the caller
      return debits.push(n)
    }).pipe(Effect.uninterruptible)
  const twoBlocks: Streamer = (_r, onBlock) => Effect.sync(() => (onBlock(block()), onBlock(block()), summary(480)))
  const outputs = await withSession(twoBlocks, debit, (h) =>
    Effect.gen(function*() {
      yield* h.send({ text: " " })
      yield* h.send({ text: "Tere hommikust.", flush: true })
      yield* Deferred.await(inDatabase)
      const cancelled = yield* Effect.forkChild(h.send({ cancel: true }))
      yield* settle
      yield* Deferred.succeed(answered, undefined)
      yield* Fiber.join(cancelled)
      yield* settle
      return h.outputs
    }))
  t.same(tags(outputs), ["FlushDone", "Cancelled"], "no frame of the cancelled chunk (the flush is done, then the ack)")
  t.equal(debits.reduce((a, b) => a + b, 0), 0, "what was debited for it is given back")
})

// Found on a real server: after a sweep of 121 cancels sent 0-120 ms after a flush, a session with
// inactivity_timeout=3 was still open 15 s (and, with the default 60 s, 4 minutes) after its last
// frame. The producer counted the synthesis as running (`synthesizing++`) before a yield and a
// fork; a cancel landing in between interrupted it before the fiber that counts it down had
// started, so the session looked busy for ever and its idle timeout never fired.
t.test("cancel right after a flush, at every scheduling point: the idle timeout still closes the session", async (t) => {
  const stuck: Array<number> = []
  for (let yields = 0; yields < 12; yields++) {
    const streamer: Streamer = (_r, onBlock) => Effect.andThen(Effect.sync(() => onBlock(block())), Effect.never)
    const ended = await withSession(streamer, () => Effect.succeed(0), (h) =>
      Effect.gen(function*() {
        h.inbox.offer(request({ text: "Tere hommikust, kallis kuulaja.", flush: true }), 0)
        for (let i = 0; i < yields; i++) yield* Effect.yieldNow
        h.inbox.offer(request({ cancel: true }), 0)
        yield* settle
        for (let i = 0; i < 10; i++) {
          yield* TestClock.adjust("1 second")
          yield* settle
        }
        return yield* Deferred.isDone(h.ended)
      }), 3_000)
    if (!ended) stuck.push(yields)
  }
  t.same(stuck, [], "no session stays open for ever (listed: yields between flush and cancel)")
})

t.test("while the chunk's debit is in the database: no frame waits for it on the early path (balance heard to cover it), the first frame waits otherwise", async (t) => {
  const twoBlocksThenWait: Streamer = (_r, onBlock) => Effect.andThen(Effect.sync(() => (onBlock(block()), onBlock(block()))), Effect.never)
  for (const covers of [false, true]) {
    const answer = Effect.runSync(Deferred.make<void>())
    const debits: Array<number> = []
    const framesWhileDebiting = await withSession(twoBlocksThenWait, (n) => Effect.as(Effect.andThen(Deferred.await(answer), Effect.sync(() => debits.push(n))), 0), (h) =>
      Effect.gen(function*() {
        yield* h.send({ text: " " })
        yield* h.send({ text: "Tere hommikust.", flush: true })
        const frames = tags(h.outputs)
        yield* Deferred.succeed(answer, undefined)
        yield* settle
        return frames
      }), 20_000, covers)
    t.same(framesWhileDebiting, covers ? ["AudioBlock"] : [], `covers=${covers}: frames sent before the database answered`)
    t.same(debits, [15], `covers=${covers}: debited once`)
  }
})

t.test("early path refused (credits spent elsewhere meanwhile): the session ends with the error after that chunk, nothing more is sent or debited", async (t) => {
  const oneBlock: Streamer = (_r, onBlock) => Effect.sync(() => (onBlock(block()), summary(240)))
  let attempts = 0
  const result = await withSession(oneBlock, () => Effect.suspend(() => (attempts++, Effect.fail({ reason: "InsufficientCredits" }))), (h) =>
    Effect.gen(function*() {
      yield* h.send({ text: "Tere. ", flush: true })
      yield* h.send({ text: "Teine lause.", flush: true })
      return { outputs: h.outputs, end: yield* Deferred.await(h.ended) }
    }), 20_000, true)
  t.same(tags(result.outputs), ["Audio", "Error"], "the chunk that went early, then the error; no flushDone, no second chunk")
  t.equal(result.end.kind, "Violation")
  t.equal(attempts, 1)
})

t.test("early path refused in a chunk of several blocks: one frame goes out, then the error; the refusal is heard before the second frame", async (t) => {
  const threeBlocks: Streamer = (_r, onBlock) => Effect.sync(() => (onBlock(block()), onBlock(block()), onBlock(block()), summary(720)))
  const result = await withSession(threeBlocks, () => Effect.fail({ reason: "InsufficientCredits" }), (h) =>
    Effect.gen(function*() {
      yield* h.send({ text: "Tere hommikust, kallis sõber.", flush: true })
      return { outputs: h.outputs, end: yield* Deferred.await(h.ended) }
    }), 20_000, true)
  t.same(tags(result.outputs), ["AudioBlock", "Error"], "at most one frame (~100 ms of audio) of a chunk nobody pays for")
  t.equal(result.end.kind, "Violation")
})

t.test("early path with a cancel right after the first frame: the debit still completes (that frame was delivered)", async (t) => {
  const twoBlocksThenWait: Streamer = (_r, onBlock) => Effect.andThen(Effect.sync(() => (onBlock(block()), onBlock(block()))), Effect.never)
  const debits: Array<number> = []
  const outputs = await withSession(twoBlocksThenWait, (n) => Effect.sync(() => debits.push(n)), (h) =>
    Effect.gen(function*() {
      yield* h.send({ text: " " })
      yield* h.send({ text: "Tere hommikust.", flush: true })
      yield* h.send({ cancel: true })
      return h.outputs
    }), 20_000, true)
  t.same(tags(outputs), ["AudioBlock", "FlushDone", "Cancelled"], "the first block went out, the second was held when the cancel came")
  t.same(debits, [15], "the delivered frame is paid for")
})
