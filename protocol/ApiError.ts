/**
 * The one error the HTTP edge knows how to answer with, and the table that turns every domain
 * error of the service into it.
 *
 * Domain modules keep their own tagged errors with a `reason`; this file is the only place that
 * decides which status and `detail.status` code a reason becomes (SPEC 2.1, 7). Anything not in
 * the table is an internal fault: the client sees a generic 500 and the log gets the cause with
 * the request id.
 */
import { Data } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import type { OutboundAddressError } from "../storage/OutboundAddress.ts"
import type { RemoteMediaError } from "../storage/RemoteMedia.ts"
import type { SpeechErrorReason } from "../engines/tts/SpeechError.ts"
import type { TranscriptionErrorReason } from "../engines/asr/TranscriptionError.ts"
import type { VoiceCloneError } from "../actors/VoiceCloning.ts"
import type { OutputFormatErrorReason } from "../engines/audio/OutputFormat.ts"
import type { EngineErrorReason } from "../engines/Inference.ts"
import type { AccountsError } from "../storage/AccountsError.ts"
import type { VoiceClonesError } from "../storage/VoiceClones.ts"
import type { RecognitionJobError } from "../actors/RecognitionJobError.ts"
import type { BlobStoreError } from "../storage/BlobStore.ts"
import type { ChunkRequestError } from "../actors/ChunkTranslation.ts"
import type { SummaryRequestError } from "../actors/Summarization.ts"
import type { SummarizerError } from "../engines/summary/Summarizer.ts"
import type { TranslatorError } from "../engines/translate/Translator.ts"

export class ApiError extends Data.TaggedError("ApiError")<{
  readonly status: number
  readonly code: string
  readonly message: string
  /** Extra response headers, e.g. `Allow` on 405. */
  readonly headers?: Readonly<Record<string, string>>
}> {}

export const badRequest = (message: string, code = "invalid_request") => new ApiError({ status: 400, code, message })
export const notFound = (message: string, code = "not_found") => new ApiError({ status: 404, code, message })
export const payloadTooLarge = (limitBytes: number) =>
  new ApiError({ status: 413, code: "payload_too_large", message: `request body exceeds the limit of ${limitBytes} bytes` })
export const unsupportedMediaType = (message: string, code = "unsupported_media_type") =>
  new ApiError({ status: 415, code, message })
export const unauthorized = (message: string, code = "invalid_api_key") => new ApiError({ status: 401, code, message })

/** The SPEC 2.1 error body. */
export const errorBody = (e: ApiError): string => JSON.stringify({ detail: { status: e.code, message: e.message } })

interface Mapping {
  readonly status: number
  readonly code: string
  /** When false the client gets a generic message (the real one is logged). */
  readonly exposeMessage: boolean
  /** The message shown instead when `exposeMessage` is false (default: a generic one per status). */
  readonly publicMessage?: string
  /**
   * A `Retry-After` header, seconds: on overload refusals, so clients (and the SDKs) back off a
   * moment and a retry through the balancer may reach a less busy instance.
   */
  readonly retryAfterS?: number
}

const URL_UNREACHABLE: Mapping = { status: 400, code: "url_unreachable", exposeMessage: false, publicMessage: "the URL could not be fetched" }

/**
 * Every `<_tag>.<reason>` the table must answer: all reasons of each domain error a client can
 * cause or be told about. A reason added to one of these errors without a row fails to compile.
 * Of SqlError only the outages are listed; its other reasons (syntax, constraints, ...) are
 * faults of ours and stay 500s. Infrastructure errors without rows (DatabaseError,
 * BlobStoreError) are 500s too.
 */
