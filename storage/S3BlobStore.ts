/**
 * The blob store on S3-compatible object storage (BLOB_STORE=s3), for deployments with several
 * instances: every instance sees every blob, and clients PUT job uploads straight to the bucket
 * with a presigned PutObject address, so upload bytes never pass through the service.
 *
 * The size bound: when the client declared `size_bytes` at reservation, `Content-Length` is one
 * of the signed headers, so the bucket refuses a PUT of any other length (S3's presigned PUT
 * cannot express a range). Without a declared size the address carries no bound, and the job's
 * start looks at the object (HEAD) and refuses one over the cap (413, object deleted).
 *
 * Hazard: SDK v3 adds a CRC32 of the (empty) body to presigned PUTs by default, which makes any
 * real upload fail the checksum; checksums are computed only when an operation requires them.
 */
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig
} from "@aws-sdk/client-s3"
import { getSignedUrl } from "@aws-sdk/s3-request-presigner"
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import { createReadStream, createWriteStream } from "node:fs"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { Readable } from "node:stream"
import { pipeline } from "node:stream/promises"
import { BlobStoreError, type BlobStoreShape } from "./BlobStore.ts"

export interface S3StoreOptions {
  readonly bucket: string
  /** An S3-compatible server's URL (unset: AWS). Clients PUT to addresses on it, so they must reach it. */
  readonly endpoint?: string | undefined
  readonly region: string
  readonly forcePathStyle: boolean
  /** Unset: the SDK's default credential chain (environment, profile, instance role). */
  readonly credentials?: { readonly accessKeyId: string; readonly secretAccessKey: string } | undefined
}

const notFound = (e: unknown): boolean => {
  const err = e as { name?: string; $metadata?: { httpStatusCode?: number } }
  return err?.name === "NotFound" || err?.name === "NoSuchKey" || err?.$metadata?.httpStatusCode === 404
}

export const makeS3BlobStore = (options: S3StoreOptions): BlobStoreShape => {
  const config: S3ClientConfig = {
    region: options.region,
    forcePathStyle: options.forcePathStyle,
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
    ...(options.endpoint !== undefined ? { endpoint: options.endpoint } : {}),
    ...(options.credentials !== undefined ? { credentials: { ...options.credentials } } : {})
  }
  const client = new S3Client(config)
  const Bucket = options.bucket
  const attempt = <A>(key: string, what: string, run: (signal: AbortSignal) => Promise<A>) =>
    Effect.tryPromise({
      try: run,
      catch: (e) =>
        new BlobStoreError({
          reason: notFound(e) ? "NotFound" : "IoFailed",
          message: `s3 ${what} ${key}: ${e instanceof Error ? e.message : String(e)}`
        })
    }).pipe(Effect.withSpan(`S3BlobStore.${what}`))

  const putFile = (key: string, file: string) =>
    attempt(key, "putFile", async (abortSignal) => {
      const { size } = await fs.stat(file)
      await client.send(new PutObjectCommand({ Bucket, Key: key, Body: createReadStream(file), ContentLength: size }), { abortSignal })
    })

  return {
    put: (key, bytes) => attempt(key, "put", (abortSignal) => client.send(new PutObjectCommand({ Bucket, Key: key, Body: bytes }), { abortSignal })).pipe(Effect.asVoid),
    putFile,
    get: (key) =>
      attempt(key, "get", async (abortSignal) => {
        const out = await client.send(new GetObjectCommand({ Bucket, Key: key }), { abortSignal })
        return await out.Body!.transformToByteArray()
      }),
    exists: (key) =>
      attempt(key, "exists", (abortSignal) => client.send(new HeadObjectCommand({ Bucket, Key: key }), { abortSignal })).pipe(
        Effect.as(true),
        Effect.catch(() => Effect.succeed(false))
      ),
    delete: (key) => attempt(key, "delete", (abortSignal) => client.send(new DeleteObjectCommand({ Bucket, Key: key }), { abortSignal })).pipe(Effect.asVoid),
    presignPut: (key, o) =>
      attempt(key, "presignPut", async () => {
        const expiresIn = Math.max(1, Math.round((o.expiresAt.getTime() - Date.now()) / 1000))
        const bound = o.declaredBytes !== undefined
        const url = await getSignedUrl(
          client,
          new PutObjectCommand({ Bucket, Key: key, ...(bound ? { ContentLength: o.declaredBytes } : {}) }),
          { expiresIn, ...(bound ? { signableHeaders: new Set(["content-length"]) } : {}) }
        )
        // Content-Length is set by every HTTP client from the body; it is listed so a client
        // knows the PUT must be exactly that long.
        const headers: Record<string, string> = bound ? { "content-length": String(o.declaredBytes) } : {}
        return { url, headers }
      }),
    size: (key) =>
      attempt(key, "size", async (abortSignal) => (await client.send(new HeadObjectCommand({ Bucket, Key: key }), { abortSignal })).ContentLength ?? 0),
    head: (key, bytes) =>
      attempt(key, "head", async (abortSignal) => {
        try {
          const out = await client.send(new GetObjectCommand({ Bucket, Key: key, Range: `bytes=0-${Math.max(0, bytes - 1)}` }), { abortSignal })
          return (await out.Body!.transformToByteArray()).subarray(0, bytes)
        } catch (e) {
          // A range of an empty object is unsatisfiable (S3 answers 416): its head is no bytes,
          // as on the local store, so the sniff refuses it instead of the start failing with 500.
          const meta = await client.send(new HeadObjectCommand({ Bucket, Key: key }), { abortSignal })
          if (meta.ContentLength === 0) return new Uint8Array()
          throw e
        }
      }),
    localFile: (key, tmpDir) =>
      Effect.acquireRelease(
        attempt(key, "download", async (abortSignal) => {
          await fs.mkdir(tmpDir, { recursive: true })
          const file = path.join(tmpDir, `blob-${randomBytes(8).toString("hex")}`)
          try {
            const out = await client.send(new GetObjectCommand({ Bucket, Key: key }), { abortSignal })
            await pipeline(out.Body as Readable, createWriteStream(file))
          } catch (e) {
            await fs.rm(file, { force: true })
            throw e
          }
          return file
        }),
        (file) => Effect.promise(() => fs.rm(file, { force: true }))
      ),
    moveFile: (key, file) => putFile(key, file).pipe(Effect.andThen(Effect.promise(() => fs.rm(file, { force: true }))))
  }
}
