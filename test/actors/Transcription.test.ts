/**
 * The transcriber (actors/Transcription.ts) with fake engines and the real Users and Credits services on a test
 * database: no ffmpeg, no worker pool. The fake decoder "decodes" any file into 2.5 s of PCM in
 * the spill file; the fake recognizer finds one segment and answers words, fails, or never
 * answers. What is checked is the money: one credit per started second charged on success (3
 * for 2.5 s), the reservation grown to that before recognition, everything given back on an
 * engine failure, a busy pool, or an interrupted request.
 */
import { Deferred, Effect, Exit, Fiber, Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import t from "tap"
import { Transcriber, TranscriberLive } from "../../actors/Transcription.ts"
import { Recognizer } from "../../engines/asr/Recognizer.ts"
import type { RecognizeOutput } from "../../engines/asr/tasks.ts"
import { TranscriptionError } from "../../engines/asr/TranscriptionError.ts"
import { EngineError } from "../../engines/Inference.ts"
import { FfmpegMediaDecoder, MediaDecoder } from "../../engines/media/MediaDecoderService.ts"
import { Credits } from "../../storage/Credits.ts"
import { Users } from "../../storage/Users.ts"
import { accountLayers } from "../support/accounts.ts"
import { useTestDatabaseWith } from "../support/database.ts"

const SAMPLES = 40_000 // 2.5 s at 16 kHz: three started seconds
const reasonOf = <A, E>(exit: Exit.Exit<A, E>): string | undefined => {
  if (Exit.isSuccess(exit)) return undefined
  const failure = exit.cause.reasons.find((r) => r._tag === "Fail") as { error?: { reason?: string } } | undefined
  return failure?.error?.reason ?? "not a failure"
}

/** What the fake recognizer does with the one segment it finds. */
type Outcome = "words" | "engine fails" | "pool busy" | "hangs"

t.test("transcription credits with fake engines", async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "speech-stt-fake-"))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  let outcome: Outcome = "words"
  let userId = ""
  /** Set by the fake recognizer: the user's reserved credits while it recognises. */
  let reservedDuringRecognition: number | undefined
  let recognising: Deferred.Deferred<void> | undefined

  const decoder = MediaDecoder.of({
    decodeMedia: () => Effect.die("the transcriber decodes to a file"),
    decodeToFile: (_file, spillFile) =>
      Effect.sync(() => {
        const pcm = Int16Array.from({ length: SAMPLES }, (_, i) => Math.round(4000 * Math.sin(i / 10)))
        fs.writeFileSync(spillFile, new Uint8Array(pcm.buffer))
        return { container: "wav", samples: SAMPLES, warnings: [], decodeMs: 1, file: spillFile, durationMs: (SAMPLES * 1000) / 16000, largestChunkBytes: 32_000 }
      }),
    // Reading the spill back is plain file I/O: the real one.
    readSamples: FfmpegMediaDecoder.make.readSamples,
    // No declared duration: the minimum is reserved before decoding, as for a headerless file.
    probeDurationMs: () => Effect.succeed(undefined)
  })
  // The fake recognizer reads the user's reservation through the transcriber's own Credits.
  const recognizer = Layer.effect(Recognizer, Effect.map(Credits, (credits) =>
    Recognizer.of({
      findSpeech: (audio) => Effect.succeed(audio.samples > 0 ? [{ startMs: 0, endMs: 2000 }] : []),
      recognize: (audio, segments) =>
        Effect.gen(function*() {
          reservedDuringRecognition = yield* Effect.orDie(credits.reserved(userId))
          const pcm = yield* audio.read(0, 32_000)
          if (pcm.length !== 32_000) return yield* Effect.die(`read ${pcm.length} samples back from the spill`)
          if (recognising !== undefined) yield* Deferred.succeed(recognising, undefined)
          switch (outcome) {
            case "engine fails":
              return yield* new TranscriptionError({ reason: "EngineFailed", message: "the fake recognizer failed" })
            case "pool busy":
              return yield* new EngineError({ reason: "QueueFull", kind: "asr.recognize", message: "too many tasks waiting" })
            case "hangs":
              return yield* Effect.never
            case "words":
              return segments.map((): RecognizeOutput => ({
                language: "en",
                words: [{ text: "hello", startMs: 100, endMs: 600, confidence: 0.9, logprob: -0.1 }],
                durationMs: 2000,
                engineMs: 1
              }))
          }
        })
    })))

  const transcriber = TranscriberLive({ concurrency: 1, maxConcurrentDecodes: 1, tmpDir: path.join(dir, "tmp") }).pipe(
    Layer.provideMerge(Layer.merge(Layer.succeed(MediaDecoder, decoder), recognizer.pipe(Layer.provideMerge(accountLayers()))))
  )
  const db = useTestDatabaseWith(t, transcriber)
  const upload = path.join(dir, "upload.bin")
  fs.writeFileSync(upload, "the fake decoder never reads this")

  const transcribe = () =>
    db.run(Effect.exit(Effect.flatMap(Effect.service(Transcriber), (s) => s.transcribeFile(upload, { diarize: false, userId }))))
  const credits = () =>
    db.run(Effect.flatMap(Effect.all([Effect.service(Users), Effect.service(Credits)]), ([users, credits]) => Effect.all([users.balance(userId), credits.reserved(userId)])))
  const newUser = async (credits: number) => {
    userId = (await db.run(Effect.flatMap(Effect.service(Users), (u) => u.createUser({ name: `u${credits}`, credits })))).userId
    reservedDuringRecognition = undefined
  }

  await t.test("success: three started seconds charged, nothing left reserved", async (t) => {
    await newUser(10)
    outcome = "words"
    const exit = await transcribe()
    t.ok(Exit.isSuccess(exit), "transcribed")
    if (Exit.isSuccess(exit)) {
      t.same(exit.value.words.map((w) => w.text), ["hello"])
      t.equal(exit.value.language, "en")
      t.equal(exit.value.durationMs, 2500)
    }
    t.equal(reservedDuringRecognition, 3, "the reservation grew to the decoded duration before recognition")
    t.same(await credits(), [7, 0], "3 credits charged, none held")
  })

  await t.test("an engine failure gives every credit back", async (t) => {
    await newUser(10)
    outcome = "engine fails"
    const exit = await transcribe()
    t.equal(reasonOf(exit), "EngineFailed", "the recognizer's typed error reaches the caller")
    t.equal(reservedDuringRecognition, 3, "credits were held while it ran")
    t.same(await credits(), [10, 0], "nothing charged, nothing held")
  })

  await t.test("a busy pool (503) gives every credit back", async (t) => {
    await newUser(10)
    outcome = "pool busy"
    const exit = await transcribe()
    t.equal(reasonOf(exit), "QueueFull", "EngineError QueueFull passes through for the 503")
    t.same(await credits(), [10, 0])
  })

  await t.test("an interrupted transcription (client gone) gives every credit back", async (t) => {
    await newUser(10)
    outcome = "hangs"
    const started = await db.run(Deferred.make<void>())
    recognising = started
    const fiber = await db.run(Effect.forkDetach(Effect.flatMap(Effect.service(Transcriber), (s) => s.transcribeFile(upload, { diarize: false, userId }))))
    await db.run(Deferred.await(started))
    t.same(await credits(), [7, 3], "held while recognising (the balance shows what is free)")
    await db.run(Fiber.interrupt(fiber))
    recognising = undefined
    t.same(await credits(), [10, 0], "given back on interruption")
  })

  await t.test("an account short of the decoded duration is refused before recognition", async (t) => {
    await newUser(2)
    outcome = "words"
    const exit = await transcribe()
    t.equal(reasonOf(exit), "InsufficientCredits")
    t.equal(reservedDuringRecognition, undefined, "the recognizer never ran")
    t.same(await credits(), [2, 0])
  })

  await t.test("no spill file is left behind", async (t) => {
    t.same(fs.readdirSync(path.join(dir, "tmp")), [])
  })
})
