/**
 * The worker-side speech-to-text contract every recognizer implements (PocketSphinx now; a
 * neural engine loaded from a model directory later).
 *
 * Input is mono PCM at 16 kHz, either Int16 (what the media decoder produces) or Float32 in
 * [-1, 1]. Word times are ms from the first sample of that input; the task layer adds the
 * segment's offset. Engines load once per worker thread and keep their models; `recognize` may
 * block the thread (the FFI call is synchronous), which is what the pool is for.
 *
 * Hazard for the pool: errors crossing `postMessage` lose their class and custom fields; the
 * task handler rethrows `AsrError` as a `TaskError` whose message still names what is missing.
 */

export type AsrEngineId = "pocketsphinx"

/** The only rate engines accept, Hz. */
export const ASR_SAMPLE_RATE = 16000

export interface AsrOptions {
  /**
   * Requested language (ISO 639-1, e.g. "en"; a region such as "en-US" is accepted). Undefined
   * lets the engine choose; an engine that cannot detect languages answers its only one.
   */
  readonly language?: string
}

export interface AsrWord {
  /** The word as the engine spells it (PocketSphinx: lower case, no pronunciation variant). */
  readonly text: string
  /** ms from the start of the input. */
  readonly startMs: number
  /** ms, end exclusive, ≥ startMs and ≤ the input's duration. */
  readonly endMs: number
  /** Posterior probability of the word, 0..1. */
  readonly confidence: number
  /** Natural log of `confidence` (≤ 0); what ElevenLabs calls `logprob`. */
  readonly logprob: number
}

export interface AsrResult {
  /** ISO 639-1 code of the language recognised. */
  readonly language: string
  /** In time order, non-overlapping; fillers and silences are not words. */
  readonly words: ReadonlyArray<AsrWord>
}

export interface AsrCapabilities {
  readonly engine: AsrEngineId
  /** ISO 639-1 codes the loaded models recognise. */
  readonly languages: ReadonlyArray<string>
  /** False: the engine recognises its one language whatever the audio is. */
  readonly detectsLanguage: boolean
}

export interface AsrEngine {
  readonly capabilities: AsrCapabilities
  /** Wall time of loading the models, ms. */
  readonly loadMs: number
  recognize(pcm16k: Float32Array | Int16Array, options?: AsrOptions): Promise<AsrResult>
  /** Frees native state; the engine cannot be used afterwards. */
  dispose(): void
}

export type AsrErrorReason =
  | "EngineUnavailable" // library or model missing or failed to load; `missing` names the package (502 upstream)
  | "UnsupportedLanguage" // a language the loaded models do not cover
  | "EngineFailed" // the recognizer returned an error mid-utterance (502 upstream)

/** The one error type of this folder; `reason` names the condition. */
export class AsrError extends Error {
  readonly _tag = "AsrError"
  readonly retryable: boolean
  /** For EngineUnavailable: the Debian (or npm) package that would provide what is missing. */
  readonly missing: string | undefined
  constructor(readonly reason: AsrErrorReason, message: string, options?: { cause?: unknown; retryable?: boolean; missing?: string }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause })
    this.name = "AsrError"
    this.retryable = options?.retryable ?? false
    this.missing = options?.missing
  }

  static is(u: unknown): u is AsrError {
    return typeof u === "object" && u !== null && (u as { _tag?: unknown })._tag === "AsrError"
  }
}

/** "en-US" → "en"; lower case. */
export const baseLanguage = (code: string): string => code.trim().toLowerCase().split(/[-_]/)[0] ?? ""

/** Throws UnsupportedLanguage unless `options.language` is one of the engine's (or unset). */
export const checkLanguage = (capabilities: AsrCapabilities, options: AsrOptions | undefined): string => {
  const fallback = capabilities.languages[0] ?? "und"
  if (options?.language === undefined || options.language.trim() === "") return fallback
  const wanted = baseLanguage(options.language)
  if (!capabilities.languages.includes(wanted)) {
    throw new AsrError("UnsupportedLanguage", `${capabilities.engine} recognises ${capabilities.languages.join(", ")}, not "${options.language}"`)
  }
  return wanted
}
