/**
 * The worker-side text-to-speech contract every engine implements (espeak-ng, Flite, Piper).
 *
 * These are plain modules called by the pool's task handlers inside one worker thread; each
 * engine loads its heavy state once per thread and keeps it. Output samples are Float32 in
 * [-1, 1] at `sampleRate` Hz, mono. Word timings are in ms from the start of the returned audio;
 * `charStart`/`charEnd` are UTF-16 offsets into the request text, end exclusive. Engines are
 * deterministic: the same request gives the same samples, bit for bit, on any thread.
 *
 * Hazard for the pool: errors crossing `postMessage` lose their class and custom fields; send
 * `TtsError.toWire(e)` and rebuild with `TtsError.fromWire(w)` on the other side.
 */

export type EngineId = "espeak" | "flite" | "piper"

/** Which request rates an engine accepts; enforced by `checkRequest`. */
export const SPEED_MIN = 0.5
export const SPEED_MAX = 2

/** What an engine needs to pick and shape a voice; presets in Voices.ts map onto this. */
export interface EngineVoice {
  readonly engine: EngineId
  /** ISO 639-1 code of the language spoken, e.g. "et". */
  readonly language: string
  /**
   * Engine's own voice id: espeak `<language voice>[+<variant>]` ("et+f3", "en-gb-x-rp"),
   * Flite voice name ("slt"), Piper model file stem, optionally `<stem>:<speaker>` for a
   * multi-speaker model (speaker name from its speaker_id_map, or a numeric id).
   */
  readonly variant: string
  /** Relative pitch, 1 = the voice's own. espeak: base-pitch parameter 50 × pitch (0–100). */
  readonly pitch: number
  /** Relative speaking rate, 1 = engine default; multiplied with the request's speed. */
  readonly rate: number
}

export interface TtsRequest {
  readonly text: string
  readonly voice: EngineVoice
  /** 0.5 to 2; 2 is twice as fast. */
  readonly speed: number
}

export interface WordTiming {
  readonly text: string
  /** ms from the start of the audio. */
  readonly startMs: number
  readonly endMs: number
  /** UTF-16 offsets into the request text; end exclusive. */
  readonly charStart: number
  readonly charEnd: number
}

export interface TtsResult {
  /** Float32 mono samples in [-1, 1]. */
  readonly samples: Float32Array
  /** Hz. */
  readonly sampleRate: number
  /** In order, non-overlapping, inside [0, duration]. */
  readonly words: ReadonlyArray<WordTiming>
}

/**
 * How word timings are obtained: "word" = the synthesizer reports word boundaries;
 * "phone" = phone timings grouped into words; "estimated" = spread over the audio by phoneme count.
 */
export type TimingKind = "word" | "phone" | "estimated"

export interface TtsCapabilities {
  readonly engine: EngineId
  /** Language codes as the engine names them (espeak: "et", "en-gb-x-rp", "cmn", ...). */
  readonly languages: ReadonlyArray<string>
  /** Every rate (Hz) this engine can return; the rate of a given voice is `sampleRateFor`. */
  readonly sampleRates: ReadonlyArray<number>
  readonly timing: TimingKind
}

/**
 * One block of mono samples at the result's rate, in the engine's own format: Float32 in
 * [-1, 1], or signed 16-bit where the engine makes those (espeak-ng), so that a caller that
 * wants s16 at the same rate takes them as they are (the Float32 round trip was a tenth of a
 * worker's time). `int16ToFloat` gives the Float32 values `synthesize` returns, exactly.
 */
export type TtsBlock = Float32Array | Int16Array

/** Takes one block; false stops the synthesis. */
export type TtsBlockSink = (samples: TtsBlock) => boolean

/** What a block-wise synthesis returns once its blocks have gone to the sink. */
export interface TtsBlocksResult {
  /** Hz. */
  readonly sampleRate: number
  /** Samples handed to the sink in all. */
  readonly sampleCount: number
  /** As `TtsResult.words`; meaningless when `stopped`. */
  readonly words: ReadonlyArray<WordTiming>
  /** The sink asked to stop before the end. */
  readonly stopped: boolean
}

export interface TtsEngine {
  readonly capabilities: TtsCapabilities
  /** Rate (Hz) of the audio this voice produces; known before synthesis (for stream headers). */
  sampleRateFor(voice: EngineVoice): number
  /**
   * Throws (or rejects with) `TtsError` VoiceNotFound when this engine cannot speak with the
   * voice; may first load what the voice needs (espeak-ng's bundled build).
   */
  checkVoice(voice: EngineVoice): void | Promise<void>
  synthesize(request: TtsRequest): Promise<TtsResult>
  /**
   * The same samples as `synthesize`, bit for bit, handed over in blocks as the engine makes
   * them, so the first audio leaves long before the sentence is done. Engines that cannot are
   * streamed as one block by the caller.
   */
  synthesizeBlocks?(request: TtsRequest, onBlock: TtsBlockSink): Promise<TtsBlocksResult>
}

export type TtsErrorReason =
  | "VoiceNotFound" // no such voice/variant/model in this engine or build
  | "InvalidRequest" // empty text, speed out of range, bad pitch/rate
  | "UnsupportedSetting" // a voice setting the engine cannot honour
  | "EngineFailed" // the synthesizer itself failed (502 upstream)
  | "EngineUnavailable" // engine not configured or failed to load

export interface TtsErrorWire {
  readonly _tag: "TtsError"
  readonly reason: TtsErrorReason
  readonly message: string
  readonly retryable: boolean
}

/** The one error type of this folder; `reason` names the condition. */
export class TtsError extends Error {
  readonly _tag = "TtsError"
  readonly retryable: boolean
  constructor(readonly reason: TtsErrorReason, message: string, options?: { cause?: unknown; retryable?: boolean }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause })
    this.name = "TtsError"
    this.retryable = options?.retryable ?? false
  }

  static is(u: unknown): u is TtsError {
    return typeof u === "object" && u !== null && (u as { _tag?: unknown })._tag === "TtsError"
  }

  /** Plain object that survives structured clone (worker → main thread). */
  static toWire(e: TtsError): TtsErrorWire {
    return { _tag: "TtsError", reason: e.reason, message: e.message, retryable: e.retryable }
  }

  static fromWire(w: TtsErrorWire): TtsError {
    return new TtsError(w.reason, w.message, { retryable: w.retryable })
  }
}

/** Shared input checks; engines call this first. */
export const checkRequest = (request: TtsRequest): void => {
  if (request.text.trim().length === 0) throw new TtsError("InvalidRequest", "text is empty")
  if (!(request.speed >= SPEED_MIN && request.speed <= SPEED_MAX)) {
    throw new TtsError("InvalidRequest", `speed must be from ${SPEED_MIN} to ${SPEED_MAX}, got ${request.speed}`)
  }
  const { pitch, rate } = request.voice
  if (!(pitch > 0 && pitch <= 2)) throw new TtsError("InvalidRequest", `voice pitch must be in (0, 2], got ${pitch}`)
  if (!(rate > 0 && rate <= 2)) throw new TtsError("InvalidRequest", `voice rate must be in (0, 2], got ${rate}`)
}
