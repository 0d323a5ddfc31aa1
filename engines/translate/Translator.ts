/**
 * Text translation as one Effect service: the chunk route, its SSE stream and the MCP tools call
 * `Translator.translate`; one layer per implementation provides it (Apertium processes in
 * ApertiumTranslator.ts, an OpenAI-compatible chat model in LlmTranslator.ts).
 *
 * Languages are ISO 639-3 codes inside (`eng`, `spa`); LanguageCodes.ts maps the ISO 639-1
 * spellings callers may use. `translate` is a stream of pieces in order: their concatenation is
 * the translation of `text` alone (never a rewrite of `context`). Interrupting the stream stops
 * the engine work that is still queued or running. Main thread only.
 */
import { Context, Data, type Effect, type Stream } from "effect"

export interface TranslationPair {
  /** ISO 639-3 codes. */
  readonly source: string
  readonly target: string
  /** The engine that serves the pair: `apertium` or `llm`. */
  readonly engine: string
  /** The engine's own name for the pair (Apertium's mode, `eng-spa`), for logs and listings. */
  readonly mode: string
}

export interface TranslateRequest {
  /** New source text to translate (never empty). */
  readonly text: string
  /** ISO 639-3 codes of a pair the service has. */
  readonly source: string
  readonly target: string
  /** The tail of the translation already delivered, as context; it is never rewritten. */
  readonly context: string
}

export class TranslatorError extends Data.TaggedError("TranslatorError")<{
  /**
   * `UnsupportedPair`: no engine here translates the pair (400). `EngineUnavailable`: the
   * engine's program or endpoint is missing (502). `EngineFailed`: it failed or answered nothing
   * usable, upstream rate limits included once retries are spent (502). `TimedOut` (502).
   * `Busy`: too much is waiting for the engine already; retry later (503). `Starting`: the
   * pair's engine is starting (at start-up, or after it died) and takes no request yet; retry in
   * a moment (503 `engine_starting`, Retry-After).
   */
  readonly reason: "UnsupportedPair" | "EngineUnavailable" | "EngineFailed" | "TimedOut" | "Busy" | "Starting"
  readonly message: string
}> {}

export class Translator extends Context.Service<Translator, {
  /** The pairs this deployment really has (Apertium: the installed modes), sorted. */
  readonly pairs: Effect.Effect<ReadonlyArray<TranslationPair>>
  readonly translate: (request: TranslateRequest) => Stream.Stream<string, TranslatorError>
  /**
   * Starts the pair when it is not running and waits briefly for a start under way (Apertium:
   * `startWaitMs`), then fails when the pair still cannot take a request (`Starting`, or the
   * failure of its last start): the route checks this before it answers, so a stream's caller
   * gets the 503 and its Retry-After too. The wait is never part of a request's timeout.
   */
  readonly check: (source: string, target: string) => Effect.Effect<void, TranslatorError>
  /** Starts the pair when needed and completes once it is ready (tests, tools); fails as its start did. */
  readonly warm: (source: string, target: string) => Effect.Effect<void, TranslatorError>
  /** Each pair's engine state (Apertium: per pipeline; a chat model is always `ready`), for /readyz and the metrics. */
  readonly status: () => ReadonlyArray<{ readonly mode: string; readonly state: "idle" | "starting" | "ready" | "failed"; readonly starts: number }>
}>()("speech/engines/Translator") {}
