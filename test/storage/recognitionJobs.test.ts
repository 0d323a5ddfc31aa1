/**
 * The job queue's state machine against both databases the service runs on: embedded PGlite
 * always, and PostgreSQL when DATABASE_URL is set (CI). Claims are exclusive under concurrency
 * (SKIP LOCKED), an expired lease makes a running job claimable again and its old holder can
 * then neither renew nor finish it, a job reaches exactly one terminal state, cancel works from
 * every non-terminal state, and expired reservations are swept.
 */
import { Effect, Layer, ManagedRuntime } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import { SqlClient } from "effect/sql/SqlClient"
import * as fs from "node:fs"
import t from "tap"
import { databaseLayer } from "../../storage/Database.ts"
import { type JobOptions, newJobId, RecognitionJobs, recognitionJobsLayer } from "../../storage/RecognitionJobs.ts"
import { freshEmbeddedDataDir, isolatedDatabaseUrl } from "../support/database.ts"

const options: JobOptions = { diarize: false, timestampsGranularity: "word", additionalFormats: [] }

const modes: Array<"embedded" | "postgres"> = ["embedded"]
if (process.env.DATABASE_URL) modes.push("postgres")

for (const mode of modes) {
  t.test(`job queue on ${mode}`, async (t) => {
    let layer: Layer.Layer<RecognitionJobs | SqlClient, unknown>
    if (mode === "embedded") {
      const dataDir = await freshEmbeddedDataDir()
      t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }))
      layer = recognitionJobsLayer.pipe(Layer.provideMerge(databaseLayer({ databaseUrl: undefined, dataDir })))
    } else {
      const url = await isolatedDatabaseUrl(t, process.env.DATABASE_URL!)
      layer = recognitionJobsLayer.pipe(Layer.provideMerge(databaseLayer({ databaseUrl: url, dataDir: "/tmp" })))
    }
    const runtime = ManagedRuntime.make(layer.pipe(Layer.provide(Reactivity.layer)))
    t.teardown(() => runtime.dispose())
    const jobs = await runtime.runPromise(Effect.service(RecognitionJobs))
    const run = <A, E>(e: Effect.Effect<A, E, SqlClient>) => runtime.runPromise(e)
    const sql = (text: string) => run(Effect.flatMap(Effect.service(SqlClient), (s) => s.unsafe(text)))

    const queued = async (userId: string | null = null) => {
      const id = newJobId()
      await run(jobs.reserve({
        id,
        userId,
        clientAddress: "10.0.0.1",
        filename: null,
        contentType: null,
        declaredBytes: null,
        maxBytes: 1000,
        uploadKey: `uploads/${id}`,
        uploadExpiresAt: new Date(Date.now() + 60_000)
      }))
      return id
    }
    const started = async () => {
      const id = await queued()
      t.ok(await run(jobs.claimUpload(id, `uploads/${id}`, "put")), "the first PUT claims the address")
      t.equal(await run(jobs.claimUpload(id, `uploads/${id}`, "other")), undefined, "a second PUT does not")
      t.notOk(await run(jobs.markUploaded(id, "other", 10)), "nor can it record a size")
      t.ok(await run(jobs.markUploaded(id, "put", 10)))
      t.ok(await run(jobs.start(id, { options, webhookId: null, webhookMetadata: null })))
      return id
    }
    // Each subtest starts with an empty queue.
    const clear = () => sql("DELETE FROM recognition_jobs")

    t.test("start needs state uploading, once", async (t) => {
      await clear()
      const id = await queued()
      const first = await run(jobs.start(id, { options, webhookId: null, webhookMetadata: { a: 1 } }))
      t.equal(first?.state, "pending")
      t.match(first?.transcription_id, /^tr_/)
      t.same(first?.webhook_metadata, { a: 1 })
      t.equal(await run(jobs.start(id, { options, webhookId: null, webhookMetadata: null })), undefined, "a second start changes nothing")
      t.equal(await run(jobs.claimUpload(id, `uploads/${id}`, "put")), undefined, "an upload after start is refused")
    })

    t.test("concurrent claims take each job once (SKIP LOCKED)", async (t) => {
      await clear()
      const ids = await Promise.all(Array.from({ length: 12 }, () => started()))
      const claims = await run(Effect.forEach(
        Array.from({ length: 30 }, (_, i) => `ins_${i % 3}`),
        (instance) => jobs.claim(instance, 60_000, 3),
        { concurrency: "unbounded" }
      ))
      const claimed = claims.filter((c) => c !== undefined).map((c) => c!.id)
      t.equal(claimed.length, 12, "every job claimed")
      t.equal(new Set(claimed).size, 12, "no job claimed twice")
      t.same(new Set(claimed), new Set(ids))
      t.equal(await run(jobs.claim("ins_x", 60_000, 3)), undefined, "nothing left")
    })

    t.test("an expired lease is claimed again; the old holder can neither renew nor finish", async (t) => {
      await clear()
      const id = await started()
      const first = await run(jobs.claim("ins_a", 60_000, 3))
      t.equal(first?.id, id)
      t.equal(first?.claims, 1)
      t.ok(await run(jobs.renew(id, "ins_a", 60_000, { stage: "recognising", fraction: 0.5 })))
      t.equal((await run(jobs.get(id)))?.progress_stage, "recognising")
      t.equal(await run(jobs.claim("ins_b", 60_000, 3)), undefined, "a live lease is not claimed")
      await sql(`UPDATE recognition_jobs SET lease_until = now() - interval '1 second' WHERE id = '${id}'`)
      t.equal(await run(jobs.claim("ins_a", 60_000, 3)), undefined, "an instance does not take back its own job")
      const second = await run(jobs.claim("ins_b", 60_000, 3))
      t.equal(second?.id, id)
      t.equal(second?.claims, 2)
      t.equal(await run(jobs.renew(id, "ins_a", 60_000, undefined)), false, "old holder loses the lease")
      t.equal(await run(jobs.finish(id, "ins_a", { state: "succeeded", result: {} })), undefined, "old holder cannot finish")
      const done = await run(jobs.finish(id, "ins_b", { state: "succeeded", result: { text: "hi" }, audioDurationS: 2 }))
      t.equal(done?.state, "succeeded")
      t.equal(await run(jobs.finish(id, "ins_b", { state: "failed" })), undefined, "exactly one terminal state")
      t.equal((await run(jobs.get(id)))?.state, "succeeded")
    })

    t.test("claims stop at maxClaims; abandoned jobs are listed", async (t) => {
      await clear()
      const id = await started()
      await run(jobs.claim("ins_a", 60_000, 1))
      await sql(`UPDATE recognition_jobs SET lease_until = now() - interval '1 second' WHERE id = '${id}'`)
      t.equal(await run(jobs.claim("ins_b", 60_000, 1)), undefined)
      t.same((await run(jobs.abandoned(1))).map((r) => r.id), [id])
      t.equal((await run(jobs.finish(id, null, { state: "failed", errorCode: "job_abandoned" })))?.state, "failed")
    })

    t.test("cancel from every non-terminal state, never from a terminal one", async (t) => {
      await clear()
      const uploading = await queued()
      const pending = await started()
      const running = await started()
      await run(jobs.claim("ins_a", 60_000, 3)) // the older pending one
      const claimedFirst = (await run(jobs.get(pending)))!.state === "running" ? pending : running
      t.equal(claimedFirst, pending, "oldest first")
      t.equal(await run(Effect.map(jobs.cancel(uploading), (r) => r?.state)), "uploading")
      t.equal(await run(Effect.map(jobs.cancel(running), (r) => r?.state)), "pending")
      t.equal(await run(Effect.map(jobs.cancel(pending), (r) => r?.state)), "running")
      t.equal(await run(jobs.renew(pending, "ins_a", 60_000, undefined)), false, "a cancelled job's holder learns at its next heartbeat")
      t.equal(await run(jobs.finish(pending, "ins_a", { state: "succeeded" })), undefined, "and cannot finish it")
      t.equal(await run(jobs.cancel(pending)), undefined, "cancelled is terminal")
      for (const id of [uploading, pending, running]) t.equal((await run(jobs.get(id)))?.state, "cancelled")
    })

    t.test("requeue hands an instance's running jobs back", async (t) => {
      await clear()
      const id = await started()
      await run(jobs.claim("ins_a", 60_000, 3))
      await run(jobs.requeue("ins_a"))
      const row = await run(jobs.get(id))
      t.equal(row?.state, "pending")
      t.equal(row?.claims, 0, "a clean hand-back does not count as a claim")
      t.equal((await run(jobs.claim("ins_b", 60_000, 3)))?.id, id)
    })

    t.test("expired reservations are swept; started ones stay", async (t) => {
      await clear()
      const stale = await queued()
      const fresh = await queued()
      const startedId = await started()
      await sql(`UPDATE recognition_jobs SET upload_expires_at = now() - interval '1 minute' WHERE id IN ('${stale}', '${startedId}')`)
      t.same(await run(jobs.sweepExpiredUploads()), [`uploads/${stale}`])
      t.equal(await run(jobs.get(stale)), undefined)
      t.ok(await run(jobs.get(fresh)))
      t.ok(await run(jobs.get(startedId)))
    })

    t.test("audio kept for speaker enrollment is swept once its window has passed, once", async (t) => {
      await clear()
      const over = await started()
      const open = await started()
      await run(jobs.keepAudio(over, 60_000))
      await run(jobs.keepAudio(open, 60_000))
      t.ok((await run(jobs.get(open)))?.audio_kept_until, "marked")
      await sql(`UPDATE recognition_jobs SET audio_kept_until = now() - interval '1 second' WHERE id = '${over}'`)
      t.same(await run(jobs.sweepKeptAudio()), [`uploads/${over}`])
      t.same(await run(jobs.sweepKeptAudio()), [], "each job's audio goes once")
      t.equal((await run(jobs.get(over)))?.audio_kept_until, null)
      t.ok((await run(jobs.get(open)))?.audio_kept_until, "a job within its window keeps its audio")
      t.equal(await run(jobs.remove(open)), `uploads/${open}`, "removing a job hands back the key of its kept audio")
      t.equal(await run(jobs.remove(over)), null)
      t.equal(await run(jobs.remove(over)), false)
    })

    t.test("anonymous seconds per address in the last hour", async (t) => {
      await clear()
      const a = await started()
      const b = await started()
      await sql(`UPDATE recognition_jobs SET audio_duration_s = 30 WHERE id IN ('${a}', '${b}')`)
      t.equal(await run(jobs.anonymousSecondsLastHour("10.0.0.1")), 60)
      t.equal(await run(jobs.anonymousSecondsLastHour("10.0.0.2")), 0)
      await sql(`UPDATE recognition_jobs SET created_at = now() - interval '2 hours' WHERE id = '${a}'`)
      t.equal(await run(jobs.anonymousSecondsLastHour("10.0.0.1")), 30)
    })
  })
}

