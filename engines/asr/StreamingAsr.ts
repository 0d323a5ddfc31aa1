/**
 * The worker-side contract of a STREAMING recognizer layer: what the realtime session
 * (streamingSessions.ts) drives, whatever decodes underneath. PocketSphinx is the first layer
 * (PocketSphinxStreaming.ts); a streaming neural model an operator supplies (a transducer run by
 * onnxruntime-node, sherpa-onnx) would be a second one: a `StreamingAsrEngine` registered beside
 * it in streamingSessions.ts and named by the session's `engine`, with nothing above the worker
 * (the pool, StreamingRecognizer, the endpoint and its actor) changing.
 *
 * One `StreamingDecoder` per session, used from one thread, one call at a time (the session
 * awaits each before the next; async so that a layer may await its runtime, as onnxruntime does):
 *   open → push (16 kHz s16, any block size) → partial text … → commit → words … → close.
 * The decoder keeps the SESSION'S AUDIO CLOCK: every sample pushed since open counts, so a
 * committed word's times are seconds since the session started, not since its utterance did;
 * `reset` drops the current utterance but keeps the clock.
 */
import type { AsrCapabilities, AsrWord } from "./AsrEngine.ts"

export interface StreamingAsrConfig {
  /** Of what `push` gets: always 16000 (InputPcm.ts converts every input format to it). */
  readonly sampleRate: 16000
  /** ISO 639-1 (a region is accepted); undefined: the engine's own. */
  readonly language?: string | undefined
}

export interface StreamingCommit {
  /** The engine's language for these words, ISO 639-1. */
  readonly language: string
  /** Words of the utterance, times in ms on the session clock; fillers are not words. */
  readonly words: ReadonlyArray<AsrWord>
  /** Session-clock ms where the committed audio began and ended (all of it, silence included). */
  readonly startMs: number
  readonly endMs: number
}

export interface StreamingDecoder {
  /**
   * Feeds audio and answers the hypothesis of the utterance so far (may be "" or shrink: a
   * partial is a guess). An engine may decode lazily and answer the last hypothesis until it has
   * seen enough new audio (PocketSphinx: every `partialEveryMs`).
   */
  readonly push: (pcm16k: Int16Array) => Promise<string>
  /**
   * Ends the utterance: its final words. Audio pushed afterwards starts the next one.
   * `prepared`: the caller knows that nothing but silence came since its last `prepare`, so the
   * words prepared then may be answered (the utterance's span still covers all its audio).
   */
  readonly commit: (options?: { readonly prepared?: boolean }) => Promise<StreamingCommit>
  /**
   * A pause began: computes now what `commit` would answer for the audio so far, so that a
   * commit at the end of the pause costs nothing (the session's VAD: silence onset → the
   * silence threshold). The live decode goes on; the next `prepare` or commit replaces it.
   * An engine without a separate final pass may do nothing.
   */
  readonly prepare: () => Promise<void>
  /** Drops the utterance in progress without decoding it further; the clock keeps running. */
  readonly reset: () => void
  /** Frees what the decoder holds (native memory); the decoder is unusable afterwards. Idempotent. */
  readonly close: () => void
}

export interface StreamingAsrEngine {
  readonly capabilities: AsrCapabilities
  /** Throws AsrError (UnsupportedLanguage, EngineUnavailable). */
  readonly open: (config: StreamingAsrConfig) => StreamingDecoder
}
