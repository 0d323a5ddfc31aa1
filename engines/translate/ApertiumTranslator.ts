/**
 * `Translator` by Apertium (rule-based machine translation, Debian packages): the pairs are the
 * modes installed in `modesDir`, each served by one long-lived null-flush pipeline
 * (ApertiumProcess.ts), stopped with the layer. The pairs of `warm` are started in the background
 * when the layer is built, one after another (a start is a burst of CPU: two at once would take
 * both cores of a small machine), so the layer and the service are ready at once; a request for
 * a pair not ready yet starts it and waits up to `startWaitMs` for it (outside its own timeout),
 * then is refused with `Starting` (503 + Retry-After).
 *
 * Apertium translates sentence by sentence and keeps no state between them, so `context` is not
 * used, and a chunk goes as one request per sentence (engines/text/Segmenter.ts): a long chunk
 * streams its translation sentence by sentence (one SSE `delta` each) and an interrupted stream
 * drops the sentences not yet written to the pipeline.
 */
import { Duration, Effect, Layer, Stream } from "effect"
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
  /**
   * Pairs started at start-up: all, none, or these (`eng-spa`, by mode or ISO 639-3 codes).
   * Default none: a running pair holds ~100 MB (PSS of its dozen programs; all eight installed
   * pairs 0.8 GB PSS, 1.5 GB RSS), more than the rest of a default install.
   */
  readonly warm?: "all" | "none" | ReadonlyArray<string>
  /** Longest a pipeline's start may take, ms (ApertiumProcess.ts). */
  readonly startTimeoutMs?: number
  /**
   * Longest a request waits for its pair's start before its 503, ms (default 3000). A start
   * takes 0.2-0.4 s on a quiet machine: without the wait every first request of a pair would be
   * a 503 and a retry; with it only a loaded machine's slow starts are.
   */
  readonly startWaitMs?: number
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
  const reason = e.reason === "Unavailable" ? "EngineUnavailable" : e.reason === "TimedOut" ? "TimedOut" : e.reason === "Busy" ? "Busy" : e.reason === "Starting" ? "Starting" : "EngineFailed"
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
      p = new ApertiumProcess({
        pipeline: () => nullFlushPipeline(mode),
        timeoutMs: options.timeoutMs ?? 10_000,
        maxQueue: options.maxQueue ?? 256,
        ...(options.startTimeoutMs === undefined ? {} : { startTimeoutMs: options.startTimeoutMs })
      })
      processes.set(mode.name, p)
    }
    return p
  }
  modes.forEach(processOf)
  const modeOf = (source: string, target: string) => modes.find((m) => m.source === source && m.target === target)
  const noPair = (source: string, target: string) =>
    new TranslatorError({ reason: "UnsupportedPair", message: `Apertium has no ${source}-${target} pair here` })

  const warm = options.warm ?? "none"
  const toWarm = warm === "all" ? modes : warm === "none" ? [] : modes.filter((m) => warm.includes(m.name) || warm.includes(`${m.source}-${m.target}`))
  // In the background, one pair after another; a pair a request started meanwhile is simply
  // waited for. A failed start is logged and the next pair goes on.
  yield* Effect.forEach(toWarm, (mode) =>
    Effect.tryPromise({ try: () => processOf(mode).start(), catch: toTranslatorError(mode) }).pipe(
      Effect.timed,
      Effect.flatMap(([took]) => Effect.logDebug("Apertium pair warm", { mode: mode.name, ms: Math.round(Duration.toMillis(took)) })),
      Effect.catch((e) => Effect.logWarning("Apertium pair did not start", { mode: mode.name, error: e.message }))
    ), { discard: true }).pipe(Effect.forkScoped)

  return Translator.of({
    pairs: Effect.succeed(pairs),
    check: (source, target) =>
      Effect.suspend(() => {
        const mode = modeOf(source, target)
        if (mode === undefined) return Effect.fail(noPair(source, target))
        const process = processOf(mode)
        const refused = process.admit()
        if (refused === undefined) return Effect.void
        if (refused.reason !== "Starting") return Effect.fail(toTranslatorError(mode)(refused))
        // admit() began the start if nothing had: wait for it a little, then the 503.
        return Effect.tryPromise({ try: () => process.start(), catch: toTranslatorError(mode) }).pipe(
          Effect.timeoutOption(options.startWaitMs ?? 3000),
          Effect.flatMap((started) => started._tag === "Some" ? Effect.void : Effect.fail(toTranslatorError(mode)(refused)))
        )
      }),
    warm: (source, target) =>
      Effect.suspend(() => {
        const mode = modeOf(source, target)
        if (mode === undefined) return Effect.fail(noPair(source, target))
        return Effect.tryPromise({ try: () => processOf(mode).start(), catch: toTranslatorError(mode) })
      }),
    status: () => modes.map((m) => ({ mode: m.name, state: processOf(m).state, starts: processOf(m).starts })),
    translate: (request) => {
      const mode = modeOf(request.source, request.target)
      if (mode === undefined) return Stream.fail(noPair(request.source, request.target))
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
