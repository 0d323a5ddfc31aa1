/**
 * The recognition-job actor of one instance: claims queued jobs from PostgreSQL (up to
 * `concurrency` at once), runs each in a fiber of its own through the same `Transcriber` as the
 * synchronous endpoint, and commits exactly one terminal state per job.
 *
 * One fiber per running job, raced against its heartbeat: every `heartbeatMs` the lease is
 * renewed and the progress written; a renewal that finds the job no longer ours (cancelled, or
 * claimed again by another instance after this one stalled) interrupts the work, which cancels
 * its pool tasks and ffmpeg. The claim loop wakes on `kick` (a job was started here), when a
 * job ends, and every `pollMs` (jobs started on other instances, leases that expired).
 *
 * Money and the outbox go with the state: credits are reserved by the transcriber before it
 * decodes (the declared duration, then the decoded one: actors/SttPrepay.ts) and handed to the
 * runner (`holdReservation`), and the terminal UPDATE, the settlement (charge on success, give back otherwise) and
 * the webhook delivery row are one transaction. A crash before it leaves the job `running`
 * under a lease that expires, the reservation to the dead-instance sweeper, and no delivery:
 * the job is claimed again and runs from the start. Anonymous jobs are free, bounded by
 * minutes per job and per client address per hour.
 *
 * Shutdown interrupts the running jobs and hands them back to the queue (`requeue`), so the next
 * instance to poll takes them at once instead of after the lease.
 *
 * A database outage is nobody's failure: a run that fails because the database is unreachable
 * is not committed as failed but handed back to the queue (`handBack`) once the database
 * answers again, and a finished run's commit waits for the database instead of giving up.
 * Without this a single instance kept such a job `running` for ever (it never takes back its
 * own claims).
 */
import { Context, Effect, Fiber, Layer, Schedule, type Scope } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import * as fs from "node:fs/promises"
import { TranscriptionError } from "../engines/asr/TranscriptionError.ts"
import type { AccountsError } from "../storage/AccountsError.ts"
import { BlobStore } from "../storage/BlobStore.ts"
import { Credits, type Reservation } from "../storage/Credits.ts"
import { type JobRow, type Outcome, RecognitionJobs } from "../storage/RecognitionJobs.ts"
import { insertDelivery, newEventId } from "../storage/Webhooks.ts"
import { SavedSpeakers } from "../storage/SavedSpeakers.ts"
import { annotateSpeakers, matchVoiceprints } from "./SpeakerRecognition.ts"
import { CreditPurpose, sttCredits } from "./CreditPolicy.ts"
import { RecognitionJobError } from "./RecognitionJobError.ts"
import { speechToTextBody } from "./Transcript.ts"
import { type RecognitionProgress, Transcriber } from "./Transcription.ts"

/** The database cannot be reached (down, cut off, refusing the credentials): worth waiting out. */
const databaseOutage = (e: unknown): boolean => {
  const failure = e as { _tag?: unknown; reason?: { _tag?: unknown } } | null
  return failure?._tag === "SqlError" && (failure.reason?._tag === "ConnectionError" || failure.reason?._tag === "AuthenticationError")
}

export interface PublicError {
  readonly code: string
  readonly message: string
}

