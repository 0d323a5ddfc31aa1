/**
 * `Translator` by an OpenAI-compatible chat model (ChatCompletions.ts). Any two languages of the
 * table in LanguageCodes.ts form a pair: whether the model is good at a pair is the operator's
 * choice of model. The tail of the translation so far goes along as context, so a chunk that
 * continues a sentence continues it; the model is told to answer only the new part, and the
 * append-only rule is kept by the caller (actors/AppendOnly.ts), whatever the model does.
 */
import { Effect, Layer, Stream } from "effect"
import { type ChatEndpoint, type ChatError, chatStream } from "../llm/ChatCompletions.ts"
import { knownLanguages, languageName } from "./LanguageCodes.ts"
import { type TranslateRequest, type TranslationPair, Translator, TranslatorError } from "./Translator.ts"

const reasonOf = (e: ChatError): TranslatorError["reason"] =>
  e.reason === "Unavailable" ? "EngineUnavailable" : e.reason === "TimedOut" ? "TimedOut" : "EngineFailed"

/** The messages for one chunk: instructions, the context, and the new text alone. */
export const translationMessages = (request: TranslateRequest) => {
  const from = languageName(request.source)
  const to = languageName(request.target)
  const system = `You translate live transcripts from ${from} to ${to}. Answer with the ${to} translation of the new text only: ` +
    `no quotes, no notes, no explanations, and never repeat or correct the translation already shown.`
  const user = request.context.trim() === ""
    ? `New ${from} text:\n${request.text}`
    : `Translation already shown (for continuity only; do not repeat it):\n${request.context}\n\nNew ${from} text:\n${request.text}`
  return [{ role: "system" as const, content: system }, { role: "user" as const, content: user }]
}

export const makeLlmTranslator = (endpoint: ChatEndpoint) => {
  const languages = knownLanguages()
  const pairs: ReadonlyArray<TranslationPair> = languages.flatMap((source) =>
    languages.filter((target) => target !== source).map((target) => ({ source, target, engine: "llm", mode: endpoint.model }))
  )
  return Translator.of({
    pairs: Effect.succeed(pairs),
    // A remote endpoint has no start-up of ours: every pair is always ready (its failures are the request's).
    check: () => Effect.void,
    warm: () => Effect.void,
    status: () => [],
    translate: (request) =>
      chatStream(endpoint, translationMessages(request), { temperature: 0 }).pipe(
        Stream.mapError((e) => new TranslatorError({ reason: reasonOf(e), message: `the translation model failed: ${e.message}` })),
        Stream.withSpan("LlmTranslator.translate", { attributes: { source: request.source, target: request.target } })
      )
  })
}

/** `Translator` by the chat model at `endpoint`. */
export const LlmTranslator = {
  layer: (endpoint: ChatEndpoint) => Layer.succeed(Translator, makeLlmTranslator(endpoint))
}
