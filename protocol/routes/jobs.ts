/**
 * Recognition jobs (SPEC 2.6, 3, endpoints 8-11): reserve an upload, PUT the file to the
 * presigned address, start, poll or list, cancel. The work itself is actors/RecognitionJobRunner.ts.
 *
 * Who sees a job: its reserver. A user's job answers only that user's credential (anyone else:
 * 404, so ids cannot be probed); an anonymous job's unguessable id is its capability, readable
 * by whoever holds it, and only startable or cancellable anonymously.
 */
import { Effect } from "effect"
import * as fs from "node:fs/promises"
import { detectContainer, SNIFF_BYTES } from "../../engines/media/MediaType.ts"
import { JobRunner } from "../../actors/RecognitionJobRunner.ts"
import { Transcriber } from "../../actors/Transcription.ts"
import { BlobStore } from "../../storage/BlobStore.ts"
import { deliveryOfJob, Webhooks } from "../../storage/Webhooks.ts"
import { type JobRow, newJobId, RecognitionJobs, TERMINAL_STATES } from "../../storage/RecognitionJobs.ts"
import { ApiError, badRequest, notFound, unsupportedMediaType } from "../ApiError.ts"
import { decodeQuery, optionalJsonObject, parseJson } from "../decode.ts"
import { type Principal, Reply, type RequestContext, type Route } from "../Http.ts"
import { ErrorBody } from "../schemas/ErrorBody.ts"
import {
  CreateUploadRequest,
  CreateUploadResponse,
  JobListQuery,
  RecognitionJobList,
  RecognitionJobStatus,
  StartJobRequest,
  StartJobResponse
} from "../schemas/Jobs.ts"
import { parseTranscriptionOptions } from "../TranscriptionOptions.ts"
import { transcriptRoutes } from "./transcripts.ts"

/** SPEC 4.1 rule 4 / 8: anonymous reservations. */
export const ANONYMOUS_UPLOAD_BYTES = 25 * 1024 * 1024
/**
 * Anonymous reservations one client address may hold open at once: each row and its blob
 * (up to 25 MB) live until used or swept, so an unbounded number would let one address fill
 * the database and the disk.
 */
export const ANONYMOUS_OPEN_UPLOADS = 20
/** SPEC 8: presigned PUT address validity. */
export const UPLOAD_VALIDITY_MS = 30 * 60 * 1000

export interface JobRouteOptions {
  readonly apiBase: string
  readonly maxJsonBodyBytes: number
  /** UPLOAD_MAX_BYTES: the authenticated cap. */
  readonly uploadMaxBytes: number
  /** ANON_MINUTES_PER_HOUR in seconds (0: no cap): a reservation past it is refused at once. */
  readonly anonSecondsPerHour: number
  /** Tells the webhook dispatcher to look now (a poll saw a terminal job with a pending delivery). */
  readonly deliveryDue: Effect.Effect<void>
}

type Services = RecognitionJobs | BlobStore | JobRunner | Transcriber | Webhooks

const conflict = (message: string, code: string) => new ApiError({ status: 409, code, message })

const iso = (d: Date | null): string | null => (d === null ? null : new Date(d).toISOString())

/** A declared content type the service can take: audio, video, or unspecified binary. */
const acceptableType = (type: string): boolean => {
  const t = type.split(";")[0]!.trim().toLowerCase()
  return t.startsWith("audio/") || t.startsWith("video/") || t === "application/octet-stream" || t === "binary/octet-stream"
}

/** The caller's job, or 404 (unknown, or a user's job asked for by someone else). */
export const visibleJob = (jobs: RecognitionJobs["Service"], id: string, principal: Principal | null) =>
  Effect.gen(function*() {
    const job = yield* jobs.get(id)
    if (job === undefined || (job.user_id !== null && job.user_id !== principal?.userId)) {
      return yield* notFound(`no recognition job ${id}`, "job_not_found")
    }
    return job
  })

