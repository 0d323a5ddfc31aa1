/**
 * The error of the recognition pipeline (the `MediaDecoder`, `Recognizer` and `SpeakerEmbedding`
 * services and the transcriber), with a reason per condition; the edge maps each to its status
 * (415 not media, 400 damaged or unsupported, 502 engine trouble). Main thread only (imports
 * effect): worker code throws `TaskError`, the decoder `MediaError`.
 */
import { Data } from "effect"
import type { EngineError } from "../Inference.ts"

export type TranscriptionErrorReason =
  | "NotMedia" // the bytes are not audio or video (415)
  | "Damaged" // media that cannot be decoded (400)
  | "NoAudio" // a container without an audio stream (400)
  | "TooLong" // longer than the deployment allows (413)
  | "UnsupportedLanguage" // a language no recognizer here covers (400)
  | "EngineUnavailable" // recognizer library or model missing (502, names the package)
  | "EngineFailed" // decoder, VAD or recognizer failed (502)

export class TranscriptionError extends Data.TaggedError("TranscriptionError")<{
  readonly reason: TranscriptionErrorReason
  readonly message: string
}> {}

const reasons = new Set<string>(["NotMedia", "Damaged", "NoAudio", "TooLong", "UnsupportedLanguage", "EngineUnavailable", "EngineFailed"])

/** A worker failure (AsrError/VadError by name and reason) as a TranscriptionError. */
export const transcriptionFromEngine = (e: EngineError): TranscriptionError | EngineError => {
  // A dead thread's message is an uncaught error's (a bug's) text: the log has it, the client
  // gets a plain sentence (the 502 row exposes TranscriptionError messages).
  if (e.reason === "WorkerCrashed") return new TranscriptionError({ reason: "EngineFailed", message: "the recognition engine's worker thread failed; retry the request" })
  if (e.reason === "TaskFailed") {
    const reason = e.failure?.reason
    return new TranscriptionError({
      reason: reason !== undefined && reasons.has(reason) ? (reason as TranscriptionErrorReason) : "EngineFailed",
      message: e.failure?.message ?? e.message
    })
  }
  return e
}

/** A MediaError thrown by the decoder (plain class with `_tag` and `reason`). */
export const transcriptionFromMedia = (e: unknown): TranscriptionError => {
  const m = e as { _tag?: string; reason?: string; message?: string }
  if (m?._tag === "MediaError") {
    const reason = m.reason === "DecoderUnavailable" ? "EngineUnavailable"
      : m.reason === "TimedOut" || m.reason === "Aborted" ? "EngineFailed"
      : (m.reason as TranscriptionErrorReason)
    return new TranscriptionError({ reason: reasons.has(reason) ? reason : "EngineFailed", message: m.message ?? "media decoding failed" })
  }
  return new TranscriptionError({ reason: "EngineFailed", message: `media decoding failed: ${e instanceof Error ? e.message : String(e)}` })
}