export type ErrorKey =
  | `AccountsError.${AccountsError["reason"]}`
  | `EngineError.${EngineErrorReason}`
  | `SpeechError.${SpeechErrorReason}`
  | `VoiceCloneError.${VoiceCloneError["reason"]}`
  | `VoiceClonesError.${VoiceClonesError["reason"]}`
  | `TranscriptionError.${TranscriptionErrorReason}`
  | `RemoteMediaError.${RemoteMediaError["reason"]}`
  | `OutboundAddressError.${OutboundAddressError["reason"]}`
  | `SqlError.${Extract<SqlError["reason"]["_tag"], "ConnectionError" | "AuthenticationError">}`
  | `OutputFormatError.${OutputFormatErrorReason}`
  | `RecognitionJobError.${RecognitionJobError["reason"]}`
  | `BlobStoreError.${BlobStoreError["reason"]}`
  | `ChunkRequestError.${ChunkRequestError["reason"]}`
  | `TranslatorError.${TranslatorError["reason"]}`
  | `SummarizerError.${SummarizerError["reason"]}`
  | `SummaryRequestError.${SummaryRequestError["reason"]}`

/**
 * `<_tag>.<reason>` of each domain error → its HTTP answer. The compiler checks the rows against
 * `ErrorKey`: a missing row or a row for a reason that no longer exists is a type error.
 */
