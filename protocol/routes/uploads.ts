/**
 * The presigned PUT address of the embedded blob store (BLOB_STORE=local): the service itself
 * receives the upload of a reserved recognition job. The address is its own authority (HMAC
 * over key, expiry and size bound: storage/UploadSignature.ts), so the route needs no API key;
 * a tampered or expired address is 403.
 *
 * The body is streamed to a temporary file while it arrives (never buffered), the size bound is
 * enforced while streaming (413 the moment it is passed), and the first bytes are sniffed when
 * it has landed: anything that is not audio or video fails the job at once (415), with the
 * reason on its status. Only a job still `uploading` accepts its upload, once.
 */
import { Effect, Schema } from "effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { detectContainer, SNIFF_BYTES } from "../../engines/media/MediaType.ts"
import { BlobStore, localIoError } from "../../storage/BlobStore.ts"
import { RecognitionJobs } from "../../storage/RecognitionJobs.ts"
import { verifyUpload } from "../../storage/UploadSignature.ts"
import { ApiError, notFound, unsupportedMediaType } from "../ApiError.ts"
import { Reply, type Route } from "../Http.ts"
import { ErrorBody } from "../schemas/ErrorBody.ts"

export interface UploadRouteOptions {
  readonly apiBase: string
  readonly tmpDir: string
  /** The shared HMAC key the local store signs addresses with. */
  readonly secret: string
}

/** Where the local store's addresses point (`LocalUploads.baseUrl` is the site URL + this). */
export const uploadPath = (apiBase: string) => `${apiBase}/uploads`

const JOB_KEY = /^uploads\/(job_[0-9a-f]{32})$/

export const uploadRoutes = (options: UploadRouteOptions): ReadonlyArray<Route<RecognitionJobs | BlobStore>> => [
  {
    method: "PUT",
    path: `${uploadPath(options.apiBase)}/{key}`,
    auth: "none",
    operationId: "putRecognitionUpload",
    summary: "The presigned upload address of a recognition job (embedded blob store): PUT the file's bytes",
    tags: ["recognition jobs"],
    requestBody: { contentType: "application/octet-stream", schema: Schema.String.annotate({ description: "the file's bytes" }), required: true },
    responses: {
      200: { description: "the upload landed; start the job" },
      403: { description: "the address was altered or has expired", schema: ErrorBody },
      404: { description: "no such upload", schema: ErrorBody },
      409: { description: "the job is no longer waiting for its upload", schema: ErrorBody },
      413: { description: "more bytes than the address allows", schema: ErrorBody },
      415: { description: "not audio or video (the job is failed)", schema: ErrorBody },
      507: { description: "the server's disk is full (insufficient_storage); nothing was kept, retry later", schema: ErrorBody }
    },
    handler: (ctx) =>
      Effect.gen(function*() {
        const key = ctx.params.key!
        const check = verifyUpload(options.secret, key, ctx.request.query, Date.now())
        if (!check.ok) {
          return yield* new ApiError({
            status: 403,
            code: check.reason === "expired" ? "upload_expired" : "invalid_signature",
            message: check.reason === "expired" ? "this upload address has expired; reserve a new upload" : "this upload address is not valid (altered or not issued here)"
          })
        }
        const jobId = JOB_KEY.exec(key)?.[1]
        const jobs = yield* RecognitionJobs
        const job = jobId === undefined ? undefined : yield* jobs.get(jobId)
        if (job === undefined || job.upload_key !== key) return yield* notFound("no such upload", "upload_not_found")
        if (job.state !== "uploading" || job.upload_bytes !== null) {
          return yield* new ApiError({ status: 409, code: "upload_closed", message: `job ${job.id} is no longer waiting for its upload (state ${job.state})` })
        }
        // A full disk (ENOSPC, EDQUOT) is 507 insufficient_storage, any other write failure 503;
        // either way the partial file is removed (onError below).
        const local = <A>(what: string, run: () => Promise<A>) => Effect.tryPromise({ try: run, catch: (e) => localIoError(what, e) })
        yield* local("upload directory", () => fs.mkdir(options.tmpDir, { recursive: true }))
        const tmp = path.join(options.tmpDir, `upload-${randomBytes(8).toString("hex")}`)
        const received = yield* Effect.acquireUseRelease(
          local("upload file", () => fs.open(tmp, "w")),
          (handle) =>
            Effect.gen(function*() {
              const head: Array<Uint8Array> = []
              let headBytes = 0
              const bytes = yield* ctx.body.chunks(check.grant.maxBytes, (chunk) => {
                if (headBytes < SNIFF_BYTES) {
                  head.push(chunk.subarray(0, SNIFF_BYTES - headBytes))
                  headBytes += Math.min(chunk.byteLength, SNIFF_BYTES - headBytes)
                }
                return local("upload file", () => handle.write(chunk)).pipe(Effect.asVoid)
              })
              return { bytes, head: Buffer.concat(head) }
            }),
          (handle) => Effect.promise(() => handle.close().catch(() => undefined))
        ).pipe(Effect.onError(() => Effect.promise(() => fs.rm(tmp, { force: true }))))
        if (detectContainer(received.head) === undefined) {
          yield* Effect.promise(() => fs.rm(tmp, { force: true }))
          const message = "the uploaded file is not audio or video (its first bytes match no known container)"
          yield* jobs.failUpload(job.id, "unsupported_media_type", message)
          return yield* unsupportedMediaType(message)
        }
        const blobs = yield* BlobStore
        yield* blobs.moveFile(key, tmp).pipe(Effect.onError(() => Effect.promise(() => fs.rm(tmp, { force: true }))))
        if (!(yield* jobs.markUploaded(job.id, received.bytes))) {
          // Cancelled or swept while the bytes arrived: the blob is nobody's. (A start that
          // found the blob before this mark already owns it: leave it.)
          const now = yield* jobs.get(job.id)
          if (now === undefined || now.state === "cancelled" || now.state === "failed") yield* blobs.delete(key).pipe(Effect.ignore)
          return yield* new ApiError({ status: 409, code: "upload_closed", message: `job ${job.id} is no longer waiting for its upload` })
        }
        return Reply.json(200, { job_id: job.id, bytes: received.bytes, state: "uploading" })
      })
  }
]
