/**
 * The recognition job queue in PostgreSQL (also on embedded PGlite): rows of
 * `recognition_jobs` (migration 0004) and every state change they go through.
 *
 *   uploading ──start──▶ pending ──claim──▶ running ──finish──▶ succeeded | failed
 *       │                   │                  │ lease expired: claimable again
 *       └──────cancel───────┴──────────────────┴──────────────▶ cancelled
 *
 * Each move is one conditional UPDATE naming the state it leaves, so two callers racing for the
 * same move (two instances claiming, a cancel against a finish) cannot both win. A claim takes
 * the oldest queued job `FOR UPDATE SKIP LOCKED`, so instances never wait for each other's
 * claims, and holds it until `lease_until`; the runner renews the lease while it works. A
 * `running` job whose lease expired belongs to an instance that stopped (crash, SIGKILL, cut
 * off) and is claimed again, up to `maxClaims` claims. `finish` only succeeds for the instance
 * holding the claim, so a job reaches exactly one terminal state even when an instance that was
 * presumed dead comes back.
 */
import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql/SqlClient"
import { randomBytes } from "node:crypto"

export type JobState = "uploading" | "pending" | "running" | "succeeded" | "failed" | "cancelled"

export const TERMINAL_STATES: ReadonlySet<JobState> = new Set(["succeeded", "failed", "cancelled"])

/** The start request's transcription options, as stored. */
export interface JobOptions {
  readonly languageCode?: string | undefined
  readonly diarize: boolean
  readonly numSpeakers?: number | undefined
  readonly timestampsGranularity: "word" | "none" | "character"
  readonly additionalFormats: ReadonlyArray<string>
  /** Keep the diarized speakers' voiceprints with the job and match the owner's saved speakers. */
  readonly speakerRecognition?: boolean | undefined
}

export interface JobRow {
  readonly id: string
  readonly user_id: string | null
  readonly client_address: string | null
  readonly state: JobState
  readonly filename: string | null
  readonly content_type: string | null
  readonly declared_bytes: string | number | null
  readonly max_bytes: string | number
  readonly upload_key: string
  readonly upload_bytes: string | number | null
  /** The token of the PUT that holds the local store's upload address (migration 0010). */
  readonly upload_claim: string | null
  /**
   * Until when the audio of a job that ran with speaker recognition is kept for enrollment
   * (migration 0011); null: not kept (or no longer).
   */
  readonly audio_kept_until: Date | null
  readonly upload_expires_at: Date
  readonly source_url: string | null
  readonly options: JobOptions | null
  readonly webhook_id: string | null
  readonly webhook_metadata: unknown
  readonly transcription_id: string | null
  readonly created_at: Date
  readonly queued_at: Date | null
  readonly started_at: Date | null
  readonly finished_at: Date | null
  readonly claimed_by: string | null
  readonly lease_until: Date | null
  readonly claims: number
  readonly progress_stage: string | null
  readonly progress_fraction: number | null
  readonly audio_duration_s: number | null
  readonly result: Record<string, unknown> | null
  readonly error_code: string | null
  readonly error_message: string | null
}

export const newJobId = (): string => `job_${randomBytes(16).toString("hex")}`
export const newTranscriptionId = (): string => `tr_${randomBytes(12).toString("hex")}`

/** jsonb parameters: the driver takes a JSON text and PostgreSQL casts it. */
const json = (value: unknown): string | null => (value === undefined || value === null ? null : JSON.stringify(value))

export interface NewJob {
  readonly id: string
  readonly userId: string | null
  readonly clientAddress: string | null
  readonly filename: string | null
  readonly contentType: string | null
  readonly declaredBytes: number | null
  readonly maxBytes: number
  readonly uploadKey: string
  readonly uploadExpiresAt: Date
}

export interface StartRequest {
  readonly options: JobOptions
  readonly webhookId: string | null
  readonly webhookMetadata: unknown
  /** Bytes of the landed upload, when the store measured it at start (object storage). */
  readonly uploadBytes?: number | undefined
}

export interface Outcome {
  readonly state: "succeeded" | "failed"
  readonly result?: Record<string, unknown> | undefined
  readonly audioDurationS?: number | undefined
  readonly errorCode?: string | undefined
  readonly errorMessage?: string | undefined
}

