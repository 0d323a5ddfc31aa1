/**
 * One append-only translation chunk (SPEC endpoint 23, 4.1 rule 5): checks the pair, charges
 * the caller, runs the `Translator` and hands each piece of `appended` to `emit` as it comes
 * (the route writes JSON once, or one SSE `delta` per piece).
 *
 * `source == target` returns `new_source` unchanged without an engine and costs nothing. Only
 * the tail of `previous` goes to the engine as context: a chat model gets continuity from it,
 * Apertium translates sentence by sentence and ignores it. Credits: CreditPolicy.ts (reserved
 * before the engine, settled when the translation completed, released otherwise — a client that
 * leaves mid-stream interrupts the engine and pays nothing).
 */
import { Data, Effect, Exit, Stream } from "effect"
import { normalizeLanguage } from "../engines/translate/LanguageCodes.ts"
import { type TranslationPair, Translator } from "../engines/translate/Translator.ts"
import { Credits } from "../storage/Credits.ts"
import { makeAppender } from "./AppendOnly.ts"
import { CreditPurpose, textCredits } from "./CreditPolicy.ts"

/** Longest `new_source`, characters: a chunk is a sentence or a few, not a document. */
export const MAX_CHUNK_CHARACTERS = 5000
/** How much of `previous` (its end) is passed on as context, characters. */
const CONTEXT_CHARACTERS = 500

export interface ChunkRequest {
  readonly newSource: string
  readonly source: string
  readonly target: string
  readonly previous: string
  /** The account to charge; null for anonymous calls (free, rate-limited by address). */
  readonly userId: string | null
}

/** What a caller did wrong; the message names the pairs to use instead. */
export class ChunkRequestError extends Data.TaggedError("ChunkRequestError")<{
  readonly reason: "UnknownLanguage" | "UnsupportedPair" | "TooLong"
  readonly message: string
}> {}

/**
 * The pairs as a caller may read them in an error message: `eng-spa, spa-eng, …`, or
 * `any two of eng, spa, …` when every pair of a language set is there (a chat model).
 */
export const describePairs = (pairs: ReadonlyArray<TranslationPair>): string => {
  if (pairs.length === 0) return "none are installed"
  const languages = [...new Set(pairs.flatMap((p) => [p.source, p.target]))].sort()
  if (languages.length > 2 && pairs.length === languages.length * (languages.length - 1)) return `any two of ${languages.join(", ")}`
  return pairs.map((p) => `${p.source}-${p.target}`).join(", ")
}

/** A checked request: what will run, known before any answer is sent (so 400s stay 400s on SSE). */
export interface PreparedChunk {
  readonly request: ChunkRequest
  /** ISO 639-3 codes; equal when the text passes through unchanged. */
  readonly source: string
  readonly target: string
  /** The engine and pair, for the SSE `done` event: `apertium:eng-spa`, `llm:<model>`, or `none`. */
  readonly model: string
}

/** Checks length, languages and pair; fails with a ChunkRequestError that names the pairs. */
export const prepareChunk = Effect.fn("ChunkTranslation.prepare")(function*(request: ChunkRequest) {
  if ([...request.newSource].length > MAX_CHUNK_CHARACTERS) {
    return yield* new ChunkRequestError({ reason: "TooLong", message: `new_source is longer than ${MAX_CHUNK_CHARACTERS} characters; send smaller chunks` })
  }
  const pairs = yield* (yield* Translator).pairs
  const source = normalizeLanguage(request.source)
  const target = normalizeLanguage(request.target)
  if (source === undefined || target === undefined) {
    const bad = source === undefined ? request.source : request.target
    return yield* new ChunkRequestError({
      reason: "UnknownLanguage",
      message: `unknown language code ${JSON.stringify(bad)}: use ISO 639-1 (en, es) or ISO 639-3 (eng, spa); supported pairs: ${describePairs(pairs)}`
    })
  }
  if (source === target) return { request, source, target, model: "none" } satisfies PreparedChunk
  const pair = pairs.find((p) => p.source === source && p.target === target)
  if (pair === undefined) {
    return yield* new ChunkRequestError({ reason: "UnsupportedPair", message: `no translation from ${source} to ${target} here; supported pairs: ${describePairs(pairs)}` })
  }
  // A pair still starting (Apertium at start-up or after a crash) is refused here, before any
  // answer, so a stream's caller gets the 503 and its Retry-After too; text with nothing to
  // translate needs no engine.
  if (request.newSource.trim() !== "") yield* (yield* Translator).check(source, target)
  return { request, source, target, model: `${pair.engine}:${pair.mode}` } satisfies PreparedChunk
})

/** Runs a prepared chunk, handing each piece of `appended` to `emit` in order. */
export const runChunk = Effect.fn("ChunkTranslation.run")(function*(chunk: PreparedChunk, emit: (appended: string) => Effect.Effect<void>) {
  const { request, source, target } = chunk
  // SPEC 4.1 rule 5: the same language comes back untouched, no engine, no charge.
  if (source === target) {
    if (request.newSource !== "") yield* emit(request.newSource)
    return
  }
  if (request.newSource.trim() === "") return
  const translator = yield* Translator
  const run = Effect.gen(function*() {
    const appender = makeAppender(request.previous)
    yield* translator.translate({ text: request.newSource, source, target, context: request.previous.slice(-CONTEXT_CHARACTERS) }).pipe(
      Stream.runForEach((piece) => {
        const text = appender.push(piece)
        return text === "" ? Effect.void : emit(text)
      })
    )
    const rest = appender.end()
    if (rest !== "") yield* emit(rest)
  })
  if (request.userId === null) return yield* run
  const credits = yield* Credits
  const cost = textCredits(request.newSource)
  const reservation = yield* credits.reserve(request.userId, cost, { purpose: CreditPurpose.translate })
  yield* run.pipe(
    Effect.onExit((exit) =>
      (Exit.isSuccess(exit) ? credits.settle(reservation, cost) : credits.release(reservation)).pipe(
        // The database is gone: the reservation stays and is given back when this instance's
        // reservations are reclaimed (storage/InstanceRegistry.ts).
        Effect.catchCause((cause) => Effect.logWarning("translation credits not settled", cause))
      )
    )
  )
})

