/**
 * Credits of a transcription (actors/Transcription.ts) against a real database and a real
 * decoder: an empty account is refused before any decoding, and nothing stays reserved
 * whatever the outcome.
 */
import { Effect, Exit, Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import t from "tap"
import { Transcriber, TranscriberLive } from "../../actors/Transcription.ts"
import { WorkerPool } from "../../runtime/WorkerPool.ts"
import { Credits } from "../../storage/Credits.ts"
import { Users } from "../../storage/Users.ts"
import { accountLayers } from "../support/accounts.ts"
import { PoolRecognizer } from "../../engines/asr/Recognizer.ts"
import { FfmpegMediaDecoder } from "../../engines/media/MediaDecoderService.ts"
import { useTestDatabaseWith } from "../support/database.ts"

const reasonOf = <A, E>(exit: Exit.Exit<A, E>): string | undefined => {
  if (Exit.isSuccess(exit)) return undefined
  const failure = exit.cause.reasons.find((r) => r._tag === "Fail") as { error?: { reason?: string } } | undefined
  return failure?.error?.reason ?? "not a failure"
}

t.test("transcription credits", async (t) => {
  const accounts = accountLayers()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "speech-stt-credits-"))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const transcriber = TranscriberLive({ concurrency: 1, maxConcurrentDecodes: 1, tmpDir: path.join(dir, "tmp") }).pipe(
    Layer.provideMerge(Layer.mergeAll(
      Layer.merge(PoolRecognizer.layer, FfmpegMediaDecoder.layer).pipe(Layer.provide(WorkerPool.layer({ workers: 1, maxQueue: 8 }))),
      accounts
    ))
  )
  const db = useTestDatabaseWith(t, transcriber)
  // Not media at all: decoding it fails (invalid media), so the reason tells which check ran first.
  const junk = path.join(dir, "junk.bin")
  fs.writeFileSync(junk, Buffer.alloc(4096, 7))

  const transcribe = (userId: string) =>
    db.run(Effect.exit(Effect.flatMap(Effect.service(Transcriber), (s) => s.transcribeFile(junk, { diarize: false, userId }))))
  const credits = (userId: string) =>
    db.run(Effect.flatMap(Effect.all([Effect.service(Users), Effect.service(Credits)]), ([users, credits]) => Effect.all([users.balance(userId), credits.reserved(userId)])))

  const broke = await db.run(Effect.flatMap(Effect.service(Users), (a) => a.createUser({ name: "broke", credits: 0 })))
  t.equal(reasonOf(await transcribe(broke.userId)), "InsufficientCredits", "an empty account is refused before decoding")

  const payer = await db.run(Effect.flatMap(Effect.service(Users), (a) => a.createUser({ name: "payer", credits: 5 })))
  const failed = await transcribe(payer.userId)
  t.not(reasonOf(failed), "InsufficientCredits", "with credits, the file is decoded (and refused as media)")
  t.same(await credits(payer.userId), [5, 0], "a failed transcription costs nothing and holds nothing")
})
