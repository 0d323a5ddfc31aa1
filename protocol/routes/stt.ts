/**
 * Speech-to-text, synchronous (SPEC endpoint 7): multipart upload streamed to a temporary file,
 * or an https URL fetched by the server; then the recognition pipeline; then ElevenLabs' shape.
 */
import { Effect } from "effect"
import { readFileSync, rmSync } from "node:fs"

import { randomBytes } from "node:crypto"
import { fetchToFile } from "../../storage/RemoteMedia.ts"
import { additionalFormats, knownFormats, transcriptText, transcriptWords } from "../../actors/Transcript.ts"
import { Transcriber } from "../../actors/Transcription.ts"
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

/** ISO 639-3 codes the SDKs document for the recognizers here, mapped to the 639-1 the engines use. */
const iso6393: Record<string, string> = { eng: "en", est: "et" }
const toIso6391 = (code: string | undefined): string | undefined => {
  const c = code?.trim().toLowerCase()
  return c === undefined || c === "" ? undefined : iso6393[c] ?? c
}

const truthy = (v: string | undefined) => v !== undefined && /^(true|1|yes|on)$/i.test(v.trim())

/** `additional_formats` as the SDK sends it (a JSON string of objects), or a plain comma list. */
export const parseFormats = (raw: string | undefined): Array<string> => {
  if (raw === undefined || raw.trim() === "") return []
  let items: Array<unknown>
  try {
    const parsed = JSON.parse(raw) as unknown
    items = Array.isArray(parsed) ? parsed : [parsed]
  } catch {
    items = raw.split(",")
  }
  return items.map((i) => (typeof i === "string" ? i : (i as { format?: unknown })?.format)).map((f) => String(f ?? "").trim().toLowerCase())
}

export const sttRoutes = (options: SttRouteOptions): ReadonlyArray<Route<Transcriber>> => {
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
        200: { description: "the transcript", schema: SpeechToTextResponse },
        400: { description: "malformed request, damaged media, unsupported language, bad URL", schema: ErrorBody },
        402: { description: "out of credits (a caller below the minimum charge of 1 credit is refused before the upload is stored)", schema: ErrorBody },
        413: { description: "file over 100 MB", schema: ErrorBody },
        415: { description: "not audio or video", schema: ErrorBody },
        502: { description: "recognition engine failed or missing", schema: ErrorBody },
        503: { description: "too many files being decoded and waiting (STT_MAX_CONCURRENT_DECODES); retry", schema: ErrorBody }
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
            if (truthy(f.webhook)) {
              return yield* badRequest("webhook delivery comes with the asynchronous job flow, which this deployment does not offer yet")
            }
            const granularity = (f.timestamps_granularity ?? "word").trim().toLowerCase()
            if (!["word", "none", "character"].includes(granularity)) {
              return yield* badRequest(`timestamps_granularity must be word, none or character, got ${granularity}`)
            }
            const formats = parseFormats(f.additional_formats)
            const unknown = formats.filter((x) => !knownFormats.has(x))
            if (unknown.length > 0) return yield* badRequest(`unknown additional_formats: ${unknown.join(", ")}; supported: srt, txt, segmented_json (docx, html, pdf are skipped)`)
            const numSpeakers = f.num_speakers !== undefined && f.num_speakers.trim() !== "" ? Number(f.num_speakers) : undefined
            if (numSpeakers !== undefined && !(Number.isInteger(numSpeakers) && numSpeakers >= 1 && numSpeakers <= 32)) {
              return yield* badRequest("num_speakers must be an integer from 1 to 32")
            }
            const url = f.cloud_storage_url ?? f.source_url
            const upload = form.files[0]
            if (upload === undefined && (url === undefined || url.trim() === "")) {
              return yield* badRequest("send the media as the multipart file field, or its https URL in cloud_storage_url")
            }
            const file = upload !== undefined
              ? upload.path
              : (yield* fetchToFile(url!.trim(), { tmpDir: options.tmpDir, maxBytes: MAX_INLINE_BYTES, timeoutMs: 120_000, allowPrivate: options.urlFetch.allowPrivate, ca })).file
            const transcriber = yield* Transcriber
            const result = yield* transcriber.transcribeFile(file, {
              language: toIso6391(f.language_code),
              diarize: truthy(f.diarize),
              numSpeakers,
              userId: ctx.principal?.userId ?? null
            }).pipe(Effect.ensuring(upload === undefined ? Effect.sync(() => removeQuietly(file)) : Effect.void))
            const words = transcriptWords(result.words).map((w) =>
              granularity === "none" ? { text: w.text, type: w.type, ...(w.speaker_id ? { speaker_id: w.speaker_id } : {}), logprob: w.logprob } : w
            )
            const body: Record<string, unknown> = {
              language_code: result.language,
              language_probability: result.languageDetected ? 1 : 0,
              text: transcriptText(result.words),
              words,
              transcription_id: `tr_${randomBytes(8).toString("hex")}`
            }
            if (formats.length > 0) body.additional_formats = additionalFormats(formats, result.words)
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

