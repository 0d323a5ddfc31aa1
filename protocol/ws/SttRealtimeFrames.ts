/**
 * The wire of `GET /v1/speech-to-text/realtime` (ElevenLabs' realtime speech-to-text, as the
 * official SDK's wrapper/realtime/scribe.js and connection.js speak it): the upgrade's query as a
 * session configuration, client frames as audio chunks, and the server's messages.
 *
 * Every bad value is a `RealtimeRefusal` (the session sends it as its message type, then closes):
 * an unknown `audio_format` or `commit_strategy`, a number outside the SDK's own ranges, a
 * boolean that is not one. Nothing falls back to a default silently. Parameters the engine
 * cannot honour (keyterms, entity detection, transcript edit, no_verbatim, secondary languages,
 * background filtering, logging) are accepted and echoed; README "Deviations" lists them.
 */
import { INPUT_AUDIO_FORMATS, type InputAudioFormat, inputBytesPerSample, inputSampleRate, isInputAudioFormat } from "../../engines/audio/InputPcm.ts"
import { type AudioChunk, type RealtimeConfig, type RealtimeErrorType, RealtimeRefusal } from "../../actors/RealtimeMessages.ts"
import { toIso6391 } from "../TranscriptionOptions.ts"

export { type AudioChunk, echoConfig, type RealtimeConfig, RealtimeRefusal, timestampedWords } from "../../actors/RealtimeMessages.ts"

/** Close code after each error type (RFC 6455 7.4.1): 1009 too big, 1011 our fault, 1013 try later, else 1008. */
export const realtimeCloseCode = (type: RealtimeErrorType): number =>
  type === "chunk_size_exceeded" ? 1009 : type === "transcriber_error" || type === "error" ? 1011 : type === "resource_exhausted" ? 1013 : 1008

/** ElevenLabs' defaults (the realtime API reference). */
const DEFAULTS = { vadSilenceThresholdSecs: 1.5, vadThreshold: 0.4, minSpeechDurationMs: 100, minSilenceDurationMs: 100 }

const inputError = (message: string) => new RealtimeRefusal("input_error", message)

const numberIn = (query: URLSearchParams, name: string, min: number, max: number, fallback: number): number => {
  const raw = query.get(name)
  if (raw === null) return fallback
  const n = raw.trim() === "" ? NaN : Number(raw)
  if (!Number.isFinite(n) || n < min || n > max) throw inputError(`${name} must be a number from ${min} to ${max}; got ${JSON.stringify(raw)}`)
  return n
}

const booleanParam = (query: URLSearchParams, name: string): boolean => {
  const raw = query.get(name)
  if (raw === null) return false
  if (raw === "true") return true
  if (raw === "false") return false
  throw inputError(`${name} must be true or false; got ${JSON.stringify(raw)}`)
}

/** The upgrade's query as a configuration; throws RealtimeRefusal input_error. */
export const realtimeConfig = (query: URLSearchParams): RealtimeConfig => {
  const modelId = query.get("model_id")?.trim() ?? ""
  if (modelId === "") throw inputError("model_id is required (any non-empty value; the service's own engine is used)")
  const format = query.get("audio_format") ?? "pcm_16000"
  if (!isInputAudioFormat(format)) throw inputError(`audio_format must be one of ${INPUT_AUDIO_FORMATS.join(", ")}; got ${JSON.stringify(format)}`)
  const strategy = query.get("commit_strategy") ?? "manual"
  if (strategy !== "manual" && strategy !== "vad") throw inputError(`commit_strategy must be manual or vad; got ${JSON.stringify(strategy)}`)
  const language = query.get("language_code")
  // Booleans the engine ignores are still checked: a typo is an error, not a silent default.
  booleanParam(query, "filter_background_audio")
  return {
    modelId,
    audioFormat: format,
    commitStrategy: strategy,
    vadSilenceThresholdSecs: numberIn(query, "vad_silence_threshold_secs", 0.3, 3, DEFAULTS.vadSilenceThresholdSecs),
    vadThreshold: numberIn(query, "vad_threshold", 0.1, 0.9, DEFAULTS.vadThreshold),
    minSpeechDurationMs: numberIn(query, "min_speech_duration_ms", 50, 2000, DEFAULTS.minSpeechDurationMs),
    minSilenceDurationMs: numberIn(query, "min_silence_duration_ms", 50, 2000, DEFAULTS.minSilenceDurationMs),
    languageCode: language === null || language.trim() === "" ? undefined : toIso6391(language),
    includeTimestamps: booleanParam(query, "include_timestamps"),
    includeLanguageDetection: booleanParam(query, "include_language_detection"),
    keyterms: query.getAll("keyterms"),
    noVerbatim: booleanParam(query, "no_verbatim"),
    enableLogging: query.get("enable_logging") === null ? true : booleanParam(query, "enable_logging")
  }
}

/** Most audio one chunk may carry, ms: the SDK's URL streaming sends 64 KiB pipe reads (2 s at 16 kHz). */
export const MAX_CHUNK_AUDIO_MS = 5000
/** Largest frame, bytes: 5 s at 48 kHz in base64 is 640 KB. Past it: chunk_size_exceeded. */
export const MAX_REALTIME_FRAME_BYTES = 1024 * 1024

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/

/** One text frame as a chunk; throws RealtimeRefusal (input_error, chunk_size_exceeded). */
export const parseClientFrame = (text: string, format: InputAudioFormat): AudioChunk => {
  let frame: unknown
  try {
    frame = JSON.parse(text)
  } catch {
    throw inputError("a frame must be a JSON object; this one is not JSON")
  }
  if (typeof frame !== "object" || frame === null || Array.isArray(frame)) throw inputError("a frame must be a JSON object")
  const f = frame as Record<string, unknown>
  if (f.message_type !== "input_audio_chunk") throw inputError(`message_type must be input_audio_chunk; got ${JSON.stringify(f.message_type)}`)
  const b64 = f.audio_base_64
  if (typeof b64 !== "string") throw inputError("audio_base_64 must be a string (empty for a bare commit)")
  if (b64.length % 4 !== 0 || !BASE64.test(b64)) throw inputError("audio_base_64 is not valid base64")
  if (f.commit !== undefined && typeof f.commit !== "boolean") throw inputError("commit must be a boolean")
  const rate = inputSampleRate(format)
  if (f.sample_rate !== undefined && f.sample_rate !== rate) {
    throw inputError(`sample_rate ${JSON.stringify(f.sample_rate)} does not match the session's audio_format ${format} (${rate} Hz)`)
  }
  if (f.previous_text !== undefined && f.previous_text !== null && typeof f.previous_text !== "string") throw inputError("previous_text must be a string")
  const audio = Buffer.from(b64, "base64")
  const audioMs = (audio.length / inputBytesPerSample(format) / rate) * 1000
  if (audioMs > MAX_CHUNK_AUDIO_MS) {
    throw new RealtimeRefusal("chunk_size_exceeded", `a chunk holds at most ${MAX_CHUNK_AUDIO_MS / 1000} s of audio; this one had ${(audioMs / 1000).toFixed(2)} s`)
  }
  return {
    audio: new Uint8Array(audio.buffer, audio.byteOffset, audio.length),
    audioMs,
    commit: f.commit === true,
    previousText: typeof f.previous_text === "string" ? f.previous_text : undefined
  }
}

export const encodeMessage = (message: { readonly message_type: string } & Record<string, unknown>): string => JSON.stringify(message)
