/**
 * Opaque binary objects: clone reference samples, and uploads of recognition jobs, which
 * clients PUT to a presigned address. `makeLocalBlobStore` keeps them on the local disk, under
 * `DATA_DIR/blobs`, and its presigned addresses point at the service itself (the PUT route
 * checks storage/UploadSignature.ts); storage/S3BlobStore.ts keeps them in an S3 bucket.
 *
 * Keys are relative paths of safe segments (`clones/vc_…/sample`); a key that could escape the
 * directory is a defect of the caller and dies. Writes go to a temporary file in the same
 * directory and are renamed into place, so a reader never sees half a blob and a crash leaves
 * at worst a `.tmp-…` file. A deployment with object storage provides another Layer of the
 * same service.
 */
import { Context, Data, Effect, Layer, type Scope } from "effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { uploadQuery } from "./UploadSignature.ts"

export class BlobStoreError extends Data.TaggedError("BlobStoreError")<{
  /** DiskFull: the local filesystem has no room (ENOSPC) or the user's quota is spent (EDQUOT). */
  readonly reason: "NotFound" | "IoFailed" | "DiskFull"
  readonly message: string
}> {}

/** True for a write refused because the filesystem (or the quota) is full. */
export const isDiskFull = (e: unknown): boolean => {
  const code = (e as { code?: unknown } | null)?.code
  return code === "ENOSPC" || code === "EDQUOT"
}

/** A failed local file operation as a BlobStoreError: DiskFull when there is no room, else IoFailed. */
export const localIoError = (what: string, e: unknown): BlobStoreError =>
  new BlobStoreError({
    reason: isDiskFull(e) ? "DiskFull" : (e as { code?: string } | null)?.code === "ENOENT" ? "NotFound" : "IoFailed",
    message: `${what}: ${e instanceof Error ? e.message : String(e)}`
  })

export interface BlobStoreShape {
  readonly put: (key: string, bytes: Uint8Array) => Effect.Effect<void, BlobStoreError>
  /** Copies a local file in (e.g. an upload's temporary file), atomically like `put`. */
  readonly putFile: (key: string, file: string) => Effect.Effect<void, BlobStoreError>
  readonly get: (key: string) => Effect.Effect<Uint8Array, BlobStoreError>
  /** True when the key exists; for tests and housekeeping. */
  readonly exists: (key: string) => Effect.Effect<boolean>
  /** Deleting a missing key succeeds. */
  readonly delete: (key: string) => Effect.Effect<void, BlobStoreError>
  /**
   * An address a client may PUT the blob's bytes to until `expiresAt`, at most `maxBytes`
   * (`declaredBytes`, when the client said, may be bound exactly), with the headers the PUT must
   * carry (empty when none).
   */
  readonly presignPut: (key: string, options: PresignOptions) => Effect.Effect<PresignedPut, BlobStoreError>
  /** Size in bytes of a stored blob; NotFound when absent. */
  readonly size: (key: string) => Effect.Effect<number, BlobStoreError>
  /** Up to the first `bytes` bytes (content sniffing); NotFound when absent. */
  readonly head: (key: string, bytes: number) => Effect.Effect<Uint8Array, BlobStoreError>
  /**
   * A local file holding the blob while the scope is open (ffmpeg reads files): the stored file
   * itself on disk, a download under `tmpDir` removed at scope close for object storage.
   */
  readonly localFile: (key: string, tmpDir: string) => Effect.Effect<string, BlobStoreError, Scope.Scope>
  /**
   * Moves a local file in, atomically (an upload received by the service itself); the source
   * is gone afterwards.
   */
  readonly moveFile: (key: string, file: string) => Effect.Effect<void, BlobStoreError>
}

export interface PresignOptions {
  readonly maxBytes: number
  readonly expiresAt: Date
  readonly declaredBytes?: number | undefined
  readonly contentType?: string | undefined
}

export interface PresignedPut {
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
}

/** How the local store's presigned addresses look: `${baseUrl()}/${encodeURIComponent(key)}?expires&max&sig`. */
export interface LocalUploads {
  /** Absolute URL of the PUT route, read per address (the port is known only after listening). */
  readonly baseUrl: () => string
  /** Shared HMAC key (storage/ServiceSecrets.ts). */
  readonly secret: string
}

