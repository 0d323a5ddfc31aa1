/**
 * Speech-to-text, synchronous (SPEC endpoint 7): multipart upload streamed to a temporary file,
 * or an https URL fetched by the server; then the recognition pipeline; then ElevenLabs' shape.
 */
import { Effect } from "effect"
import { readFileSync, rmSync } from "node:fs"

import { randomBytes } from "node:crypto"
import { fetchToFile } from "../../storage/RemoteMedia.ts"
import { speechToTextBody } from "../../actors/Transcript.ts"
import { parseTranscriptionOptions, truthy } from "../TranscriptionOptions.ts"
import { queueWebhookTranscription } from "./jobs.ts"
import { Transcriber } from "../../actors/Transcription.ts"
import type { JobRunner } from "../../actors/RecognitionJobRunner.ts"
import type { BlobStore } from "../../storage/BlobStore.ts"
import type { RecognitionJobs } from "../../storage/RecognitionJobs.ts"
import type { Webhooks } from "../../storage/Webhooks.ts"
import { badRequest } from "../ApiError.ts"
import { Reply, type Route } from "../Http.ts"
import { withMultipart } from "../MultipartForm.ts"
import { ErrorBody } from "../schemas/ErrorBody.ts"
import { SpeechToTextRequest, SpeechToTextResponse } from "../schemas/Stt.ts"

/** SPEC 8: inline transcription files. */
export const MAX_INLINE_BYTES = 100 * 1024 * 1024

export interface SttRouteOptions {
  readonly apiBase: string
  readonly tmpDir: string
  readonly urlFetch: { readonly allowPrivate: boolean; readonly caFile: string | undefined }
}

export const sttRoutes = (options: SttRouteOptions): ReadonlyArray<Route<Transcriber | RecognitionJobs | BlobStore | JobRunner | Webhooks>> => {
  const ca = options.urlFetch.caFile !== undefined ? readFileSync(options.urlFetch.caFile, "utf8") : undefined
  return [
    {
      method: "POST",
      path: `${options.apiBase}/speech-to-text`,
      auth: "key",
      operationId: "speechToText",
      summary: "Transcribe an audio or video file (inline, at most 100 MB) or an https URL",
      tags: ["speech-to-text"],
      requestBody: { contentType: "multipart/form-data", schema: SpeechToTextRequest },
      responses: {
        200: { description: "the transcript; with webhook=true only the accepted task (task_id, transcription_id), the transcript goes to the webhook", schema: SpeechToTextResponse },
        400: { description: "malformed request, damaged media, unsupported language, bad URL", schema: ErrorBody },
        402: { description: "out of credits (a caller below the minimum charge of 1 credit is refused before the upload is stored)", schema: ErrorBody },
        413: { description: "file over 100 MB", schema: ErrorBody },
        415: { description: "not audio or video", schema: ErrorBody },
        502: { description: "recognition engine failed or missing", schema: ErrorBody },
        503: { description: "too many files being decoded and waiting (STT_MAX_CONCURRENT_DECODES); retry", schema: ErrorBody },
        507: { description: "the server's disk is full (insufficient_storage); the upload was not kept, retry later", schema: ErrorBody }
      },
      handler: (ctx) =>
        Effect.gen(function*() {
          // Work before payment: a caller who cannot pay the minimum charge is refused (402)
          // before the upload is stored, fetched or decoded.
          yield* (yield* Transcriber).requireCredit(ctx.principal?.userId ?? null)
          return yield* withMultipart(ctx, { tmpDir: options.tmpDir, maxFileBytes: MAX_INLINE_BYTES, fileFields: new Set(["file"]), maxFiles: 1 }, (form) =>
          Effect.gen(function*() {
            const f = form.fields
            if ((f.model_id ?? "").trim() === "") return yield* badRequest("model_id is required (any non-empty value; the service's own engine is used)")
            const transcription = yield* parseTranscriptionOptions(f)
            const url = f.cloud_storage_url ?? f.source_url
            const upload = form.files[0]
            if (upload === undefined && (url === undefined || url.trim() === "")) {
              return yield* badRequest("send the media as the multipart file field, or its https URL in cloud_storage_url")
            }
            if (truthy(f.webhook)) {
              return yield* queueWebhookTranscription(
                ctx,
                f,
                upload !== undefined ? { file: upload.path, bytes: upload.bytes, filename: upload.filename || null } : { url: url!.trim() }
              )
            }
            if (transcription.speakerRecognition === true) {
              return yield* badRequest("speaker_recognition runs in recognition jobs (POST /recognition/uploads, or webhook=true here), where the voiceprints are kept")
            }
            const file = upload !== undefined
              ? upload.path
              : (yield* fetchToFile(url!.trim(), { tmpDir: options.tmpDir, maxBytes: MAX_INLINE_BYTES, timeoutMs: 120_000, allowPrivate: options.urlFetch.allowPrivate, ca })).file
            const transcriber = yield* Transcriber
            const result = yield* transcriber.transcribeFile(file, {
              language: transcription.languageCode,
              diarize: transcription.diarize,
              numSpeakers: transcription.numSpeakers,
              userId: ctx.principal?.userId ?? null
            }).pipe(Effect.ensuring(upload === undefined ? Effect.sync(() => removeQuietly(file)) : Effect.void))
            const body = speechToTextBody(result, { granularity: transcription.timestampsGranularity, formats: transcription.additionalFormats }, `tr_${randomBytes(8).toString("hex")}`)
            return Reply.json(200, body, { "x-audio-duration-ms": String(Math.round(result.durationMs)) })
          }))
        })
    }
  ]
}

const removeQuietly = (file: string) => {
  try {
    rmSync(file, { force: true })
  } catch {
    // a leftover temporary file is not worth failing a finished transcription for
  }
}