export interface JobRunnerOptions {
  /** This process (storage/InstanceRegistry.ts); claims and leases are taken under it. */
  readonly instanceId: string
  /** Jobs run at once by this instance; 0 runs none (the instance only accepts jobs). */
  readonly concurrency: number
  readonly leaseMs: number
  readonly pollMs: number
  readonly maxClaims: number
  /** Where downloads of URL sources and object-storage uploads go while a job runs. */
  readonly tmpDir: string
  /** Longest anonymous job, s (0: no cap). */
  readonly anonJobMaxSeconds: number
  /** Anonymous audio seconds per client address per hour (0: no cap). */
  readonly anonSecondsPerHour: number
  /** The client's view of a failure: the protocol's error table, given by the composition root. */
  readonly describeError: (failure: unknown) => PublicError
  /** Downloads a job's `source_url` to a file (the outbound guard applies); removed by the caller. */
  readonly fetchSource: (url: string) => Effect.Effect<string, unknown>
  /** Tells the webhook dispatcher a delivery was written. */
  readonly deliveryWritten: Effect.Effect<void>
  /** Voiceprint similarity that names a saved speaker: the speaker embedding's (SpeakerModel.ts). */
  readonly matchThreshold: number
  /**
   * How long a succeeded job with speaker recognition keeps its audio so that its speakers can
   * be enrolled (SPEAKER_ENROLL_WINDOW_MINUTES), ms; 0 keeps none. Its voiceprints are never
   * kept: they are biometric data, and enrollment computes the one it stores from this audio.
   */
  readonly enrollWindowMs: number
}

export interface JobRunnerShape {
  /** A job was queued on this instance: look for work now. */
  readonly kick: Effect.Effect<void>
  /**
   * Cancels a job in any non-terminal state (and its work, on this instance now or on another
   * at its next heartbeat); the state before, or undefined when it had already ended.
   */
  readonly cancel: (jobId: string) => Effect.Effect<JobRow["state"] | undefined, SqlError>
  /** Jobs running on this instance now. */
  readonly active: () => number
}

export class JobRunner extends Context.Service<JobRunner, JobRunnerShape>()("speech/actors/JobRunner") {}

/** The webhook body (issue 11; documented in the README): stable `event_id`, one per terminal state. */
export const webhookBody = (
  eventId: string,
  job: Pick<JobRow, "id" | "transcription_id" | "webhook_metadata">,
  state: JobRow["state"],
  payload: { readonly transcription?: Record<string, unknown> | null; readonly error?: PublicError }
): string =>
  JSON.stringify({
    type: "speech_to_text_transcription",
    event_id: eventId,
    data: {
      job_id: job.id,
      transcription_id: job.transcription_id,
      state,
      ...(payload.transcription !== undefined && payload.transcription !== null ? { transcription: payload.transcription } : {}),
      ...(payload.error !== undefined ? { error: payload.error } : {}),
      webhook_metadata: job.webhook_metadata ?? null
    }
  })