/** Start and cancel: only the reserver, anonymous for an anonymous job. */
const ownJob = (jobs: RecognitionJobs["Service"], id: string, principal: Principal | null) =>
  Effect.flatMap(jobs.get(id), (job) =>
    job === undefined || job.user_id !== (principal?.userId ?? null)
      ? Effect.fail(notFound(`no recognition job ${id}`, "job_not_found"))
      : Effect.succeed(job))

const progressOf = (job: JobRow) =>
  job.state === "pending" || job.state === "uploading"
    ? job.state === "pending" ? { stage: "queued", fraction: 0 } : null
    : job.state === "succeeded"
    ? { stage: "done", fraction: 1 }
    : job.progress_stage === null
    ? null
    : { stage: job.progress_stage, fraction: Math.round((job.progress_fraction ?? 0) * 1000) / 1000 }

export const jobSummary = (job: JobRow) => ({
  job_id: job.id,
  state: job.state,
  created_at: iso(job.created_at)!,
  started_at: iso(job.started_at),
  finished_at: iso(job.finished_at),
  filename: job.filename,
  audio_duration_s: job.audio_duration_s === null ? null : Math.round(job.audio_duration_s * 1000) / 1000,
  transcription_id: job.transcription_id,
  progress: progressOf(job)
})

const errorDoc = (description: string) => ({ description, schema: ErrorBody })