export const makeRecognitionJobs = Effect.gen(function*() {
  const sql = yield* SqlClient
  const one = <A>(rows: ReadonlyArray<A>): A | undefined => rows[0]

  return {
    sql,

    reserve: (job: NewJob) =>
      sql<JobRow>`INSERT INTO recognition_jobs
          (id, user_id, client_address, state, filename, content_type, declared_bytes, max_bytes, upload_key, upload_expires_at)
        VALUES (${job.id}, ${job.userId}, ${job.clientAddress}, 'uploading', ${job.filename}, ${job.contentType},
          ${job.declaredBytes}, ${job.maxBytes}, ${job.uploadKey}, ${job.uploadExpiresAt})
        RETURNING *`.pipe(Effect.map((rows) => rows[0]!)),

    /**
     * A job created already queued (speech-to-text with `webhook=true`): its media is in the
     * blob store under `uploadKey` (an inline upload) or at `sourceUrl`.
     */
    enqueue: (job: NewJob & StartRequest & { readonly sourceUrl: string | null }) =>
      sql<JobRow>`INSERT INTO recognition_jobs
          (id, user_id, client_address, state, filename, content_type, declared_bytes, max_bytes, upload_key, upload_bytes,
           upload_expires_at, source_url, options, webhook_id, webhook_metadata, transcription_id, queued_at)
        VALUES (${job.id}, ${job.userId}, ${job.clientAddress}, 'pending', ${job.filename}, ${job.contentType},
          ${job.declaredBytes}, ${job.maxBytes}, ${job.uploadKey}, ${job.uploadBytes ?? null}, ${job.uploadExpiresAt},
          ${job.sourceUrl}, ${json(job.options)}::jsonb, ${job.webhookId}, ${json(job.webhookMetadata)}::jsonb,
          ${newTranscriptionId()}, now())
        RETURNING *`.pipe(Effect.map((rows) => rows[0]!)),

    get: (id: string) => sql<JobRow>`SELECT * FROM recognition_jobs WHERE id = ${id}`.pipe(Effect.map(one)),

    byTranscription: (transcriptionId: string) =>
      sql<JobRow>`SELECT * FROM recognition_jobs WHERE transcription_id = ${transcriptionId}`.pipe(Effect.map(one)),

    /** The user's jobs, newest first. */
    list: (userId: string, limit: number) =>
      sql<JobRow>`SELECT * FROM recognition_jobs WHERE user_id = ${userId} ORDER BY created_at DESC, id DESC LIMIT ${limit}`,

    /** The upload landed (the service received it); only while still `uploading`. */
    /**
     * Takes the upload address of a job still waiting for its bytes, for the PUT holding
     * `token`: one statement, so of any number of PUTs on any number of instances exactly one
     * gets the row. Undefined when another PUT holds it, the upload landed, or the job left
     * `uploading`.
     */
    claimUpload: (id: string, key: string, token: string) =>
      sql<JobRow>`UPDATE recognition_jobs SET upload_claim = ${token}
        WHERE id = ${id} AND upload_key = ${key} AND state = 'uploading' AND upload_bytes IS NULL AND upload_claim IS NULL
        RETURNING *`.pipe(Effect.map(one)),

    /** Gives the address back after a refused or broken PUT, so the client can try again. */
    releaseUpload: (id: string, token: string) =>
      sql`UPDATE recognition_jobs SET upload_claim = NULL WHERE id = ${id} AND upload_claim = ${token} AND upload_bytes IS NULL`,

    /** Records the landed size, only for the PUT that holds the address (`claimUpload`). */
    markUploaded: (id: string, token: string, bytes: number) =>
      sql`UPDATE recognition_jobs SET upload_bytes = ${bytes}
        WHERE id = ${id} AND state = 'uploading' AND upload_claim = ${token} AND upload_bytes IS NULL RETURNING id`.pipe(
        Effect.map((rows) => rows.length > 0)
      ),

    /** `uploading` → `pending`. Undefined when the job had left `uploading`. */
    start: (id: string, request: StartRequest) =>
      sql<JobRow>`UPDATE recognition_jobs
        SET state = 'pending', queued_at = now(), options = ${json(request.options)}::jsonb,
            webhook_id = ${request.webhookId}, webhook_metadata = ${json(request.webhookMetadata)}::jsonb,
            upload_bytes = COALESCE(${request.uploadBytes ?? null}, upload_bytes),
            transcription_id = ${newTranscriptionId()}
        WHERE id = ${id} AND state = 'uploading'
        RETURNING *`.pipe(Effect.map(one)),

    /**
     * The oldest claimable job, claimed by `instanceId` until now + `leaseMs`: a queued one, or a
     * running one whose lease expired (its instance stopped). Jobs already claimed `maxClaims`
     * times are not claimed again (see `abandoned`). An instance never takes back its own job:
     * one whose lease lapsed while it still runs it (a stalled event loop) would run twice here.
     */
    claim: (instanceId: string, leaseMs: number, maxClaims: number) =>
      sql<JobRow>`UPDATE recognition_jobs
        SET state = 'running', claimed_by = ${instanceId}, claims = claims + 1,
            lease_until = now() + make_interval(secs => ${leaseMs / 1000}),
            started_at = COALESCE(started_at, now()), progress_stage = 'decoding', progress_fraction = 0
        WHERE id = (
          SELECT id FROM recognition_jobs
          WHERE (state = 'pending' OR (state = 'running' AND lease_until < now() AND claimed_by <> ${instanceId}))
            AND claims < ${maxClaims}
          ORDER BY queued_at, id
          FOR UPDATE SKIP LOCKED
          LIMIT 1)
        RETURNING *`.pipe(Effect.map(one)),

    /** Running jobs whose lease expired after their last allowed claim. */
    abandoned: (maxClaims: number) =>
      sql<{ id: string }>`SELECT id FROM recognition_jobs
        WHERE state = 'running' AND lease_until < now() AND claims >= ${maxClaims} LIMIT 100`,

    /**
     * Extends the lease and records progress. False when this instance no longer holds the job
     * (cancelled, or claimed again after a lease this instance let lapse): stop working on it.
     */
    renew: (id: string, instanceId: string, leaseMs: number, progress: { stage: string; fraction: number } | undefined) =>
      sql`UPDATE recognition_jobs
        SET lease_until = now() + make_interval(secs => ${leaseMs / 1000}),
            progress_stage = COALESCE(${progress?.stage ?? null}, progress_stage),
            progress_fraction = COALESCE(${progress?.fraction ?? null}, progress_fraction)
        WHERE id = ${id} AND state = 'running' AND claimed_by = ${instanceId}
        RETURNING id`.pipe(Effect.map((rows) => rows.length > 0)),

    /** The decoded length, once known (shown while the job runs; bounds anonymous minutes). */
    setDuration: (id: string, instanceId: string, seconds: number) =>
      sql`UPDATE recognition_jobs SET audio_duration_s = ${seconds}
        WHERE id = ${id} AND state = 'running' AND claimed_by = ${instanceId}`,

    /**
     * `running` → terminal, only for the claim holder (`instanceId`), or for anyone when
     * `instanceId` is null (a job abandoned after its last claim). Run it inside the transaction
     * that also settles the job's credits and writes its webhook delivery.
     */
    finish: (id: string, instanceId: string | null, outcome: Outcome) =>
      sql<JobRow>`UPDATE recognition_jobs
        SET state = ${outcome.state}, finished_at = now(), lease_until = NULL,
            result = ${json(outcome.result)}::jsonb,
            audio_duration_s = COALESCE(${outcome.audioDurationS ?? null}, audio_duration_s),
            error_code = ${outcome.errorCode ?? null}, error_message = ${outcome.errorMessage ?? null},
            progress_fraction = CASE WHEN ${outcome.state} = 'succeeded' THEN 1 ELSE progress_fraction END
        WHERE id = ${id} AND state = 'running' AND (${instanceId}::text IS NULL OR claimed_by = ${instanceId})
        RETURNING *`.pipe(Effect.map(one)),

    /** A job that failed before it could run (its upload was not media): `uploading` → `failed`. */
    failUpload: (id: string, errorCode: string, errorMessage: string) =>
      sql<JobRow>`UPDATE recognition_jobs
        SET state = 'failed', finished_at = now(), error_code = ${errorCode}, error_message = ${errorMessage}
        WHERE id = ${id} AND state = 'uploading' RETURNING *`.pipe(Effect.map(one)),

    /** Any non-terminal state → `cancelled`; the row as it was before, or undefined when it was terminal. */
    cancel: (id: string) =>
      sql<JobRow>`WITH before AS (SELECT id, state, claimed_by FROM recognition_jobs WHERE id = ${id} FOR UPDATE)
        UPDATE recognition_jobs j SET state = 'cancelled', finished_at = now(), lease_until = NULL
        FROM before
        WHERE j.id = before.id AND before.state IN ('uploading', 'pending', 'running')
        RETURNING before.state AS state, before.claimed_by AS claimed_by, j.id, j.user_id, j.upload_key,
                  j.webhook_id, j.webhook_metadata, j.transcription_id`.pipe(
        Effect.map((rows) => one(rows as ReadonlyArray<Pick<JobRow, "id" | "state" | "claimed_by" | "user_id" | "upload_key" | "webhook_id" | "webhook_metadata" | "transcription_id">>))
      ),

    /** Hands this instance's running jobs back to the queue (clean shutdown): restarts take them at once. */
    requeue: (instanceId: string) =>
      sql`UPDATE recognition_jobs SET state = 'pending', claimed_by = NULL, lease_until = NULL, claims = GREATEST(claims - 1, 0)
        WHERE state = 'running' AND claimed_by = ${instanceId}`,

    /**
     * Hands one job back to the queue while this instance still holds it: its run was cut short
     * by a database outage, which is no fault of the job, so the claim does not count.
     */
    handBack: (id: string, instanceId: string) =>
      sql`UPDATE recognition_jobs SET state = 'pending', claimed_by = NULL, lease_until = NULL, claims = GREATEST(claims - 1, 0)
        WHERE id = ${id} AND state = 'running' AND claimed_by = ${instanceId}`,

    /** Reserved uploads whose address expired unused: removed, their blob keys returned. */
    sweepExpiredUploads: () =>
      sql<{ upload_key: string }>`DELETE FROM recognition_jobs
        WHERE id IN (SELECT id FROM recognition_jobs WHERE state = 'uploading' AND upload_expires_at < now() LIMIT 500)
        RETURNING upload_key`.pipe(Effect.map((rows) => rows.map((r) => r.upload_key))),

    /**
     * Keeps a succeeded job's audio for `windowMs` so that its speakers can be enrolled
     * (actors/SpeakerEnrollment.ts recomputes the voiceprint from it); run it in the terminal
     * transaction.
     */
    keepAudio: (id: string, windowMs: number) =>
      sql`UPDATE recognition_jobs SET audio_kept_until = now() + ${windowMs} * interval '1 millisecond' WHERE id = ${id}`,

    /** Jobs whose enrollment window has passed: no longer marked, their blob keys returned for deletion. */
    sweepKeptAudio: () =>
      sql<{ upload_key: string }>`UPDATE recognition_jobs SET audio_kept_until = NULL
        WHERE id IN (SELECT id FROM recognition_jobs WHERE audio_kept_until < now() LIMIT 500)
        RETURNING upload_key`.pipe(Effect.map((rows) => rows.map((r) => r.upload_key))),

    /** Audio seconds of anonymous jobs from `address` created in the last hour (decoded so far). */
    anonymousSecondsLastHour: (address: string) =>
      sql<{ seconds: number | null }>`SELECT COALESCE(SUM(audio_duration_s), 0) AS seconds FROM recognition_jobs
        WHERE user_id IS NULL AND client_address = ${address} AND created_at > now() - interval '1 hour'
          AND state <> 'cancelled'`.pipe(Effect.map((rows) => Number(rows[0]?.seconds ?? 0))),

    /** Anonymous reservations from `address` still waiting for their upload. */
    openAnonymousUploads: (address: string) =>
      sql<{ n: number | string }>`SELECT count(*) AS n FROM recognition_jobs
        WHERE user_id IS NULL AND client_address = ${address} AND state = 'uploading'`.pipe(Effect.map((rows) => Number(rows[0]?.n ?? 0))),

    /**
     * Removes a finished job and its transcript: false when it did not exist, else the blob key
     * of audio still kept for enrollment (the caller deletes it), or null.
     */
    remove: (id: string) =>
      sql<{ upload_key: string; audio_kept_until: Date | null }>`DELETE FROM recognition_jobs WHERE id = ${id} RETURNING upload_key, audio_kept_until`.pipe(
        Effect.map((rows) => (rows[0] === undefined ? false as const : rows[0].audio_kept_until === null ? null : rows[0].upload_key))
      )
  }
})

export class RecognitionJobs extends Context.Service<RecognitionJobs, Effect.Success<typeof makeRecognitionJobs>>()(
  "speech/storage/RecognitionJobs"
) {}

export const recognitionJobsLayer: Layer.Layer<RecognitionJobs, never, SqlClient> = Layer.effect(RecognitionJobs, makeRecognitionJobs)