export const JobRunnerLive = (options: JobRunnerOptions) =>
  Layer.effect(
    JobRunner,
    Effect.gen(function*() {
      const jobs = yield* RecognitionJobs
      const blobs = yield* BlobStore
      const transcriber = yield* Transcriber
      const credits = yield* Credits
      const savedSpeakers = yield* SavedSpeakers
      const sql = jobs.sql
      const me = options.instanceId
      const heartbeatMs = Math.max(100, Math.min(2000, Math.floor(options.leaseMs / 3)))
      /** Retries while the database is unreachable, every heartbeat; other failures pass through. */
      const untilReachable = Effect.retry({ while: databaseOutage, schedule: Schedule.spaced(heartbeatMs) })
      const running = new Map<string, Fiber.Fiber<void>>()
      let wake: (() => void) | undefined
      /** A kick while the loop is claiming is kept, so it looks once more before it sleeps. */
      let kicked = false
      const kickNow = () => {
        kicked = true
        const w = wake
        wake = undefined
        w?.()
      }

      /** Writes the terminal state, settles the credits and queues the delivery, together. */
      const commit = (job: JobRow, outcome: Outcome, reservation: Reservation | undefined, charged: number, keepAudio: boolean) =>
        sql.withTransaction(Effect.gen(function*() {
          const finished = yield* jobs.finish(job.id, me, outcome)
          if (finished === undefined) return false
          if (outcome.state === "succeeded" && keepAudio) yield* jobs.keepAudio(job.id, options.enrollWindowMs)
          if (reservation !== undefined) yield* credits.settle(reservation, outcome.state === "succeeded" ? charged : 0)
          if (finished.webhook_id !== null) {
            const eventId = newEventId()
            const error = outcome.state === "failed" ? { code: outcome.errorCode ?? "failed", message: outcome.errorMessage ?? "" } : undefined
            yield* insertDelivery(sql, {
              eventId,
              webhookId: finished.webhook_id,
              jobId: job.id,
              body: webhookBody(eventId, finished, outcome.state, { transcription: outcome.result ?? null, ...(error ? { error } : {}) })
            })
          }
          return true
        })).pipe(
          // The database unreachable at the very end: wait for it (the work is done; if the lease
          // lapses meanwhile and another instance claims the job, `finish` finds it no longer
          // ours). Any other hiccup: try again a few times.
          untilReachable,
          Effect.retry({ times: 3 }),
          Effect.tap((done) => (done ? options.deliveryWritten : Effect.void))
        )

      const transcribe = (job: JobRow, progress: { current: RecognitionProgress | undefined }, hold: (r: Reservation) => void) =>
        Effect.gen(function*() {
          const o = job.options ?? { diarize: false, timestampsGranularity: "word" as const, additionalFormats: [] }
          if (job.upload_bytes !== null && Number(job.upload_bytes) > Number(job.max_bytes)) {
            return yield* new RecognitionJobError({ reason: "UploadTooLarge", message: `the upload has ${job.upload_bytes} bytes, over this job's limit of ${job.max_bytes}` })
          }
          const file = job.source_url !== null
            ? yield* Effect.acquireRelease(options.fetchSource(job.source_url), (f) => Effect.promise(() => fs.rm(f, { force: true })))
            : yield* blobs.localFile(job.upload_key, options.tmpDir)
          const onDecoded = (durationMs: number): Effect.Effect<void, TranscriptionError | AccountsError | SqlError | RecognitionJobError> =>
            Effect.gen(function*() {
              const seconds = durationMs / 1000
              yield* jobs.setDuration(job.id, me, seconds)
              if (job.user_id !== null) return // paid for: the transcriber reserved it and handed it over
              if (options.anonJobMaxSeconds > 0 && seconds > options.anonJobMaxSeconds) {
                return yield* new TranscriptionError({
                  reason: "TooLong",
                  message: `anonymous jobs may transcribe up to ${options.anonJobMaxSeconds / 60} minutes; this file has ${(seconds / 60).toFixed(1)}; send an API key for longer files`
                })
              }
              if (options.anonSecondsPerHour > 0 && job.client_address !== null) {
                // Includes this job: its duration was written above.
                const used = yield* jobs.anonymousSecondsLastHour(job.client_address)
                if (used > options.anonSecondsPerHour) {
                  return yield* new RecognitionJobError({
                    reason: "AnonymousQuota",
                    message: `anonymous transcription is limited to ${options.anonSecondsPerHour / 60} audio minutes per hour per client address; send an API key or retry later`
                  })
                }
              }
            })
          const result = yield* transcriber.transcribeFile(file, {
            language: o.languageCode,
            diarize: o.diarize,
            numSpeakers: o.numSpeakers,
            userId: job.user_id,
            // Settled in the job's terminal transaction (`commit`), not by the transcriber.
            origin: { purpose: CreditPurpose.sttJob, reference: job.id },
            holdReservation: hold,
            priority: "background",
            onProgress: (p) => Effect.sync(() => void (progress.current = p)),
            onDecoded
          })
          const body = speechToTextBody(result, { granularity: o.timestampsGranularity, formats: o.additionalFormats }, job.transcription_id ?? job.id)
          if (o.speakerRecognition !== true || job.user_id === null) return { body, durationMs: result.durationMs, keepAudio: false }
          // Only the owner's voiceprints, and only of the model that made this job's.
          const model = result.voiceprints[0]?.model
          const saved = model === undefined ? [] : yield* savedSpeakers.forMatching(job.user_id, model)
          const matches = matchVoiceprints(result.voiceprints, saved, options.matchThreshold)
          // The voiceprints end here, with the job's memory. Its audio is what stays (for the
          // enrollment window), in the blob store also when it came from a URL.
          const keepAudio = options.enrollWindowMs > 0 && (job.source_url === null || (yield* blobs.putFile(job.upload_key, file).pipe(
            Effect.as(true),
            // Not worth failing the transcript for: its speakers just cannot be enrolled.
            Effect.catch((error) => Effect.as(Effect.logWarning("could not keep the downloaded audio for speaker enrollment", { jobId: job.id, error }), false))
          )))
          return { body: annotateSpeakers(body, result.voiceprints, matches), durationMs: result.durationMs, keepAudio }
        }).pipe(Effect.scoped)

      /** Renews the lease every heartbeat; completes only when the job is no longer ours. */
      const heartbeat = (job: JobRow, progress: { current: RecognitionProgress | undefined }) =>
        Effect.gen(function*() {
          while (true) {
            yield* Effect.sleep(heartbeatMs)
            const p = progress.current
            const held = yield* jobs.renew(job.id, me, options.leaseMs, p === undefined ? undefined : { stage: p.stage, fraction: p.fraction }).pipe(
              // The database is unreachable for a moment: keep working; the lease may still hold.
              Effect.catch((error) => Effect.as(Effect.logWarning("job lease renewal failed", { jobId: job.id, error }), true))
            )
            if (!held) return
          }
        })

      const runJob = (job: JobRow) => {
        let reservation: Reservation | undefined
        return Effect.gen(function*() {
          const progress: { current: RecognitionProgress | undefined } = { current: undefined }
          const started = performance.now()
          yield* Effect.logInfo("job claimed", { jobId: job.id, claims: job.claims, user: job.user_id ?? "anonymous" })
          const raced = yield* Effect.raceFirst(
            Effect.result(transcribe(job, progress, (r) => void (reservation = r))).pipe(Effect.map((r) => ({ _tag: "Done" as const, r }))),
            Effect.as(heartbeat(job, progress), { _tag: "Lost" as const })
          )
          if (raced._tag === "Lost") {
            yield* Effect.logInfo("job no longer ours (cancelled or claimed again); stopped", { jobId: job.id })
            return
          }
          if (raced.r._tag === "Failure" && databaseOutage(raced.r.failure)) {
            yield* Effect.logWarning("job cut short by a database outage; handing it back once the database answers", { jobId: job.id })
            yield* untilReachable(jobs.handBack(job.id, me))
            return
          }
          const outcome: Outcome = raced.r._tag === "Success"
            ? { state: "succeeded", result: raced.r.success.body, audioDurationS: raced.r.success.durationMs / 1000 }
            : (() => {
              const e = options.describeError(raced.r.failure)
              return { state: "failed", errorCode: e.code, errorMessage: e.message }
            })()
          const charged = raced.r._tag === "Success" ? sttCredits(raced.r.success.durationMs) : 0
          const keepAudio = raced.r._tag === "Success" && raced.r.success.keepAudio
          const committed = yield* commit(job, outcome, reservation, charged, keepAudio)
          // Settled in the commit; otherwise the finalizer below gives it back.
          if (committed) reservation = undefined
          yield* Effect.logInfo("job finished", {
            jobId: job.id,
            state: committed ? outcome.state : "lost before commit",
            ms: Math.round(performance.now() - started),
            ...(outcome.errorCode !== undefined ? { error: outcome.errorCode } : {})
          })
          // Kept for the enrollment window; the upload sweeper deletes it after (storage/UploadSweeper.ts).
          if (committed && keepAudio) return
          if (committed && job.source_url === null) yield* blobs.delete(job.upload_key).pipe(Effect.ignore)
        }).pipe(
          // Interrupted (cancel on this instance, shutdown), lost, or not committed: whatever
          // was reserved goes back (idempotent: a settled reservation charges nothing more).
          Effect.ensuring(Effect.suspend(() => (reservation === undefined ? Effect.void : credits.release(reservation).pipe(Effect.ignore)))),
          Effect.catchCause((cause) => Effect.logError("job runner fault", { jobId: job.id, cause })),
          Effect.annotateLogs("jobId", job.id)
        )
      }

      /** Fails the jobs whose every allowed claim ended with a dead instance. */
      const failAbandoned = Effect.gen(function*() {
        for (const { id } of yield* jobs.abandoned(options.maxClaims)) {
          const job = yield* jobs.get(id)
          if (job === undefined) continue
          const error = options.describeError(new RecognitionJobError({ reason: "Abandoned", message: `the job stopped its server ${options.maxClaims} times and was given up` }))
          yield* sql.withTransaction(Effect.gen(function*() {
            const finished = yield* jobs.finish(id, null, { state: "failed", errorCode: error.code, errorMessage: error.message })
            if (finished?.webhook_id) {
              const eventId = newEventId()
              yield* insertDelivery(sql, { eventId, webhookId: finished.webhook_id, jobId: id, body: webhookBody(eventId, finished, "failed", { error }) })
            }
          }))
        }
      })

      let closing = false
      const claimLoop = (scope: Scope.Scope) =>
        Effect.gen(function*() {
          while (!closing) {
            kicked = false
            while (!closing && running.size < options.concurrency) {
              const job = yield* jobs.claim(me, options.leaseMs, options.maxClaims)
              if (job === undefined) break
              const fiber = yield* runJob(job).pipe(
                Effect.ensuring(Effect.sync(() => {
                  running.delete(job.id)
                  kickNow()
                })),
                Effect.forkIn(scope)
              )
              running.set(job.id, fiber)
            }
            yield* failAbandoned
            if (kicked && running.size < options.concurrency) continue
            yield* Effect.callback<void>((resume) => {
              wake = () => resume(Effect.void)
            }).pipe(Effect.timeoutOption(options.pollMs))
          }
        }).pipe(
          // The database went away: log, wait a poll, start again. The loop never ends on its own.
          Effect.catchCause((cause) => Effect.andThen(Effect.logWarning("job claim loop failed; retrying", { cause }), Effect.sleep(options.pollMs))),
          Effect.forever
        )

      if (options.concurrency > 0) {
        const scope = yield* Effect.scope
        const loop = yield* Effect.forkIn(claimLoop(scope), scope)
        // Added after the forks, so it runs before the scope interrupts them: stop claiming,
        // stop the jobs, then hand them back to the queue.
        yield* Effect.addFinalizer(() =>
          Effect.gen(function*() {
            closing = true
            yield* Fiber.interrupt(loop)
            yield* Fiber.interruptAll([...running.values()])
            yield* jobs.requeue(me).pipe(Effect.ignore)
          })
        )
      }

      const cancel = (jobId: string) =>
        Effect.gen(function*() {
          const before = yield* sql.withTransaction(Effect.gen(function*() {
            const row = yield* jobs.cancel(jobId)
            if (row?.webhook_id && row.state !== "uploading") {
              const eventId = newEventId()
              yield* insertDelivery(sql, { eventId, webhookId: row.webhook_id, jobId, body: webhookBody(eventId, row, "cancelled", {}) })
            }
            return row
          }))
          if (before === undefined) return undefined
          if (before.webhook_id && before.state !== "uploading") yield* options.deliveryWritten
          const fiber = running.get(jobId)
          if (fiber !== undefined) yield* Fiber.interrupt(fiber)
          // The upload is of no use any more, wherever the job was (a run elsewhere that still
          // reads it stops at its next heartbeat).
          yield* blobs.delete(before.upload_key).pipe(Effect.ignore)
          return before.state
        })

      return JobRunner.of({ kick: Effect.sync(kickNow), cancel, active: () => running.size })
    })
  )
