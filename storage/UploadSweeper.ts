/**
 * Removes reserved uploads that never started: once a job's presigned address has expired
 * while it is still `uploading`, nothing can complete it, so its row and any blob a client
 * put there are deleted. Runs every `intervalMs` in every instance (the DELETE is safe to run
 * concurrently: each row goes once). It also deletes the audio that jobs with speaker
 * recognition kept for enrollment once their window (SPEAKER_ENROLL_WINDOW_MINUTES) has passed.
 */
import { Effect, Layer, Schedule } from "effect"
import { BlobStore } from "./BlobStore.ts"
import { RecognitionJobs } from "./RecognitionJobs.ts"

export const sweepExpiredUploads = Effect.gen(function*() {
  const jobs = yield* RecognitionJobs
  const blobs = yield* BlobStore
  const keys = yield* jobs.sweepExpiredUploads()
  for (const key of keys) yield* blobs.delete(key).pipe(Effect.ignore)
  if (keys.length > 0) yield* Effect.logInfo("expired uploads removed", { count: keys.length })
  const kept = yield* jobs.sweepKeptAudio()
  for (const key of kept) yield* blobs.delete(key).pipe(Effect.ignore)
  if (kept.length > 0) yield* Effect.logInfo("audio kept for speaker enrollment removed", { count: kept.length })
  return keys.length + kept.length
})

export const uploadSweeperLayer = (intervalMs: number): Layer.Layer<never, never, RecognitionJobs | BlobStore> =>
  Layer.effectDiscard(
    sweepExpiredUploads.pipe(
      Effect.catchCause((cause) => Effect.logWarning("sweeping expired uploads failed", { cause })),
      Effect.repeat(Schedule.spaced(intervalMs)),
      Effect.forkScoped
    )
  )
