/**
 * Streaming multipart/form-data: file parts go straight to temporary files while the body
 * arrives (never held whole in memory), text fields are collected with small limits.
 *
 * The size limit of each file is enforced as bytes arrive: past it the request fails with 413
 * at once and the rest of the body is not read (the bridge then closes the connection).
 * Backpressure: a chunk is handed to the parser only after the previous one was accepted, and
 * the socket stays paused while that waits, so a slow disk slows the client, not memory.
 * Temporary files are removed when `withMultipart`'s body ends, whatever happens: after every
 * write stream has closed, since a stream destroyed while its file is still being opened creates
 * the file afterwards (removing first left empty files behind truncated uploads).
 *
 * Hazard: every part stream busboy hands out, kept or discarded, errors when the parser is
 * destroyed mid-part (413, client gone, malformed body); an 'error' without a listener ends the
 * process, so each one gets a listener the moment it appears.
 */
import busboy from "busboy"
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import { createWriteStream, mkdirSync, rmSync, type WriteStream } from "node:fs"
import type { Readable } from "node:stream"
import * as path from "node:path"
import { localIoError } from "../storage/BlobStore.ts"
import { type ApiError, badRequest, payloadTooLarge, toApiError, unsupportedMediaType } from "./ApiError.ts"
import type { RequestContext } from "./Http.ts"

export interface UploadedFile {
  readonly field: string
  readonly path: string
  readonly bytes: number
  readonly filename: string
  /** As declared by the client; SDKs send application/octet-stream, so never trust it. */
  readonly declaredType: string
}

export interface MultipartForm {
  /** Last value of each text field. */
  readonly fields: Readonly<Record<string, string>>
  readonly files: ReadonlyArray<UploadedFile>
}

export interface MultipartOptions {
  readonly tmpDir: string
  /** Per file, bytes. */
  readonly maxFileBytes: number
  /** File fields kept; other file parts are read and discarded. */
  readonly fileFields: ReadonlySet<string>
  /** At most this many kept files (the rest are discarded), e.g. 1 for the first clone sample. */
  readonly maxFiles?: number
  readonly maxFieldBytes?: number
  readonly maxFields?: number
}

const fieldDefaults = { maxFieldBytes: 256 * 1024, maxFields: 100 }

export const withMultipart = <A, E, R>(
  ctx: RequestContext,
  options: MultipartOptions,
  use: (form: MultipartForm) => Effect.Effect<A, E, R>
): Effect.Effect<A, E | ApiError, R> => {
  const temp: TempFiles = { paths: [], streams: [] }
  return Effect.flatMap(parse(ctx, options, temp), use).pipe(Effect.ensuring(removeTempFiles(temp)))
}

interface TempFiles {
  readonly paths: Array<string>
  readonly streams: Array<WriteStream>
}

/** Closes every write stream (waiting for its 'close'), then removes the files. */
const removeTempFiles = (temp: TempFiles) =>
  Effect.promise(async () => {
    await Promise.all(temp.streams.map((out) =>
      out.closed ? undefined : new Promise<void>((resolve) => {
        out.once("close", () => resolve())
        out.destroy()
      })
    ))
    for (const file of temp.paths) rmSync(file, { force: true })
  })

/** Reads a part to nowhere; its 'error' (parser destroyed mid-part) is expected and ignored. */
const discard = (stream: Readable) => {
  stream.on("error", ignore)
  stream.resume()
}
const ignore = () => {}