const table = {
  "AccountsError.InvalidKey": { status: 401, code: "invalid_api_key", exposeMessage: true },
  "AccountsError.InsufficientCredits": { status: 402, code: "quota_exceeded", exposeMessage: true },
  "AccountsError.UserNotFound": { status: 404, code: "user_not_found", exposeMessage: true },
  "AccountsError.KeyNotFound": { status: 404, code: "key_not_found", exposeMessage: true },
  "AccountsError.EmailTaken": { status: 409, code: "email_taken", exposeMessage: true },
  "EngineError.QueueFull": { status: 503, code: "server_busy", exposeMessage: true, retryAfterS: 1 },
  "EngineError.SessionsFull": { status: 503, code: "server_busy", exposeMessage: true, retryAfterS: 1 },
  "EngineError.Closed": { status: 503, code: "shutting_down", exposeMessage: true, retryAfterS: 1 },
  "EngineError.TaskFailed": { status: 502, code: "engine_failed", exposeMessage: true },
  "EngineError.WorkerCrashed": { status: 502, code: "engine_failed", exposeMessage: false },
  "SpeechError.VoiceNotFound": { status: 404, code: "voice_not_found", exposeMessage: true },
  "SpeechError.CloneNotAllowed": { status: 404, code: "voice_not_found", exposeMessage: true },
  "SpeechError.InvalidRequest": { status: 400, code: "invalid_request", exposeMessage: true },
  "SpeechError.TextTooLong": { status: 400, code: "text_too_long", exposeMessage: true },
  "SpeechError.EngineFailed": { status: 502, code: "engine_failed", exposeMessage: true },
  "SpeechError.EngineUnavailable": { status: 502, code: "engine_unavailable", exposeMessage: true },
  "VoiceCloneError.SpeechTooShort": { status: 400, code: "sample_too_short", exposeMessage: true },
  "VoiceCloneError.SpeechTooLong": { status: 400, code: "sample_too_long", exposeMessage: true },
  "VoiceCloneError.UnsupportedLanguage": { status: 400, code: "unsupported_language", exposeMessage: true },
  "VoiceCloneError.InvalidRequest": { status: 400, code: "invalid_request", exposeMessage: true },
  "VoiceClonesError.NameTaken": { status: 409, code: "voice_name_taken", exposeMessage: true },
  "VoiceClonesError.NotFound": { status: 404, code: "voice_not_found", exposeMessage: true },
  "TranscriptionError.NotMedia": { status: 415, code: "unsupported_media_type", exposeMessage: true },
  "TranscriptionError.Damaged": { status: 400, code: "invalid_media", exposeMessage: true },
  "TranscriptionError.NoAudio": { status: 400, code: "invalid_media", exposeMessage: true },
  "TranscriptionError.TooLong": { status: 413, code: "payload_too_large", exposeMessage: true },
  "TranscriptionError.UnsupportedLanguage": { status: 400, code: "unsupported_language", exposeMessage: true },
  "TranscriptionError.EngineUnavailable": { status: 502, code: "engine_unavailable", exposeMessage: true },
  "TranscriptionError.EngineFailed": { status: 502, code: "engine_failed", exposeMessage: true },
  // URL input: syntax errors and size are the caller's to fix and reveal nothing about the
  // network; every network outcome gets the same answer (the real reason is logged), so the
  // errors cannot map ports or tell refused ranges from dead hosts.
  "RemoteMediaError.BadUrl": { status: 400, code: "invalid_url", exposeMessage: true },
  "RemoteMediaError.TooLarge": { status: 413, code: "payload_too_large", exposeMessage: true },
  "RemoteMediaError.Refused": URL_UNREACHABLE,
  "RemoteMediaError.Unresolvable": URL_UNREACHABLE,
  "RemoteMediaError.Unreachable": URL_UNREACHABLE,
  "RemoteMediaError.HttpStatus": URL_UNREACHABLE,
  "RemoteMediaError.TooManyRedirects": URL_UNREACHABLE,
  "RemoteMediaError.BadRedirect": URL_UNREACHABLE,
  "RemoteMediaError.TimedOut": URL_UNREACHABLE,
  // The address guard's own error, for callers that let it through unchanged (webhooks).
  "OutboundAddressError.Refused": URL_UNREACHABLE,
  "OutboundAddressError.Unresolvable": URL_UNREACHABLE,
  // The database cannot be reached (down, network cut, credentials refused): the client may
  // retry later; the details (addresses, driver messages) stay in the log.
  "SqlError.ConnectionError": { status: 503, code: "database_unavailable", exposeMessage: false },
  "SqlError.AuthenticationError": { status: 503, code: "database_unavailable", exposeMessage: false },
  "OutputFormatError.UnsupportedCodec": { status: 415, code: "unsupported_output_format", exposeMessage: true },
  "OutputFormatError.UnsupportedSampleRate": { status: 415, code: "unsupported_output_format", exposeMessage: true },
  "OutputFormatError.Malformed": { status: 415, code: "unsupported_output_format", exposeMessage: true },
  "RecognitionJobError.AnonymousQuota": { status: 429, code: "anonymous_quota_exceeded", exposeMessage: true },
  "RecognitionJobError.Abandoned": { status: 502, code: "job_abandoned", exposeMessage: true },
  "RecognitionJobError.UploadTooLarge": { status: 413, code: "payload_too_large", exposeMessage: true },
  // Blob messages name files and keys: the client gets a plain sentence.
  "BlobStoreError.NotFound": { status: 409, code: "upload_missing", exposeMessage: false, publicMessage: "the uploaded file is missing" },
  "BlobStoreError.IoFailed": { status: 503, code: "storage_unavailable", exposeMessage: false },
  // The local disk (DATA_DIR) is full: the partial file is gone, a later retry may fit.
  "BlobStoreError.DiskFull": { status: 507, code: "insufficient_storage", exposeMessage: false, publicMessage: "the server has no room left to store this upload; retry later" },
  "ChunkRequestError.UnknownLanguage": { status: 400, code: "unsupported_language", exposeMessage: true },
  "ChunkRequestError.UnsupportedPair": { status: 400, code: "unsupported_language_pair", exposeMessage: true },
  "ChunkRequestError.TooLong": { status: 400, code: "text_too_long", exposeMessage: true },
  "TranslatorError.UnsupportedPair": { status: 400, code: "unsupported_language_pair", exposeMessage: true },
  "TranslatorError.EngineUnavailable": { status: 502, code: "engine_unavailable", exposeMessage: true },
  "TranslatorError.EngineFailed": { status: 502, code: "engine_failed", exposeMessage: true },
  "TranslatorError.TimedOut": { status: 502, code: "engine_failed", exposeMessage: true },
  "TranslatorError.Busy": { status: 503, code: "server_busy", exposeMessage: true, retryAfterS: 1 },
  // A pair's Apertium pipeline is starting (at start-up, or after it died): 0.3 s on a quiet
  // machine, seconds on a loaded one.
  "TranslatorError.Starting": { status: 503, code: "engine_starting", exposeMessage: true, retryAfterS: 2 },
  "SummarizerError.EngineFailed": { status: 502, code: "engine_failed", exposeMessage: true },
  "SummarizerError.TimedOut": { status: 502, code: "engine_failed", exposeMessage: true },
  "SummarizerError.EmptyTranscript": { status: 409, code: "empty_transcript", exposeMessage: true },
  "SummaryRequestError.UnknownTemplate": { status: 400, code: "unknown_template", exposeMessage: true },
  "SummaryRequestError.JobNotSucceeded": { status: 409, code: "job_not_succeeded", exposeMessage: true }
} satisfies Record<ErrorKey, Mapping>

