/**
 * Opaque binary objects (clone reference samples) on the local disk, under `DATA_DIR/blobs`.
 *
 * Keys are relative paths of safe segments (`clones/vc_…/sample`); a key that could escape the
 * directory is a defect of the caller and dies. Writes go to a temporary file in the same
 * directory and are renamed into place, so a reader never sees half a blob and a crash leaves
 * at worst a `.tmp-…` file. A deployment with object storage provides another Layer of the
 * same service.
 */
import { Context, Data, Effect, Layer } from "effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs/promises"
import * as path from "node:path"

export class BlobStoreError extends Data.TaggedError("BlobStoreError")<{
  readonly reason: "NotFound" | "IoFailed"
  readonly message: string
}> {}

export interface BlobStoreShape {
  readonly put: (key: string, bytes: Uint8Array) => Effect.Effect<void, BlobStoreError>
  /** Copies a local file in (e.g. an upload's temporary file), atomically like `put`. */
  readonly putFile: (key: string, file: string) => Effect.Effect<void, BlobStoreError>
  readonly get: (key: string) => Effect.Effect<Uint8Array, BlobStoreError>
  /** True when the key exists; for tests and housekeeping. */
  readonly exists: (key: string) => Effect.Effect<boolean>
  /** Deleting a missing key succeeds. */
  readonly delete: (key: string) => Effect.Effect<void, BlobStoreError>
}

export class BlobStore extends Context.Service<BlobStore, BlobStoreShape>()("speech/storage/BlobStore") {}

const SEGMENT = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/

export const makeLocalBlobStore = (root: string): BlobStoreShape => {
  const fileOf = (key: string): string => {
    const segments = key.split("/")
    if (segments.length === 0 || !segments.every((s) => SEGMENT.test(s) && s !== "..")) {
      throw new Error(`BlobStore: invalid key ${JSON.stringify(key)}`)
    }
    return path.join(root, ...segments)
  }
  const io = (key: string) => (e: unknown) =>
    new BlobStoreError({
      reason: (e as { code?: string })?.code === "ENOENT" ? "NotFound" : "IoFailed",
      message: `blob ${key}: ${e instanceof Error ? e.message : String(e)}`
    })
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
      }).pipe(Effect.withSpan("BlobStore.delete"))
  }
}

/** The local-directory store rooted at `directory` (normally `DATA_DIR/blobs`). */
export const localBlobStoreLayer = (directory: string): Layer.Layer<BlobStore> =>
  Layer.sync(BlobStore, () => makeLocalBlobStore(directory))
