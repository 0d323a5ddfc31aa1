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
 *
 * One PUT per address, across instances: before reading a byte the PUT claims the job's upload
 * in the database (`claimUpload`, one UPDATE); a second PUT is 409 `upload_in_progress` while
 * the first is sending and 409 `upload_closed` once it landed, so the recorded size is always
 * the stored file's. A claim is given back when its PUT is refused or broken (the client may
 * try again); an instance that dies mid-upload leaves its claim until the address expires and
 * the sweeper removes the reservation. With `size_bytes` declared at reservation the body must
 * have exactly that many bytes (413 or 400 `upload_size_mismatch` otherwise, nothing kept), as
 * S3 holds the signed Content-Length of its addresses.
 */
import { Effect, Schema } from "effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { detectContainer, SNIFF_BYTES } from "../../engines/media/MediaType.ts"
import { BlobStore, localIoError } from "../../storage/BlobStore.ts"
import { type JobRow, RecognitionJobs } from "../../storage/RecognitionJobs.ts"
import { verifyUpload } from "../../storage/UploadSignature.ts"
import { ApiError, notFound, unsupportedMediaType } from "../ApiError.ts"
import { Reply, type RequestContext, type Route } from "../Http.ts"
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
      400: { description: "fewer bytes than the size_bytes declared at reservation (upload_size_mismatch); nothing was kept", schema: ErrorBody },
      409: { description: "another PUT to this address is still sending (upload_in_progress), or the job is no longer waiting for its upload (upload_closed)", schema: ErrorBody },
      413: { description: "more bytes than the address allows, or than the declared size_bytes (upload_size_mismatch)", schema: ErrorBody },
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
        const known = jobId === undefined ? undefined : yield* jobs.get(jobId)
        if (known === undefined || known.upload_key !== key) return yield* notFound("no such upload", "upload_not_found")
        // One PUT per address, on every instance: the claim is one UPDATE in the shared database,
        // taken before a byte is read; every other PUT is 409 while it is held or once it landed.
        const token = randomBytes(12).toString("hex")
        const job = yield* jobs.claimUpload(known.id, key, token)
        if (job === undefined) {
          const now = (yield* jobs.get(known.id)) ?? known
          if (now.state === "uploading" && now.upload_bytes === null && now.upload_claim !== null) {
            return yield* new ApiError({ status: 409, code: "upload_in_progress", message: `another PUT to this address is still sending job ${now.id}'s file; one upload per address` })
          }
          return yield* new ApiError({ status: 409, code: "upload_closed", message: `job ${now.id} is no longer waiting for its upload (state ${now.state}${now.upload_bytes !== null ? ", its file has landed" : ""})` })
        }
        return yield* receive(job, token, check.grant.maxBytes, options.tmpDir, ctx).pipe(
          // Refused or broken (size, media type, disk, client gone): the address is free again.
          Effect.onExit((exit) => (exit._tag === "Success" ? Effect.void : jobs.releaseUpload(job.id, token).pipe(Effect.ignore)))
        )
      })
  }
]

/** The PUT that holds the address: streams the body to a temporary file, checks it, stores it. */
const receive = (job: JobRow, token: string, maxBytes: number, tmpDir: string, ctx: RequestContext) =>
  Effect.gen(function*() {
    const jobs = yield* RecognitionJobs
    const key = job.upload_key
    // The declared size is a promise the body must keep, as S3 holds a signed Content-Length:
    // a longer body is cut off at the first byte past it, a shorter one refused when it ends.
    const declared = job.declared_bytes === null ? undefined : Number(job.declared_bytes)
    const limit = declared ?? maxBytes
    /** 413 for a body longer than declared (as for one over the address's bound), 400 for a shorter one. */
    const mismatch = (got: number | "more") =>
      new ApiError({
        status: got === "more" ? 413 : 400,
        code: "upload_size_mismatch",
        message: `the upload was reserved with size_bytes ${declared}; the body has ${got === "more" ? "more" : got} bytes. Nothing was kept: PUT exactly ${declared} bytes`
      })
    // A full disk (ENOSPC, EDQUOT) is 507 insufficient_storage, any other write failure 503;
    // either way the partial file is removed (onError below).
    const local = <A>(what: string, run: () => Promise<A>) => Effect.tryPromise({ try: run, catch: (e) => localIoError(what, e) })
    yield* local("upload directory", () => fs.mkdir(tmpDir, { recursive: true }))
    const tmp = path.join(tmpDir, `upload-${randomBytes(8).toString("hex")}`)
    const removeTmp = Effect.promise(() => fs.rm(tmp, { force: true }))
    const received = yield* Effect.acquireUseRelease(
      local("upload file", () => fs.open(tmp, "w")),
      (handle) =>
        Effect.gen(function*() {
          const head: Array<Uint8Array> = []
          let headBytes = 0
          const bytes = yield* ctx.body.chunks(limit, (chunk) => {
            if (headBytes < SNIFF_BYTES) {
              head.push(chunk.subarray(0, SNIFF_BYTES - headBytes))
              headBytes += Math.min(chunk.byteLength, SNIFF_BYTES - headBytes)
            }
            return local("upload file", () => handle.write(chunk)).pipe(Effect.asVoid)
          }).pipe(
            Effect.mapError((e) => (declared !== undefined && e instanceof ApiError && e.status === 413 ? mismatch("more") : e))
          )
          if (declared !== undefined && bytes !== declared) return yield* mismatch(bytes)
          return { bytes, head: Buffer.concat(head) }
        }),
      (handle) => Effect.promise(() => handle.close().catch(() => undefined))
    ).pipe(Effect.onError(() => removeTmp))
    if (detectContainer(received.head) === undefined) {
      yield* removeTmp
      const message = "the uploaded file is not audio or video (its first bytes match no known container)"
      yield* jobs.failUpload(job.id, "unsupported_media_type", message)
      return yield* unsupportedMediaType(message)
    }
    const blobs = yield* BlobStore
    yield* blobs.moveFile(key, tmp).pipe(Effect.onError(() => removeTmp))
    if (!(yield* jobs.markUploaded(job.id, token, received.bytes))) {
      // Cancelled or swept while the bytes arrived: the blob is nobody's. (A start that
      // found the blob before this mark already owns it: leave it.)
      const now = yield* jobs.get(job.id)
      if (now === undefined || now.state === "cancelled" || now.state === "failed") yield* blobs.delete(key).pipe(Effect.ignore)
      return yield* new ApiError({ status: 409, code: "upload_closed", message: `job ${job.id} is no longer waiting for its upload` })
    }
    return Reply.json(200, { job_id: job.id, bytes: received.bytes, state: "uploading" })
  })
