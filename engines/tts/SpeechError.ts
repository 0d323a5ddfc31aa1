/**
 * The error of text-to-speech (the `Tts` service and the speech actors), with a reason per
 * condition. Engine failures cross the worker boundary as `EngineError` TaskFailed carrying the
 * engine's reason; `fromEngine` turns those back into this error so the edge can answer
 * 400/404/502 precisely. Main thread only (imports effect): worker code throws `TaskError`.
 */
import { Data } from "effect"
import type { EngineError } from "../Inference.ts"

export type SpeechErrorReason =
  | "VoiceNotFound" // unknown preset or clone (404)
  | "CloneNotAllowed" // clone id on the WebSocket endpoint (404 pointing at the POST endpoint)
  | "InvalidRequest" // the engine refused the request (400)
  | "TextTooLong" // SPEC 4.1 rule 1 (400 text_too_long)
  | "EngineFailed" // the synthesizer failed (502)
  | "EngineUnavailable" // engine not installed or not configured (502)

export class SpeechError extends Data.TaggedError("SpeechError")<{
  readonly reason: SpeechErrorReason
  readonly message: string
}> {}

const engineReasons = new Set<string>(["VoiceNotFound", "InvalidRequest", "EngineFailed", "EngineUnavailable"])

/** A pool failure as the speech error it stands for; queue and shutdown errors pass through. */
export const fromEngine = (e: EngineError): SpeechError | EngineError => {
  if (e.reason === "TaskFailed" && e.failure?.reason !== undefined && engineReasons.has(e.failure.reason)) {
    return new SpeechError({ reason: e.failure.reason as SpeechErrorReason, message: e.failure.message })
  }
  if (e.reason === "WorkerCrashed") {
    // The thread's own error text (a stack, paths) is for the log, never for the client.
    return new SpeechError({ reason: "EngineFailed", message: "synthesis failed: the engine's worker thread stopped; try again" })
  }
  if (e.reason === "TaskFailed") {
    return new SpeechError({ reason: "EngineFailed", message: `synthesis failed: ${e.failure?.message ?? e.message}` })
  }
  return e
}
