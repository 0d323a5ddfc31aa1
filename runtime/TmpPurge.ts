/**
 * Temporary upload files (DATA_DIR/tmp, written by protocol/MultipartForm.ts) left behind by a
 * process that died mid-request: deleted before the server accepts requests.
 *
 * Embedded PGlite: a DATA_DIR has one server (storage/PgliteOwnership.ts refuses a second), so
 * at start-up every file there is a leftover and all are deleted. PostgreSQL: instances may
 * share a DATA_DIR, and another instance's file may be an upload or a transcription in
 * progress; only files not modified for `maxAgeMs` are deleted. In both modes files older than
 * `maxAgeMs` are also deleted every hour (or every `maxAgeMs`, if shorter), a safety net for
 * leaks while the server runs. Subdirectories are left alone.
 */
import { Effect, Layer, Schedule } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { Database } from "../storage/Database.ts"

/** Deletes the regular files of `dir` last modified before `olderThanMs` (epoch ms); returns how many. */
export const purgeTmpFiles = (dir: string, olderThanMs: number): number => {
  let entries: Array<fs.Dirent>
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true })
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return 0
    throw error
  }
  let removed = 0
  for (const entry of entries) {
    if (!entry.isFile()) continue
    const file = path.join(dir, entry.name)
    const stat = fs.statSync(file, { throwIfNoEntry: false })
    if (stat === undefined || stat.mtimeMs >= olderThanMs) continue
    fs.rmSync(file, { force: true })
    removed++
  }
  return removed
}

export const tmpPurgeLayer = (options: { readonly dir: string; readonly maxAgeMs: number }): Layer.Layer<never, never, Database> =>
  Layer.effectDiscard(Effect.gen(function*() {
    const database = yield* Database
    const purge = (olderThanMs: number) =>
      Effect.try(() => purgeTmpFiles(options.dir, olderThanMs)).pipe(
        Effect.tap((removed) => removed > 0 ? Effect.logInfo("deleted stale temporary files", { dir: options.dir, files: removed }) : Effect.void),
        Effect.catch((error) => Effect.logWarning("deleting stale temporary files failed", error))
      )
    yield* purge(database.mode === "embedded" ? Number.POSITIVE_INFINITY : Date.now() - options.maxAgeMs)
    yield* Effect.forkScoped(
      Effect.repeat(
        Effect.suspend(() => purge(Date.now() - options.maxAgeMs)),
        Schedule.spaced(Math.min(3_600_000, options.maxAgeMs))
      ).pipe(Effect.delay(Math.min(3_600_000, options.maxAgeMs)))
    )
  }))