export const jobRoutes = (options: JobRouteOptions): ReadonlyArray<Route<Services>> => {
  const base = `${options.apiBase}/recognition`
  return [
    {
      method: "POST",
      path: `${base}/uploads`,
      auth: "optional",
      operationId: "createRecognitionUpload",
      summary: "Reserve a recognition job and get a presigned address to PUT its file to (valid 30 minutes)",
      tags: ["recognition jobs"],
      requestBody: { contentType: "application/json", schema: CreateUploadRequest, required: false },
      responses: {
        201: { description: "reserved; PUT the file to upload_url with the listed headers", schema: CreateUploadResponse },
        400: errorDoc("malformed request"),
        402: errorDoc("out of credits"),
        413: errorDoc("declared size over the cap (25 MB anonymous, UPLOAD_MAX_BYTES with a key)"),
        415: errorDoc("declared content type is not audio or video"),
        429: errorDoc("anonymous: this client address used its audio minutes for the hour")
      },
      handler: (ctx) =>
        Effect.gen(function*() {
          const jobs = yield* RecognitionJobs
          const blobs = yield* BlobStore
          const userId = ctx.principal?.userId ?? null
          const body = yield* optionalJsonObject(ctx, options.maxJsonBodyBytes)
          const filename = body.filename ?? null
          const contentType = body.content_type ?? null
          const size = body.size_bytes ?? null
          if (filename !== null && (typeof filename !== "string" || filename.length > 255)) return yield* badRequest("filename must be a string of at most 255 characters")
          if (contentType !== null && (typeof contentType !== "string" || contentType.length > 255)) return yield* badRequest("content_type must be a string")
          if (size !== null && !(typeof size === "number" && Number.isSafeInteger(size) && size >= 0)) return yield* badRequest("size_bytes must be a non-negative integer")
          if (contentType !== null && !acceptableType(contentType as string)) {
            return yield* unsupportedMediaType(`content_type ${contentType} is not audio or video`)
          }
          const maxBytes = userId === null ? ANONYMOUS_UPLOAD_BYTES : options.uploadMaxBytes
          if (size !== null && (size as number) > maxBytes) {
            return yield* new ApiError({
              status: 413,
              code: "payload_too_large",
              message: `size_bytes ${size} is over the limit of ${maxBytes} bytes${userId === null ? " for anonymous uploads; send an API key for larger files" : ""}`
            })
          }
          if (userId === null && (yield* jobs.openAnonymousUploads(ctx.request.remoteAddress)) >= ANONYMOUS_OPEN_UPLOADS) {
            return yield* new ApiError({ status: 429, code: "too_many_uploads", message: `this client address already holds ${ANONYMOUS_OPEN_UPLOADS} anonymous uploads waiting to start; start or cancel them, or send an API key` })
          }
          if (userId === null && options.anonSecondsPerHour > 0) {
            const used = yield* jobs.anonymousSecondsLastHour(ctx.request.remoteAddress)
            if (used >= options.anonSecondsPerHour) {
              return yield* new ApiError({ status: 429, code: "anonymous_quota_exceeded", message: `anonymous transcription is limited to ${options.anonSecondsPerHour / 60} audio minutes per hour per client address; send an API key or retry later` })
            }
          } else yield* (yield* Transcriber).requireCredit(userId)
          const id = newJobId()
          const key = `uploads/${id}`
          const expiresAt = new Date(Date.now() + UPLOAD_VALIDITY_MS)
          const put = yield* blobs.presignPut(key, {
            maxBytes,
            expiresAt,
            declaredBytes: size === null ? undefined : (size as number),
            contentType: contentType === null ? undefined : (contentType as string)
          })
          yield* jobs.reserve({
            id,
            userId,
            clientAddress: userId === null ? ctx.request.remoteAddress : null,
            filename: filename as string | null,
            contentType: contentType as string | null,
            declaredBytes: size as number | null,
            maxBytes,
            uploadKey: key,
            uploadExpiresAt: expiresAt
          })
          return Reply.json(201, { job_id: id, state: "uploading", upload_url: put.url, expires_at: expiresAt.toISOString(), max_bytes: maxBytes, headers: put.headers })
        })
    },
    {
      method: "GET",
      path: `${base}/jobs`,
      auth: "key",
      operationId: "listRecognitionJobs",
      summary: "The caller's recognition jobs, most recent first, without transcripts",
      tags: ["recognition jobs"],
      query: JobListQuery,
      responses: { 200: { description: "jobs", schema: RecognitionJobList }, 400: errorDoc("limit outside 1-100"), 401: errorDoc("no valid credential") },
      handler: (ctx) =>
        Effect.gen(function*() {
          const query = yield* decodeQuery(JobListQuery, ctx)
          const rows = yield* (yield* RecognitionJobs).list(ctx.principal!.userId, query.limit ?? 20)
          return Reply.json(200, { jobs: rows.map(jobSummary) })
        })
    },
    {
      method: "GET",
      path: `${base}/jobs/{job_id}`,
      auth: "optional",
      operationId: "getRecognitionJob",
      summary: "A job's state, progress, and its transcript once succeeded (the synchronous endpoint's body) or error once failed",
      tags: ["recognition jobs"],
      responses: { 200: { description: "status", schema: RecognitionJobStatus }, 401: errorDoc("invalid credential"), 404: errorDoc("no such job for this caller") },
      handler: (ctx) =>
        Effect.gen(function*() {
          const jobs = yield* RecognitionJobs
          const job = yield* visibleJob(jobs, ctx.params.job_id!, ctx.principal)
          const status: Record<string, unknown> = {
            ...jobSummary(job),
            upload_expires_at: iso(job.upload_expires_at),
            upload_bytes: job.upload_bytes === null ? null : Number(job.upload_bytes)
          }
          if (job.state === "succeeded" && job.result !== null) status.result = job.result
          if (job.state === "failed") status.error = { code: job.error_code ?? "failed", message: job.error_message ?? "" }
          if (job.webhook_id !== null) {
            const delivery = (yield* deliveryOfJob(jobs.sql, job.id))[0]
            status.webhook = {
              webhook_id: job.webhook_id,
              delivery: delivery === undefined ? null : {
                event_id: delivery.event_id,
                state: delivery.state,
                attempts: delivery.attempts,
                last_status: delivery.last_status,
                delivered_at: iso(delivery.delivered_at),
                next_attempt_at: delivery.state === "pending" ? iso(delivery.next_attempt_at) : null
              }
            }
            // SPEC 6: a poll that sees a terminal job whose delivery is due sends it now.
            if (delivery?.state === "pending" && new Date(delivery.next_attempt_at).getTime() <= Date.now()) yield* options.deliveryDue
          }
          return Reply.json(200, status)
        })
    },
    {
      method: "POST",
      path: `${base}/jobs/{job_id}/start`,
      auth: "optional",
      operationId: "startRecognitionJob",
      summary: "Queue a reserved job whose upload has landed, with the synchronous endpoint's transcription options",
      tags: ["recognition jobs"],
      requestBody: { contentType: "application/json", schema: StartJobRequest, required: false },
      responses: {
        202: { description: "queued", schema: StartJobResponse },
        400: errorDoc("bad options, or webhook without a usable webhook_id"),
        401: errorDoc("invalid credential"),
        402: errorDoc("out of credits"),
        404: errorDoc("no such job for this caller, or unknown webhook_id"),
        409: errorDoc("the upload has not landed, or the job was already started (or ended)"),
        413: errorDoc("the stored upload is over the job's size limit")
      },
      handler: (ctx) =>
        Effect.gen(function*() {
          const jobs = yield* RecognitionJobs
          const blobs = yield* BlobStore
          const job = yield* ownJob(jobs, ctx.params.job_id!, ctx.principal)
          const body = yield* optionalJsonObject(ctx, options.maxJsonBodyBytes)
          const transcription = yield* parseTranscriptionOptions(body)
          if (transcription.speakerRecognition === true && ctx.principal === null) {
            return yield* badRequest("speaker_recognition needs an API key: voiceprints and saved speakers belong to users")
          }
          let webhookId: string | null = null
          if (body.webhook === true || body.webhook === "true") {
            if (ctx.principal === null) return yield* badRequest("webhook delivery needs an API key: subscriptions belong to users")
            if (typeof body.webhook_id !== "string" || body.webhook_id === "") return yield* badRequest("webhook=true needs webhook_id (POST /webhooks creates one)")
            const hook = yield* (yield* Webhooks).find(ctx.principal.userId, body.webhook_id)
            if (hook === undefined) return yield* notFound(`no active webhook ${body.webhook_id}`, "webhook_not_found")
            webhookId = hook.webhookId
          }
          if (job.state !== "uploading") return yield* conflict(`job ${job.id} was already started (state ${job.state})`, "job_already_started")
          let uploadBytes: number | undefined
          if (job.upload_bytes === null) {
            // Object storage: nobody told us; look.
            const size = yield* blobs.size(job.upload_key).pipe(Effect.catchTag("BlobStoreError", (e) => Effect.succeed(e.reason === "NotFound" ? undefined : -1)))
            if (size === undefined) return yield* conflict(`the upload of job ${job.id} has not landed; PUT the file to its upload_url first`, "upload_missing")
            if (size < 0) return yield* new ApiError({ status: 503, code: "storage_unavailable", message: "the blob store could not be reached; retry" })
            if (size > Number(job.max_bytes)) {
              yield* jobs.failUpload(job.id, "payload_too_large", `the upload has ${size} bytes, over the limit of ${job.max_bytes}`)
              yield* blobs.delete(job.upload_key).pipe(Effect.ignore)
              return yield* new ApiError({ status: 413, code: "payload_too_large", message: `the upload has ${size} bytes, over the limit of ${job.max_bytes}` })
            }
            // The service did not see these bytes arrive: sniff them as the PUT route does.
            const head = yield* blobs.head(job.upload_key, SNIFF_BYTES)
            if (detectContainer(head) === undefined) {
              const message = "the uploaded file is not audio or video (its first bytes match no known container)"
              yield* jobs.failUpload(job.id, "unsupported_media_type", message)
              yield* blobs.delete(job.upload_key).pipe(Effect.ignore)
              return yield* unsupportedMediaType(message)
            }
            uploadBytes = size
          }
          yield* (yield* Transcriber).requireCredit(job.user_id)
          const started = yield* jobs.start(job.id, {
            options: transcription,
            webhookId,
            webhookMetadata: body.webhook_metadata ?? null,
            uploadBytes
          })
          if (started === undefined) return yield* conflict(`job ${job.id} was already started`, "job_already_started")
          yield* (yield* JobRunner).kick
          return Reply.json(202, { job_id: started.id, state: "pending", transcription_id: started.transcription_id })
        })
    },
    {
      method: "POST",
      path: `${base}/jobs/{job_id}/cancel`,
      auth: "optional",
      operationId: "cancelRecognitionJob",
      summary: "Cancel a job that is uploading, queued or running (its work in the pool stops); credits held for it are given back",
      tags: ["recognition jobs"],
      responses: {
        200: { description: "cancelled; previous_state says where it was" },
        401: errorDoc("invalid credential"),
        404: errorDoc("no such job for this caller"),
        409: errorDoc("the job had already ended")
      },
      handler: (ctx) =>
        Effect.gen(function*() {
          const jobs = yield* RecognitionJobs
          const job = yield* ownJob(jobs, ctx.params.job_id!, ctx.principal)
          if (TERMINAL_STATES.has(job.state)) return yield* conflict(`job ${job.id} already ended (${job.state})`, "job_finished")
          const before = yield* (yield* JobRunner).cancel(job.id)
          if (before === undefined) return yield* conflict(`job ${job.id} already ended`, "job_finished")
          return Reply.json(200, { job_id: job.id, state: "cancelled", previous_state: before })
        })
    },
    ...transcriptRoutes(options.apiBase)
  ]
}

