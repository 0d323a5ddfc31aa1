/**
 * The recognition-job actor (actors/RecognitionJobRunner.ts) with a fake transcriber on a real
 * database, real credits and a real blob store: what it commits for each outcome, in one
 * transaction (state, settlement, webhook delivery), and how it stops work it no longer owns
 * (cancel, a lease taken over by another instance, shutdown).
 */
import { Deferred, Effect, Exit, Layer, Scope } from "effect"
import { SqlClient } from "effect/sql/SqlClient"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import t from "tap"
import { JobRunner, JobRunnerLive } from "../../actors/RecognitionJobRunner.ts"
import { sttCredits } from "../../actors/CreditPolicy.ts"
import { Transcriber, type TranscribeOptions, type TranscriptionResult } from "../../actors/Transcription.ts"
import { TranscriptionError } from "../../engines/asr/TranscriptionError.ts"
import { toApiError } from "../../protocol/ApiError.ts"
import { BlobStore, localBlobStoreLayer } from "../../storage/BlobStore.ts"
import { Credits } from "../../storage/Credits.ts"
import { newJobId, RecognitionJobs, recognitionJobsLayer } from "../../storage/RecognitionJobs.ts"
import { savedSpeakersLayer } from "../../storage/SavedSpeakers.ts"
import { Users } from "../../storage/Users.ts"
import { accountLayers } from "../support/accounts.ts"
import { useTestDatabaseWith } from "../support/database.ts"

type Behaviour = (file: string, options: TranscribeOptions<unknown>) => Effect.Effect<TranscriptionResult, unknown>

const words = [{ text: "hello", startMs: 0, endMs: 400, confidence: 0.9 }, { text: "world", startMs: 500, endMs: 900, confidence: 0.9 }]
const result = (durationMs: number): TranscriptionResult => ({
  language: "en",
  languageDetected: true,
  words: words as never,
  durationMs,
  timings: { decodeMs: 1, vadMs: 1, asrMs: 1, diarizeMs: 0 },
  voiceprints: [],
  largestBufferBytes: 0
})