const rows: Readonly<Record<string, Mapping | undefined>> = table

/** Rows of the table, for the test that checks every mapping and for documentation. */
export const errorTable = (): ReadonlyArray<readonly [string, Mapping]> => Object.entries(table)

/**
 * How a failure is logged (HttpExchange `failed`):
 * - `defect`: nothing in the table knows it (a bug of ours): at error, with its stack;
 * - `outage`: a 5xx the table maps (the database or the disk gone, an engine failing): expected
 *   in operation, at warn as one line with its reason, no stack (a database cut would otherwise
 *   write a stack per request);
 * - `refusal`: the client's mistake (4xx) or load shedding (a 5xx with Retry-After): at debug,
 *   since anyone can cause as many as they like.
 */
export type FailureKind = "defect" | "outage" | "refusal"

/**
 * Turns any failure into the ApiError to send: `internal` is true for every 5xx but load
 * shedding, `kind` says how it is logged. A 5xx that
 * asks the client to retry (Retry-After: a full queue, a shutdown) is load shedding doing its
 * job, not a fault: under overload a stack trace per refused request would flood the log.
 */
export const toApiError = (failure: unknown): { error: ApiError; internal: boolean; kind: FailureKind } => {
  if (failure instanceof ApiError) {
    const internal = failure.status >= 500 && failure.headers?.["retry-after"] === undefined
    return { error: failure, internal, kind: internal ? "defect" : "refusal" }
  }
  const tagged = failure as { _tag?: unknown; reason?: unknown; message?: unknown }
  if (typeof tagged?._tag === "string") {
    // Effect's SqlError carries its reason as a tagged object, not a string.
    const reason = typeof tagged.reason === "object" && tagged.reason !== null ? (tagged.reason as { _tag?: unknown })._tag : tagged.reason
    const row = rows[`${tagged._tag}.${String(reason)}`]
    if (row !== undefined) {
      const message = row.exposeMessage && typeof tagged.message === "string" && tagged.message.length > 0
        ? tagged.message
        : row.publicMessage ?? genericMessage(row.status)
      const headers = row.retryAfterS === undefined ? {} : { headers: { "retry-after": String(row.retryAfterS) } }
      const internal = row.status >= 500 && row.retryAfterS === undefined
      return { error: new ApiError({ status: row.status, code: row.code, message, ...headers }), internal, kind: internal ? "outage" : "refusal" }
    }
  }
  return { error: new ApiError({ status: 500, code: "internal_error", message: genericMessage(500) }), internal: true, kind: "defect" }
}

const genericMessage = (status: number): string =>
  status === 502
    ? "the engine failed to process the request"
    : status === 503
    ? "a service this request needs is unavailable; retry later"
    : "internal server error; see the server log for the request id"

export const statusText: Record<number, string> = {
  200: "OK", 201: "Created", 202: "Accepted", 204: "No Content", 400: "Bad Request", 401: "Unauthorized",
  402: "Payment Required", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 408: "Request Timeout",
  409: "Conflict", 411: "Length Required", 413: "Payload Too Large", 415: "Unsupported Media Type",
  422: "Unprocessable Entity", 429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable",
  507: "Insufficient Storage"
}
