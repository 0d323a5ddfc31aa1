/**
 * `Translator` by Apertium (rule-based machine translation, Debian packages): the pairs are the
 * modes installed in `modesDir`, each served by one long-lived null-flush pipeline started on
 * first use (ApertiumProcess.ts) and stopped with the layer.
 *
 * Apertium translates sentence by sentence and keeps no state between them, so `context` is not
 * used, and a chunk goes as one request per sentence (engines/text/Segmenter.ts): a long chunk
 * streams its translation sentence by sentence (one SSE `delta` each) and an interrupted stream
 * drops the sentences not yet written to the pipeline.
 */
import { Effect, Layer, Stream } from "effect"
import { type ApertiumMode, listApertiumModes, nullFlushPipeline } from "./ApertiumModes.ts"
import { ApertiumProcess, ApertiumProcessError } from "./ApertiumProcess.ts"
import { segmentSentences } from "../text/Segmenter.ts"
import { iso1Of } from "./LanguageCodes.ts"
import { type TranslationPair, Translator, TranslatorError } from "./Translator.ts"

export interface ApertiumOptions {
  /** Where the `.mode` files are (Debian: /usr/share/apertium/modes). */
  readonly modesDir: string
  /** Longest one sentence may take, ms; past it the pipeline is restarted. */
  readonly timeoutMs?: number
  /** Sentences that may wait per pair before requests are refused. */
  readonly maxQueue?: number
}

/**
 * Apertium's transfer rules capitalise the first word of some inputs ("we need to" → "Necesitamos")
 * even when the source starts in lower case, as live-caption chunks that continue a sentence do;
 * the translation then starts in the case the source started in.
 */
export const followCase = (source: string, translated: string): string => {
  const first = /\p{L}/u.exec(source)?.[0]
  const at = translated.search(/\p{L}/u)
  if (first === undefined || at < 0 || first !== first.toLowerCase()) return translated
  return translated.slice(0, at) + translated[at]!.toLowerCase() + translated.slice(at + 1)
}

const toTranslatorError = (mode: ApertiumMode) => (e: unknown): TranslatorError => {
  if (!(e instanceof ApertiumProcessError)) return new TranslatorError({ reason: "EngineFailed", message: `Apertium ${mode.name}: ${String(e)}` })
  const reason = e.reason === "Unavailable" ? "EngineUnavailable" : e.reason === "TimedOut" ? "TimedOut" : e.reason === "Busy" ? "Busy" : "EngineFailed"
  return new TranslatorError({ reason, message: `Apertium ${mode.name}: ${e.message}` })
}

export const makeApertiumTranslator = Effect.fn("ApertiumTranslator.make")(function*(options: ApertiumOptions) {
  const modes = listApertiumModes(options.modesDir)
  const pairs: ReadonlyArray<TranslationPair> = modes.map((m) => ({ source: m.source, target: m.target, engine: "apertium", mode: m.name }))
  if (modes.length === 0) yield* Effect.logWarning(`no Apertium pairs in ${options.modesDir}: chunk translation has no pairs (install apertium-eng-spa and others)`)
  else yield* Effect.logInfo("Apertium pairs", { pairs: modes.map((m) => m.name).join(" ") })

  const processes = new Map<string, ApertiumProcess>()
  yield* Effect.addFinalizer(() => Effect.sync(() => processes.forEach((p) => p.close())))
  const processOf = (mode: ApertiumMode) => {
    let p = processes.get(mode.name)
    if (p === undefined) {
      p = new ApertiumProcess({ pipeline: () => nullFlushPipeline(mode), timeoutMs: options.timeoutMs ?? 10_000, maxQueue: options.maxQueue ?? 256 })
      processes.set(mode.name, p)
    }
    return p
  }

  return Translator.of({
    pairs: Effect.succeed(pairs),
    translate: (request) => {
      const mode = modes.find((m) => m.source === request.source && m.target === request.target)
      if (mode === undefined) {
        return Stream.fail(new TranslatorError({ reason: "UnsupportedPair", message: `Apertium has no ${request.source}-${request.target} pair here` }))
      }
      const process = processOf(mode)
      // ICU sentences (line breaks end one too); under 8 characters ("Dr.") merged with a neighbour.
      const sentences = segmentSentences(request.text, { locale: iso1Of(request.source) ?? "und", minChars: 8, maxChars: 1000 })
      // Each piece is a sentence's translation and the source's gap before the next: line breaks
      // stay line breaks, any other gap becomes one space.
      return Stream.fromIterable(sentences).pipe(
        Stream.mapEffect((sentence, i) => {
          const next = sentences[i + 1]
          // No gap at all: the segmenter cut a run longer than maxChars (a URL, a long token).
          const between = next === undefined ? "" : request.text.slice(sentence.charEnd, next.charStart)
          const gap = between === "" ? "" : between.replace(/[^\n]/gu, "") || " "
          return Effect.tryPromise({ try: (signal) => process.translate(sentence.text, signal), catch: toTranslatorError(mode) }).pipe(
            // A word the rules drop ("will" in "I will send") leaves two spaces behind.
            Effect.map((translated) => followCase(sentence.text, translated.trim().replace(/[^\S\n]{2,}/gu, " ")) + gap)
          )
        }),
        Stream.withSpan("ApertiumTranslator.translate", { attributes: { mode: mode.name, characters: request.text.length } })
      )
    }
  })
})

/** `Translator` by the Apertium modes installed in `options.modesDir`. */
export const ApertiumTranslator = {
  layer: (options: ApertiumOptions) => Layer.effect(Translator, makeApertiumTranslator(options))
}
