/**
 * The language of a clone sample when the caller gave none (the ElevenLabs SDK's
 * `voices.ivc.create` never sends one). Two signals, both measured (numbers in the README):
 *
 *  - Text: `refText` (a transcript of the sample), else `previewText` or `description`, through
 *    tinyld (a maintained n-gram language identifier that knows Estonian). Short strings are
 *    unreliable (3-word descriptions come back Finnish or Afrikaans), so a text needs at least
 *    MIN_TEXT_WORDS words, and its answer must be a language the catalogue speaks.
 *  - Sound: the English recogniser (PocketSphinx, US English) run over the sample. On English
 *    speech most words come back with a high posterior; on other languages it still outputs
 *    English words, but unsure ones. The duration-weighted mean word confidence separates them.
 */
import { createRequire } from "node:module"
import type { detectAll as DetectAll } from "tinyld"
import { languageInfo, presetsForLanguage } from "../engines/tts/Voices.ts"

/** Fewer letter-bearing words than this and a text is not used to guess a language. */
export const MIN_TEXT_WORDS = 4

/**
 * Duration-weighted mean PocketSphinx word confidence at or above which a sample is English.
 * Measured (6–30 s samples, VAD segments recognised one by one as the clone path does): real
 * English speech (LibriVox clips of pocketsphinx-testdata) 0.73–0.75; the ten Estonian espeak
 * presets 0.24–0.53; Finnish, German and Russian espeak presets 0.14–0.55; synthetic English
 * (Flite) 0.49–0.71, so some synthetic English falls to the default.
 */
export const ENGLISH_CONFIDENCE = 0.62
/** Fewer recognised words than this is too little evidence either way. */
export const MIN_RECOGNISED_WORDS = 8

/**
 * tinyld's tables are 7.6 MB of heap on the main thread, and only voice cloning with a text
 * hint needs them: loaded on first use (its CommonJS build, so the call stays synchronous).
 */
let detector: typeof DetectAll | undefined
const detectLanguages = (text: string) => (detector ??= (createRequire(import.meta.url)("tinyld") as { detectAll: typeof DetectAll }).detectAll)(text)

/** The ISO 639-1 code the catalogue speaks that `text` is written in, or undefined when unsure. */
export const languageOfText = (text: string | null | undefined): string | undefined => {
  if (text === undefined || text === null) return undefined
  const words = text.split(/\s+/).filter((w) => /\p{L}/u.test(w)).length
  if (words < MIN_TEXT_WORDS) return undefined
  const top = detectLanguages(text)[0]
  if (top === undefined || languageInfo(top.lang) === undefined || presetsForLanguage(top.lang).length === 0) return undefined
  return top.lang
}

export interface ScoredWord {
  readonly confidence: number
  readonly startMs: number
  readonly endMs: number
}

/** Duration-weighted mean confidence of recognised words (0 when there are none). */
export const englishConfidence = (words: ReadonlyArray<ScoredWord>): number => {
  let ms = 0
  let weighted = 0
  for (const w of words) {
    const d = Math.max(0, w.endMs - w.startMs)
    ms += d
    weighted += d * w.confidence
  }
  return ms === 0 ? 0 : weighted / ms
}

/** Whether the recogniser's words say the sample is English speech. */
export const soundsEnglish = (words: ReadonlyArray<ScoredWord>): boolean =>
  words.length >= MIN_RECOGNISED_WORDS && englishConfidence(words) >= ENGLISH_CONFIDENCE
