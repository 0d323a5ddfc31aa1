/**
 * The messages of a realtime speech-to-text session (actors/RealtimeTranscription.ts) in the
 * shapes of ElevenLabs' realtime API: its configuration, the audio chunks it takes, why it ends
 * early, and the word objects of its commits. Parsing and encoding them on the wire is
 * protocol/ws/SttRealtimeFrames.ts.
 */
import { type InputAudioFormat, inputSampleRate } from "../engines/audio/InputPcm.ts"

/** The SDK's error message types this service sends (connection.d.ts `ServerErrorMessage`). */
export type RealtimeErrorType =
  | "auth_error"
  | "quota_exceeded"
  | "input_error"
  | "chunk_size_exceeded"
  | "queue_overflow"
  | "session_time_limit_exceeded"
  | "resource_exhausted"
  | "transcriber_error"
  /** No audio for STT_REALTIME_IDLE_S: the session gives its recognizer place back. */
  | "insufficient_audio_activity"
  /** Anything else (a database outage): the SDK's generic error message. */
  | "error"

/** Why a session ends early: sent as `{message_type: type, error: message}`, then the close. */
export class RealtimeRefusal extends Error {
  readonly _tag = "RealtimeRefusal"
  constructor(readonly type: RealtimeErrorType, message: string) {
    super(message)
  }
}

export type CommitStrategy = "manual" | "vad"

export interface RealtimeConfig {
  readonly modelId: string
  readonly audioFormat: InputAudioFormat
  readonly commitStrategy: CommitStrategy
  readonly vadSilenceThresholdSecs: number
  readonly vadThreshold: number
  readonly minSpeechDurationMs: number
  readonly minSilenceDurationMs: number
  /** ISO 639-1, or undefined: the engine's own. */
  readonly languageCode: string | undefined
  readonly includeTimestamps: boolean
  readonly includeLanguageDetection: boolean
  /** Accepted, not used by PocketSphinx (README deviations). */
  readonly keyterms: ReadonlyArray<string>
  readonly noVerbatim: boolean
  readonly enableLogging: boolean
}

export interface AudioChunk {
  /** The chunk's bytes in the session's audio_format (maybe empty: a bare commit). */
  readonly audio: Uint8Array
  /** Duration of `audio`, ms. */
  readonly audioMs: number
  readonly commit: boolean
  readonly previousText: string | undefined
}

/** `session_started.config`, in the SDK's `Config` shape. */
export const echoConfig = (c: RealtimeConfig) => ({
  sample_rate: inputSampleRate(c.audioFormat),
  audio_format: c.audioFormat,
  language_code: c.languageCode ?? null,
  commit_strategy: c.commitStrategy,
  vad_silence_threshold_secs: c.vadSilenceThresholdSecs,
  vad_threshold: c.vadThreshold,
  min_speech_duration_ms: c.minSpeechDurationMs,
  min_silence_duration_ms: c.minSilenceDurationMs,
  model_id: c.modelId,
  enable_logging: c.enableLogging,
  include_timestamps: c.includeTimestamps,
  include_language_detection: c.includeLanguageDetection,
  keyterms: c.keyterms,
  no_verbatim: c.noVerbatim
})

/** ElevenLabs' word objects: words with a spacing between them, seconds on the session clock. */
export interface RealtimeWord {
  readonly text: string
  readonly start: number
  readonly end: number
  readonly type: "word" | "spacing"
  readonly logprob: number
}

const seconds = (ms: number) => Math.round(ms) / 1000

export const timestampedWords = (words: ReadonlyArray<{ text: string; startMs: number; endMs: number; logprob: number }>): Array<RealtimeWord> =>
  words.flatMap((w, i) => {
    const word: RealtimeWord = { text: w.text, start: seconds(w.startMs), end: seconds(w.endMs), type: "word", logprob: w.logprob }
    if (i === 0) return [word]
    const before = words[i - 1]!
    return [{ text: " ", start: seconds(before.endMs), end: seconds(w.startMs), type: "spacing", logprob: 0 } satisfies RealtimeWord, word]
  })
