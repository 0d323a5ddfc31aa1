/** Wire schemas of recognition jobs (SPEC 2.6, endpoints 8-11) and transcripts. */
import { Schema } from "effect"
import { SpeechToTextResponse } from "./Stt.ts"

export const CreateUploadRequest = Schema.Struct({
  filename: Schema.optional(Schema.String.check(Schema.isMaxLength(255))),
  content_type: Schema.optional(Schema.String.check(Schema.isMaxLength(255))).annotate({
    description: "audio/*, video/* or application/octet-stream; anything else is 415"
  }),
  size_bytes: Schema.optional(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))).annotate({
    description: "declared size; over the caller's cap is 413 at once"
  })
}).annotate({ identifier: "CreateUploadRequest" })

export const CreateUploadResponse = Schema.Struct({
  job_id: Schema.String,
  state: Schema.Literal("uploading"),
  upload_url: Schema.String.annotate({ description: "PUT the file's bytes here, before expires_at" }),
  expires_at: Schema.String.annotate({ description: "ISO 8601; the address is valid 30 minutes" }),
  max_bytes: Schema.Int.annotate({ description: "25 MB anonymous, UPLOAD_MAX_BYTES with a key" }),
  headers: Schema.Record(Schema.String, Schema.String).annotate({ description: "headers the PUT must carry (empty when none)" })
}).annotate({ identifier: "CreateUploadResponse" })

export const StartJobRequest = Schema.Struct({
  language_code: Schema.optional(Schema.String),
  diarize: Schema.optional(Schema.Boolean),
  num_speakers: Schema.optional(Schema.Int),
  timestamps_granularity: Schema.optional(Schema.Literals(["word", "none", "character"])),
  additional_formats: Schema.optional(Schema.Array(Schema.Struct({ format: Schema.String }))),
  webhook: Schema.optional(Schema.Boolean).annotate({ description: "deliver the result to webhook_id (a key is required)" }),
  webhook_id: Schema.optional(Schema.String),
  webhook_metadata: Schema.optional(Schema.Unknown).annotate({ description: "any JSON, echoed in the delivery" })
}).annotate({ identifier: "StartJobRequest" })

export const StartJobResponse = Schema.Struct({
  job_id: Schema.String,
  state: Schema.Literal("pending"),
  transcription_id: Schema.String
}).annotate({ identifier: "StartJobResponse" })

const JobState = Schema.Literals(["uploading", "pending", "running", "succeeded", "failed", "cancelled"])

const Progress = Schema.Struct({
  stage: Schema.Literals(["queued", "decoding", "detecting_speech", "recognising", "diarizing", "done"]),
  fraction: Schema.Finite.annotate({ description: "of the stage, 0-1" })
})

export const RecognitionJobSummary = Schema.Struct({
  job_id: Schema.String,
  state: JobState,
  created_at: Schema.String,
  started_at: Schema.NullOr(Schema.String),
  finished_at: Schema.NullOr(Schema.String),
  filename: Schema.NullOr(Schema.String),
  audio_duration_s: Schema.NullOr(Schema.Finite),
  transcription_id: Schema.NullOr(Schema.String),
  progress: Schema.NullOr(Progress)
}).annotate({ identifier: "RecognitionJobSummary" })

export const RecognitionJobStatus = Schema.Struct({
  ...RecognitionJobSummary.fields,
  upload_expires_at: Schema.String,
  upload_bytes: Schema.NullOr(Schema.Int),
  result: Schema.optional(SpeechToTextResponse),
  error: Schema.optional(Schema.Struct({ code: Schema.String, message: Schema.String })),
  webhook: Schema.optional(Schema.Struct({
    webhook_id: Schema.String,
    delivery: Schema.NullOr(Schema.Struct({
      event_id: Schema.String,
      state: Schema.Literals(["pending", "delivered", "dead"]),
      attempts: Schema.Int,
      last_status: Schema.NullOr(Schema.Int),
      delivered_at: Schema.NullOr(Schema.String),
      next_attempt_at: Schema.NullOr(Schema.String)
    }))
  }))
}).annotate({ identifier: "RecognitionJobStatus" })

export const RecognitionJobList = Schema.Struct({ jobs: Schema.Array(RecognitionJobSummary) }).annotate({ identifier: "RecognitionJobList" })

export const JobListQuery = Schema.Struct({
  limit: Schema.optional(Schema.NumberFromString.check(Schema.isInt(), Schema.isBetween({ minimum: 1, maximum: 100 }))).annotate({
    description: "1 to 100, default 20"
  })
})

export const WebhookAccepted = Schema.Struct({
  message: Schema.String,
  request_id: Schema.String,
  task_id: Schema.String.annotate({ description: "the job id; GET /recognition/jobs/{task_id} shows it" }),
  transcription_id: Schema.String
}).annotate({ identifier: "SpeechToTextWebhookResponse" })