t.test("job runner", async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "speech-jobrunner-"))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  let behaviour: Behaviour = () => Effect.succeed(result(2500))
  const fakeTranscriber = Layer.succeed(Transcriber, Transcriber.of({
    requireCredit: () => Effect.void,
    transcribeFile: ((file: string, options: TranscribeOptions<unknown>) => behaviour(file, options)) as never
  }))
  const base = Layer.mergeAll(accountLayers({ instanceId: "ins_runner" }), recognitionJobsLayer, savedSpeakersLayer, localBlobStoreLayer(path.join(dir, "blobs")), fakeTranscriber)
  const db = useTestDatabaseWith(t, base)
  const services = await db.run(Effect.all({
    jobs: Effect.service(RecognitionJobs),
    blobs: Effect.service(BlobStore),
    users: Effect.service(Users),
    credits: Effect.service(Credits),
    sql: Effect.service(SqlClient)
  }))
  const { jobs, blobs, users, credits, sql } = services
  /**
   * What the real transcriber does for a billed job once it knows the length (it reserves before
   * decoding and resizes to the decoded length, actors/SttPrepay.ts): the reservation is taken
   * under the job's origin and handed to the runner, then `onDecoded`.
   */
  const paidAndDecoded = (durationMs: number, options: TranscribeOptions<unknown>) =>
    Effect.gen(function*() {
      if (options.userId !== null) {
        const reservation = yield* credits.reserve(options.userId, sttCredits(durationMs), options.origin)
        options.holdReservation?.(reservation)
      }
      yield* options.onDecoded?.(durationMs) ?? Effect.void
    })
  let deliveriesWritten = 0

  /** A runner of its own, in a scope the test closes (shutdown). */
  const startRunner = async (instanceId = "ins_runner") => {
    const scope = await Effect.runPromise(Scope.make())
    const ctx = await db.run(Layer.buildWithScope(JobRunnerLive({
      instanceId,
      concurrency: 2,
      leaseMs: 3000,
      pollMs: 50,
      maxClaims: 3,
      tmpDir: path.join(dir, "tmp"),
      anonJobMaxSeconds: 0,
      anonSecondsPerHour: 0,
      describeError: (e) => {
        const { error } = toApiError(e)
        return { code: error.code, message: error.message }
      },
      fetchSource: () => Effect.die("no URL jobs here"),
      deliveryWritten: Effect.sync(() => void deliveriesWritten++),
      matchThreshold: 0.86,
      enrollWindowMs: 0
    }), scope))
    const runner = ctx.mapUnsafe.get(JobRunner.key) as JobRunner["Service"]
    return { runner, close: () => Effect.runPromise(Scope.close(scope, Exit.void)) }
  }

  const submit = async (userId: string | null, webhookId: string | null = null) => {
    const id = newJobId()
    await db.run(blobs.put(`uploads/${id}`, new Uint8Array([1, 2, 3])))
    await db.run(jobs.reserve({ id, userId, clientAddress: null, filename: null, contentType: null, declaredBytes: null, maxBytes: 100, uploadKey: `uploads/${id}`, uploadExpiresAt: new Date(Date.now() + 60_000) }))
    await db.run(jobs.claimUpload(id, `uploads/${id}`, "put"))
    await db.run(jobs.markUploaded(id, "put", 3))
    await db.run(jobs.start(id, { options: { diarize: false, timestampsGranularity: "word", additionalFormats: [] }, webhookId, webhookMetadata: { ref: 7 } }))
    return id
  }
  const waitFor = async (what: string, ok: () => Promise<boolean>) => {
    for (let i = 0; i < 400; i++) {
      if (await ok()) return
      await new Promise((r) => setTimeout(r, 25))
    }
    throw new Error(`timed out waiting for ${what}`)
  }
  const stateOf = async (id: string) => (await db.run(jobs.get(id)))?.state
  const balance = (userId: string) => db.run(Effect.all([users.balance(userId), credits.reserved(userId)]))

  t.test("success: result stored, charged once per started second, upload removed, webhook queued in the same commit", async (t) => {
    const user = await db.run(users.createUser({ name: "payer", credits: 100 }))
    await db.run(sql`INSERT INTO webhooks (id, user_id, url, signing_secret) VALUES ('wh_t1', ${user.userId}, 'https://example.com/hook', 's')`)
    behaviour = (_file, options) => Effect.andThen(paidAndDecoded(2500, options), Effect.succeed(result(2500)))
    const { close } = await startRunner()
    t.teardown(close)
    const id = await submit(user.userId, "wh_t1")
    await waitFor("succeeded", async () => (await stateOf(id)) === "succeeded")
    const row = (await db.run(jobs.get(id)))!
    t.equal((row.result as { text: string }).text, "hello world")
    t.equal(row.claims, 1)
    t.same(await balance(user.userId), [97, 0], "3 credits for 2.5 s, nothing left reserved")
    const ledger = await db.run(sql<{ amount: string; reference: string }>`SELECT amount::text, reference FROM credit_ledger WHERE user_id = ${user.userId} AND kind = 'debit'`)
    t.same(ledger.map((r) => [Number(r.amount), r.reference]), [[-3, id]], "one debit, referencing the job")
    const deliveries = await db.run(sql<{ body: string }>`SELECT body FROM webhook_deliveries WHERE job_id = ${id}`)
    t.equal(deliveries.length, 1, "one delivery row")
    const event = JSON.parse(deliveries[0]!.body)
    t.equal(event.type, "speech_to_text_transcription")
    t.equal(event.data.state, "succeeded")
    t.equal(event.data.transcription.text, "hello world")
    t.same(event.data.webhook_metadata, { ref: 7 })
    t.ok(deliveriesWritten > 0, "the dispatcher was told")
    await waitFor("upload removed", async () => !(await db.run(blobs.exists(`uploads/${id}`))))
    await close()
  })

  t.test("failure: error recorded with its public code, credits given back", async (t) => {
    const user = await db.run(users.createUser({ name: "unlucky", credits: 100 }))
    behaviour = (_file, options) =>
      Effect.andThen(paidAndDecoded(4000, options), Effect.fail(new TranscriptionError({ reason: "Damaged", message: "broken frames" })))
    const { close } = await startRunner()
    t.teardown(close)
    const id = await submit(user.userId)
    await waitFor("failed", async () => (await stateOf(id)) === "failed")
    const row = (await db.run(jobs.get(id)))!
    t.equal(row.error_code, "invalid_media")
    t.equal(row.error_message, "broken frames")
    t.same(await balance(user.userId), [100, 0])
    await close()
  })

  t.test("a user who cannot pay for the decoded length: failed with quota_exceeded", async (t) => {
    const user = await db.run(users.createUser({ name: "poor", credits: 2 }))
    behaviour = (_file, options) => Effect.andThen(paidAndDecoded(10_000, options), Effect.succeed(result(10_000)))
    const { close } = await startRunner()
    t.teardown(close)
    const id = await submit(user.userId)
    await waitFor("failed", async () => (await stateOf(id)) === "failed")
    t.equal((await db.run(jobs.get(id)))?.error_code, "quota_exceeded")
    t.same(await balance(user.userId), [2, 0])
    await close()
  })

  t.test("a billed job is paid for before decoding: the transcriber bills the job's user under the job's origin", async (t) => {
    // The transcriber reserves before it decodes (TranscriptionPrepay.test.ts); the runner must
    // let it, rather than reserve itself once the whole file has been decoded.
    const user = await db.run(users.createUser({ name: "prepaid", credits: 100 }))
    let seen: { userId: string | null; origin: unknown; holds: boolean } | undefined
    behaviour = (_file, options) => {
      seen = { userId: options.userId, origin: options.origin, holds: options.holdReservation !== undefined }
      return Effect.andThen(paidAndDecoded(1000, options), Effect.succeed(result(1000)))
    }
    const { close } = await startRunner()
    t.teardown(close)
    const id = await submit(user.userId)
    await waitFor("succeeded", async () => (await stateOf(id)) === "succeeded")
    t.same(seen, { userId: user.userId, origin: { purpose: "stt_job", reference: id }, holds: true }, "billed to the job's user, handed to the runner")
    t.same(await balance(user.userId), [99, 0], "charged once, in the job's commit")
    await close()
  })

  t.test("cancel while running interrupts the work and gives the credits back", async (t) => {
    const user = await db.run(users.createUser({ name: "canceller", credits: 100 }))
    const interrupted = await Effect.runPromise(Deferred.make<void>())
    const decoded = await Effect.runPromise(Deferred.make<void>())
    behaviour = (_file, options) =>
      Effect.gen(function*() {
        yield* paidAndDecoded(5000, options)
        yield* Deferred.succeed(decoded, undefined)
        return yield* Effect.never
      }).pipe(Effect.onInterrupt(() => Deferred.succeed(interrupted, undefined)))
    const { runner, close } = await startRunner()
    t.teardown(close)
    const id = await submit(user.userId)
    await Effect.runPromise(Deferred.await(decoded))
    t.same(await balance(user.userId), [95, 5], "5 credits held while it runs")
    t.equal(await db.run(runner.cancel(id)), "running")
    await Effect.runPromise(Deferred.await(interrupted))
    await waitFor("credits back", async () => (await balance(user.userId))[1] === 0)
    t.same(await balance(user.userId), [100, 0])
    t.equal(await stateOf(id), "cancelled")
    t.equal(await db.run(runner.cancel(id)), undefined, "a second cancel finds it ended")
    await close()
  })

  t.test("a job taken over by another instance stops here and is not committed here", async (t) => {
    const interrupted = await Effect.runPromise(Deferred.make<void>())
    const running = await Effect.runPromise(Deferred.make<void>())
    behaviour = () =>
      Effect.andThen(Deferred.succeed(running, undefined), Effect.never).pipe(Effect.onInterrupt(() => Deferred.succeed(interrupted, undefined)))
    const { close } = await startRunner()
    t.teardown(close)
    const id = await submit(null)
    await Effect.runPromise(Deferred.await(running))
    await db.run(sql`UPDATE recognition_jobs SET claimed_by = 'ins_other' WHERE id = ${id}`)
    await Effect.runPromise(Deferred.await(interrupted))
    const row = (await db.run(jobs.get(id)))!
    t.equal(row.state, "running", "left to its new holder")
    t.equal(row.claimed_by, "ins_other")
    await close()
  })

  t.test("shutdown hands running jobs back to the queue", async (t) => {
    const running = await Effect.runPromise(Deferred.make<void>())
    behaviour = () => Effect.andThen(Deferred.succeed(running, undefined), Effect.never)
    const { close } = await startRunner("ins_shutdown")
    const id = await submit(null)
    await Effect.runPromise(Deferred.await(running))
    await close()
    const row = (await db.run(jobs.get(id)))!
    t.equal(row.state, "pending")
    t.equal(row.claimed_by, null)
    behaviour = () => Effect.succeed(result(1000))
    const next = await startRunner("ins_next")
    t.teardown(next.close)
    await waitFor("finished by the next instance", async () => (await stateOf(id)) === "succeeded")
    await next.close()
  })
})
