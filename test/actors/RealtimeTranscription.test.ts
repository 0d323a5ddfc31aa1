/**
 * The realtime transcription actor with a recognizer that fails the way a crashed worker thread
 * fails it (its `done` fails with TranscriptionError EngineFailed): the session ends with
 * `transcriber_error`, the audio accepted before it is charged (started seconds), and the
 * ledger holds (sum = balance + reserved).
 */
import { Effect, Layer } from "effect"
import t from "tap"
import type { AudioChunk } from "../../actors/RealtimeMessages.ts"
import { runRealtimeTranscription } from "../../actors/RealtimeTranscription.ts"
import { StreamingRecognizer } from "../../engines/asr/StreamingRecognizer.ts"
import { TranscriptionError } from "../../engines/asr/TranscriptionError.ts"
import { Inference } from "../../engines/Inference.ts"
import { realtimeConfig } from "../../protocol/ws/SttRealtimeFrames.ts"
import { Credits } from "../../storage/Credits.ts"
import { Users } from "../../storage/Users.ts"
import { accountLayers } from "../support/accounts.ts"
import { useTestDatabaseWith } from "../support/database.ts"

/** A recognizer whose thread "dies" on the `crashAfter`-th push. */
const crashingRecognizer = (crashAfter: number) =>
  Layer.succeed(StreamingRecognizer, StreamingRecognizer.of({
    open: () =>
      Effect.sync(() => {
        let pushes = 0
        let crash: () => void = () => {}
        const crashed = new Promise<void>((resolve) => (crash = resolve))
        return {
          threadId: 1,
          push: () =>
            Effect.sync(() => {
              if (++pushes === crashAfter) crash()
            }),
          commit: Effect.succeed({ language: "en", text: "", words: [], startMs: 0, endMs: 0 }),
          prepare: Effect.void,
          commitPrepared: Effect.succeed({ language: "en", text: "", words: [], startMs: 0, endMs: 0 }),
          reset: Effect.void,
          stats: Effect.never,
          done: Effect.andThen(Effect.promise(() => crashed), Effect.fail(new TranscriptionError({ reason: "EngineFailed", message: "the recognition engine's worker thread failed" })))
        }
      })
  }))

const db = useTestDatabaseWith(t, accountLayers())

const chunkOf = (ms: number): AudioChunk => ({ audio: new Uint8Array(ms * 32), audioMs: ms, commit: false, previousText: undefined })

/** An inbox that hands out `chunks` and then waits forever (a client that went quiet). */
const inboxOf = (chunks: Array<AudioChunk>) => ({
  peek: Effect.suspend(() => (chunks.length > 0 ? Effect.succeed(chunks[0]!) : Effect.never)),
  drop: () => void chunks.shift(),
  unread: () => [...chunks]
})

const run = (userId: string, chunks: Array<AudioChunk>, crashAfter: number) => {
  const sent: Array<string> = []
  const session = runRealtimeTranscription({
    config: realtimeConfig(new URLSearchParams("model_id=m")),
    sessionId: "s1",
    userId,
    socket: { send: (m) => void sent.push(m.message_type), sendPartial: () => {} },
    inbox: inboxOf(chunks),
    maxSessionMs: 3_600_000,
    maxUtteranceMs: 20_000
  }).pipe(
    Effect.flip,
    Effect.provide(crashingRecognizer(crashAfter)),
    // The VAD is not used in manual mode; the pool is never called.
    Effect.provideService(Inference, {} as Inference["Service"])
  )
  return db.run(Effect.map(session, (refusal) => ({ refusal, sent })))
}

const books = (userId: string) =>
  db.run(Effect.gen(function*() {
    const credits = yield* Credits
    const ledger = yield* credits.ledger(userId, { limit: 500 })
    return { balance: yield* (yield* Users).balance(userId), reserved: yield* credits.reserved(userId), sum: ledger.reduce((s, e) => s + e.amount, 0) }
  }))

const newUser = (credits: number) => db.run(Effect.flatMap(Effect.service(Users), (u) => u.createUser({ name: "rt", credits }))).then((u) => u.userId)

t.test("a crashed recognizer thread: transcriber_error, the received audio charged, the ledger holds", async (t) => {
  const userId = await newUser(100)
  const { refusal, sent } = await run(userId, [chunkOf(700), chunkOf(700), chunkOf(700)], 2)
  t.equal(refusal.type, "transcriber_error")
  t.same(sent, ["session_started"], "nothing but the start before the failure")
  const b = await books(userId)
  t.ok(b.balance === 98 || b.balance === 97, `charged the started seconds of the audio accepted (1.4 or 2.1 s): ${100 - b.balance}`)
  t.equal(b.reserved, 0, "no reservation left")
  t.equal(b.sum, b.balance + b.reserved, "ledger sum = balance + reserved")
})
