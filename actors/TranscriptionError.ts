/**
 * Moved to engines/asr/TranscriptionError.ts (the Recognizer and MediaDecoder services make it);
 * kept so callers' imports stand.
 */
export * from "../engines/asr/TranscriptionError.ts"