const parse = (ctx: RequestContext, options: MultipartOptions, temp: TempFiles): Effect.Effect<MultipartForm, ApiError> =>
  Effect.suspend(() => {
    const contentType = ctx.request.headers["content-type"] ?? ""
    if (!/^multipart\/form-data/i.test(contentType)) {
      return Effect.fail(unsupportedMediaType(`expected multipart/form-data, got ${contentType || "no content type"}`))
    }
    mkdirSync(options.tmpDir, { recursive: true })
    const maxFieldBytes = options.maxFieldBytes ?? fieldDefaults.maxFieldBytes
    const maxFields = options.maxFields ?? fieldDefaults.maxFields
    let parser: busboy.Busboy
    try {
      parser = busboy({
        headers: { "content-type": contentType },
        // busboy reports `limit` when a file reaches fileSize, so one byte more lets a file of
        // exactly maxFileBytes through and refuses the first byte past it.
        limits: { fileSize: options.maxFileBytes + 1, fieldSize: maxFieldBytes, fields: maxFields, parts: maxFields + 20 }
      })
    } catch (e) {
      return Effect.fail(badRequest(`malformed multipart request: ${(e as Error).message}`))
    }
    const fields: Record<string, string> = {}
    const files: Array<UploadedFile> = []
    const pendingWrites: Array<Promise<void>> = []
    let failure: ApiError | undefined
    let closed = false
    let onSettled: (() => void) | undefined
    const fail = (e: ApiError) => {
      failure ??= e
      onSettled?.()
    }
    parser.on("field", (name, value, info) => {
      // busboy names a part with name="" (or none) undefined: no field can be read by that name.
      if ((name as string | undefined) === undefined) return
      if (info.valueTruncated) return fail(badRequest(`field ${name} is longer than ${maxFieldBytes} bytes`))
      // PostgreSQL text cannot hold NUL, and no field here has a use for it.
      if (value.includes("\u0000") || name.includes("\u0000")) return fail(badRequest(`field ${name.replaceAll("\u0000", "")} contains a NUL character`))
      fields[name] = value
    })
    parser.on("file", (name, stream, info) => {
      if (!options.fileFields.has(name) || files.length >= (options.maxFiles ?? Infinity) || failure !== undefined) {
        return discard(stream)
      }
      const file = path.join(options.tmpDir, `upload-${randomBytes(8).toString("hex")}`)
      temp.paths.push(file)
      const out = createWriteStream(file)
      temp.streams.push(out)
      const entry = { field: name, path: file, bytes: 0, filename: info.filename ?? "", declaredType: info.mimeType ?? "" }
      files.push(entry)
      stream.on("data", (d: Buffer) => {
        entry.bytes += d.length
      })
      // Destroying the parser (413, client gone, malformed body) errors the part still open
      // ("Unexpected end of file"): unhandled, that 'error' would crash the process. The
      // request's answer is already decided by then; just release the temporary file.
      stream.on("error", () => out.destroy())
      stream.on("limit", () => {
        fail(payloadTooLarge(options.maxFileBytes))
        stream.unpipe(out)
        discard(stream)
        out.destroy()
      })
      pendingWrites.push(new Promise((resolve) => {
        out.on("close", () => resolve())
        out.on("error", (e) => {
          // Not the client's doing: a full disk is 507, any other write failure 503 (the
          // details, which name files, go to the log). The partial file is removed with the
          // others when the form's body ends.
          fail(toApiError(localIoError("multipart upload", e)).error)
          // The part must keep flowing, or busboy would wait on it and the body never drain.
          stream.unpipe(out)
          discard(stream)
          resolve()
        })
      }))
      stream.pipe(out)
    })
    parser.on("fieldsLimit", () => fail(badRequest(`more than ${maxFields} fields`)))
    // Past the part limit busboy ignores every later part without an error: say so, rather than
    // answer as if the real file part had never been sent.
    parser.on("partsLimit", () => fail(badRequest(`more than ${maxFields + 20} parts`)))
    parser.on("error", (e: Error) => fail(badRequest(`malformed multipart body: ${e.message}`)))
    parser.on("close", () => {
      closed = true
      onSettled?.()
    })

    // The body may be a little larger than the file limit (boundaries, other fields).
    const bodyLimit = options.maxFileBytes + maxFieldBytes * 4 + 64 * 1024
    const feed = ctx.body.chunks(bodyLimit, (chunk) =>
      Effect.callback<void, ApiError>((resume) => {
        if (failure !== undefined) return resume(Effect.fail(failure))
        if (parser.write(chunk)) return resume(failure === undefined ? Effect.void : Effect.fail(failure))
        parser.once("drain", () => resume(failure === undefined ? Effect.void : Effect.fail(failure)))
      }))
    const finish = Effect.callback<void, ApiError>((resume) => {
      if (failure !== undefined) return resume(Effect.fail(failure))
      onSettled = () => resume(failure === undefined ? Effect.void : Effect.fail(failure))
      parser.end()
      if (closed) onSettled()
    })
    return feed.pipe(
      Effect.andThen(finish),
      Effect.andThen(Effect.promise(() => Promise.all(pendingWrites))),
      Effect.flatMap(() => (failure !== undefined ? Effect.fail(failure) : Effect.succeed({ fields, files }))),
      Effect.tapError(() => Effect.sync(() => parser.destroy()))
    )
  })
