/** Moved to engines/tts/SpeechError.ts (the Tts service makes it); kept so callers' imports stand. */
export * from "../engines/tts/SpeechError.ts"
