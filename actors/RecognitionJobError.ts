/**
 * Why a recognition job failed for reasons of its own (the pipeline's own failures are
 * `TranscriptionError`); mapped to public codes by the protocol's error table.
 */
import { Data } from "effect"

export class RecognitionJobError extends Data.TaggedError("RecognitionJobError")<{
  /**
   * `AnonymousQuota`: the client address used its anonymous audio minutes for this hour.
   * `Abandoned`: every allowed claim ended with its instance gone (the job may crash servers).
   * `UploadTooLarge`: the stored upload is larger than its reservation allowed.
   */
  readonly reason: "AnonymousQuota" | "Abandoned" | "UploadTooLarge"
  readonly message: string
}> {}