/**
 * SPEC 4.1 rule 7: speech-to-text with `webhook=true` becomes a queued job whose result goes to
 * the subscription; the answer (ElevenLabs' webhook response: the SDK reads `message` and
 * `request_id`) comes at once. The inline upload moves into the blob store; a URL is fetched
 * by the job, through the same address guard.
 */
export const queueWebhookTranscription = (
  ctx: RequestContext,
  fields: Readonly<Record<string, string>>,
  media: { readonly file: string; readonly bytes: number; readonly filename: string | null } | { readonly url: string }
) =>
  Effect.gen(function*() {
    const principal = ctx.principal!
    const transcription = yield* parseTranscriptionOptions(fields)
    const webhookId = fields.webhook_id?.trim() ?? ""
    if (webhookId === "") return yield* badRequest("webhook=true needs webhook_id (POST /webhooks creates one)")
    const hook = yield* (yield* Webhooks).find(principal.userId, webhookId)
    if (hook === undefined) return yield* notFound(`no active webhook ${webhookId}`, "webhook_not_found")
    let metadata: unknown = null
    if (fields.webhook_metadata !== undefined && fields.webhook_metadata.trim() !== "") {
      const parsed = parseJson(fields.webhook_metadata)
      if (!parsed.ok) return yield* badRequest(`webhook_metadata must be JSON: ${parsed.message}`)
      metadata = parsed.value
    }
    if ("file" in media) {
      const head = yield* Effect.promise(async () => {
        const handle = await fs.open(media.file, "r")
        try {
          const buffer = new Uint8Array(SNIFF_BYTES)
          return buffer.subarray(0, (await handle.read(buffer, 0, SNIFF_BYTES, 0)).bytesRead)
        } finally {
          await handle.close()
        }
      })
      if (detectContainer(head) === undefined) return yield* unsupportedMediaType("the file is not audio or video (its first bytes match no known container)")
    }
    const id = newJobId()
    const key = `uploads/${id}`
    if ("file" in media) yield* (yield* BlobStore).moveFile(key, media.file)
    const job = yield* (yield* RecognitionJobs).enqueue({
      id,
      userId: principal.userId,
      clientAddress: null,
      filename: "file" in media ? media.filename : null,
      contentType: null,
      declaredBytes: null,
      maxBytes: "file" in media ? media.bytes : 0,
      uploadKey: key,
      uploadBytes: "file" in media ? media.bytes : undefined,
      uploadExpiresAt: new Date(),
      sourceUrl: "url" in media ? media.url : null,
      options: transcription,
      webhookId: hook.webhookId,
      webhookMetadata: metadata
    })
    yield* (yield* JobRunner).kick
    return Reply.json(200, {
      message: "Request accepted; the transcript will be delivered to the webhook",
      request_id: ctx.request.requestId,
      task_id: job.id,
      transcription_id: job.transcription_id
    })
  })
