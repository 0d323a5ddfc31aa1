/**
 * The English sentences and Flite voices that bench/stt.ts speaks and the speech-to-text tests
 * use as reference speech (test/engines/asr/speechFixtures.ts re-exports them). Here, not under
 * test/, because tests may import from bench/ but a bench never imports a test file.
 */

/** Everyday English: the domain of PocketSphinx's generic language model. */
export const SENTENCES: ReadonlyArray<string> = [
  "The weather is nice today and we are going to the park.",
  "Please call me back when you get this message.",
  "I would like to order a large pizza with cheese.",
  "The meeting has been moved to next Tuesday afternoon.",
  "She reads a book every night before going to sleep.",
  "Can you tell me how to get to the train station?",
  "We need to finish this report by the end of the week.",
  "My brother works as a doctor in a small town.",
  "The children played in the garden all afternoon.",
  "Thank you very much for your help with the project."
]

/** Flite voices that speak at 16 kHz (kal is 8 kHz and a diphone voice). */
export const VOICES = ["slt", "rms", "awb", "kal16"] as const
export type FliteVoice = (typeof VOICES)[number]
