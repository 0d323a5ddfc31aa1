/**
 * Paying before decoding (actors/Transcription.ts) with a real ffmpeg and a real database: a
 * caller who cannot pay for the duration a file declares is refused before ffmpeg decodes
 * anything; a file whose header understates its length is stopped once its decoded audio
 * outgrows what the caller can pay; a caller who can pay is charged the real duration; and the
 * ledger always adds up (its sum = balance + open reservations). Decoded audio is counted by a
 * decoder that wraps the real one and meters the samples ffmpeg produced, so the assertions are
 * about work done, never about time.
 */
import { Effect, Exit, Layer } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import t from "tap"
import { Transcriber, TranscriberLive } from "../../actors/Transcription.ts"
import { PoolRecognizer } from "../../engines/asr/Recognizer.ts"
import { FfmpegMediaDecoder, MediaDecoder } from "../../engines/media/MediaDecoderService.ts"
import { WorkerPool } from "../../runtime/WorkerPool.ts"
import { Credits, type Reservation } from "../../storage/Credits.ts"
import { Users } from "../../storage/Users.ts"
import { accountLayers } from "../support/accounts.ts"
import { useTestDatabaseWith } from "../support/database.ts"
import { ffmpeg, scratchDir } from "../engines/asr/speechFixtures.ts"

const RATE = 16000
const dir = scratchDir(t, "speech-stt-prepay-")

// 60 s of tone as mp3; its LAME "Info" header counts the frames, which is where ffmpeg reads the
// duration. The liar is the same file with the count set to 10 frames (ffmpeg: 0.36 s).
const honest = path.join(dir, "honest-60s.mp3")
ffmpeg(["-f", "lavfi", "-i", "sine=frequency=300:duration=60", "-ar", "16000", "-ac", "1", "-b:a", "32k", honest])
const liar = path.join(dir, "liar-60s.mp3")
{
  const bytes = fs.readFileSync(honest)
  const at = [bytes.indexOf("Xing"), bytes.indexOf("Info")].find((i) => i >= 0 && i < 4096)
  if (at === undefined) throw new Error("the encoder wrote no Xing/Info header")
  bytes.writeUInt32BE(10, at + 8) // flags at +4 (frames present), frame count at +8
  fs.writeFileSync(liar, bytes)
}

/** The real decoder, metering what it decodes: samples of the last decode, and decodes started. */
const meter = { samples: 0, decodes: 0 }
const metered = Layer.effect(MediaDecoder, Effect.gen(function*() {
  const real = yield* MediaDecoder
  return MediaDecoder.of({
    ...real,
    decodeToFile: (file, spill, options = {}) =>
      Effect.suspend(() => {
        meter.samples = 0
        meter.decodes++
        return real.decodeToFile(file, spill, {
          ...options,
          onSamples: (n) => {
            meter.samples = n
            options.onSamples?.(n)
          }
        })
      })
  })
})).pipe(Layer.provide(FfmpegMediaDecoder.layer))

const transcriber = TranscriberLive({ concurrency: 1, maxConcurrentDecodes: 1, tmpDir: path.join(dir, "tmp") }).pipe(
  Layer.provideMerge(Layer.mergeAll(
    Layer.merge(PoolRecognizer.layer, metered).pipe(Layer.provide(WorkerPool.layer({ workers: 1, maxQueue: 8 }))),
    accountLayers()
  ))
)
const db = useTestDatabaseWith(t, transcriber)

const reasonOf = <A, E>(exit: Exit.Exit<A, E>): string | undefined => {
  if (Exit.isSuccess(exit)) return undefined
  const failure = exit.cause.reasons.find((r) => r._tag === "Fail") as { error?: { reason?: string } } | undefined
  return failure?.error?.reason ?? "not a failure"
}
const newUser = (credits: number) => db.run(Effect.flatMap(Effect.service(Users), (u) => u.createUser({ name: `u${credits}`, credits }))).then((u) => u.userId)
const transcribe = (file: string, userId: string) =>
  db.run(Effect.exit(Effect.flatMap(Effect.service(Transcriber), (s) => s.transcribeFile(file, { diarize: false, userId }))))
/** [balance, reserved, ledger sum]: the ledger invariant is sum = balance + reserved. */
const books = (userId: string) =>
  db.run(Effect.gen(function*() {
    const credits = yield* Credits
    const ledger = yield* credits.ledger(userId, { limit: 500 })
    return [yield* (yield* Users).balance(userId), yield* credits.reserved(userId), ledger.reduce((s, e) => s + e.amount, 0)] as const
  }))

t.test("a caller who cannot pay the declared duration is refused before anything is decoded", async (t) => {
  const user = await newUser(10)
  const decodesBefore = meter.decodes
  meter.samples = 0
  const exit = await transcribe(honest, user)
  t.equal(reasonOf(exit), "InsufficientCredits", "402 for a 60 s file with 10 credits")
  t.equal(meter.decodes - decodesBefore, 0, "ffmpeg never started decoding")
  t.equal(meter.samples, 0, "no audio decoded")
  t.same(await books(user), [10, 0, 10], "nothing charged or held; the ledger adds up")
})

t.test("a header that understates the length is cut off when the audio outgrows the balance", async (t) => {
  const user = await newUser(10)
  const exit = await transcribe(liar, user)
  t.equal(reasonOf(exit), "InsufficientCredits", "402 for a 60 s file declaring 0.36 s, with 10 credits")
  t.ok(meter.samples > 0, `the decode ran (${(meter.samples / RATE).toFixed(1)} s decoded)`)
  // Checked once per ~1 s chunk: at most one chunk (and a partial one) past the 10 s paid for.
  t.ok(meter.samples <= 12 * RATE, `stopped within ~1 s of the 10 s the balance pays for, not at 60 s (${(meter.samples / RATE).toFixed(1)} s)`)
  t.same(await books(user), [10, 0, 10], "nothing charged or held; the ledger adds up")
})

t.test("a caller who can pay is charged the real duration, whatever the header said", async (t) => {
  const user = await newUser(100)
  const exit = await transcribe(liar, user)
  t.ok(Exit.isSuccess(exit), "transcribed")
  if (Exit.isSuccess(exit)) t.equal(Math.round(exit.value.durationMs / 1000), 60, "60 s of audio")
  t.same(await books(user), [40, 0, 40], "charged 60 credits for 60 s, not the declared 1; the ledger adds up")
})

t.test("a reservation handed over (a job's) stays held for its holder to settle", async (t) => {
  const user = await newUser(100)
  let held: Reservation | undefined
  const exit = await db.run(Effect.exit(Effect.flatMap(Effect.service(Transcriber), (s) =>
    s.transcribeFile(honest, { diarize: false, userId: user, origin: { purpose: "stt_job", reference: "job_test" }, holdReservation: (r) => void (held = r) }))))
  t.ok(Exit.isSuccess(exit), "transcribed")
  t.equal(held?.amount, 60, "the holder has the reservation, grown or shrunk to the real duration")
  t.same(await books(user), [40, 60, 100], "held, not charged, by the transcriber")
  const charged = await db.run(Effect.flatMap(Effect.service(Credits), (c) => c.settle(held!, 60)))
  t.equal(charged, 60, "the holder settles it")
  t.same(await books(user), [40, 0, 40], "the ledger adds up")
})