export class BlobStore extends Context.Service<BlobStore, BlobStoreShape>()("speech/storage/BlobStore") {}

const SEGMENT = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/

export const makeLocalBlobStore = (root: string, uploads?: LocalUploads): BlobStoreShape => {
  const fileOf = (key: string): string => {
    const segments = key.split("/")
    if (segments.length === 0 || !segments.every((s) => SEGMENT.test(s) && s !== "..")) {
      throw new Error(`BlobStore: invalid key ${JSON.stringify(key)}`)
    }
    return path.join(root, ...segments)
  }
  const io = (key: string) => (e: unknown) => localIoError(`blob ${key}`, e)
  const atomically = (key: string, write: (tmp: string) => Promise<void>) =>
    Effect.suspend(() => {
      const file = fileOf(key)
      const tmp = `${file}.tmp-${randomBytes(6).toString("hex")}`
      return Effect.tryPromise({
        try: async () => {
          await fs.mkdir(path.dirname(file), { recursive: true })
          try {
            await write(tmp)
            await fs.rename(tmp, file)
          } catch (e) {
            await fs.rm(tmp, { force: true })
            throw e
          }
        },
        catch: io(key)
      })
    })
  return {
    put: (key, bytes) => atomically(key, (tmp) => fs.writeFile(tmp, bytes)).pipe(Effect.withSpan("BlobStore.put")),
    putFile: (key, source) => atomically(key, (tmp) => fs.copyFile(source, tmp)).pipe(Effect.withSpan("BlobStore.putFile")),
    get: (key) =>
      Effect.suspend(() => Effect.tryPromise({ try: async () => new Uint8Array(await fs.readFile(fileOf(key))), catch: io(key) })).pipe(
        Effect.withSpan("BlobStore.get")
      ),
    exists: (key) =>
      Effect.suspend(() => Effect.promise(() => fs.access(fileOf(key)).then(() => true, () => false))),
    delete: (key) =>
      Effect.suspend(() => {
        const file = fileOf(key)
        return Effect.tryPromise({
          try: async () => {
            await fs.rm(file, { force: true })
            // Drop the key's now-empty folder; one that still holds something stays.
            await fs.rmdir(path.dirname(file)).catch(() => undefined)
          },
          catch: io(key)
        })
      }).pipe(Effect.withSpan("BlobStore.delete")),
    presignPut: (key, options) =>
      Effect.suspend(() => {
        if (uploads === undefined) return Effect.die(new Error("BlobStore: this local store was made without presigned uploads"))
        fileOf(key)
        const grant = { key, expires: Math.floor(options.expiresAt.getTime() / 1000), maxBytes: options.maxBytes }
        return Effect.succeed({ url: `${uploads.baseUrl()}/${encodeURIComponent(key)}?${uploadQuery(uploads.secret, grant)}`, headers: {} })
      }),
    size: (key) =>
      Effect.suspend(() => Effect.tryPromise({ try: async () => (await fs.stat(fileOf(key))).size, catch: io(key) })),
    head: (key, bytes) =>
      Effect.suspend(() =>
        Effect.tryPromise({
          try: async () => {
            const handle = await fs.open(fileOf(key), "r")
            try {
              const buffer = new Uint8Array(bytes)
              const { bytesRead } = await handle.read(buffer, 0, bytes, 0)
              return buffer.subarray(0, bytesRead)
            } finally {
              await handle.close()
            }
          },
          catch: io(key)
        })
      ),
    localFile: (key) =>
      Effect.suspend(() => {
        const file = fileOf(key)
        return Effect.tryPromise({ try: () => fs.access(file).then(() => file), catch: io(key) })
      }),
    moveFile: (key, source) =>
      atomically(key, async (tmp) => {
        try {
          await fs.rename(source, tmp)
        } catch (e) {
          // Another filesystem: copy, then remove the source.
          if ((e as { code?: string }).code !== "EXDEV") throw e
          await fs.copyFile(source, tmp)
          await fs.rm(source, { force: true })
        }
      }).pipe(Effect.withSpan("BlobStore.moveFile"))
  }
}

/** The local-directory store rooted at `directory` (normally `DATA_DIR/blobs`). */
export const localBlobStoreLayer = (directory: string, uploads?: LocalUploads): Layer.Layer<BlobStore> =>
  Layer.sync(BlobStore, () => makeLocalBlobStore(directory, uploads))
