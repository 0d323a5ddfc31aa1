/**
 * The language engines chosen by configuration: `Summarizer` (extractive, or the chat model) and
 * `Translator` (Apertium, or the chat model). The chat endpoint is the operator's own address,
 * so it may be private (a model server beside the service), but it still goes through the one
 * outbound guard: the name is resolved once per call and the connection pinned to that address.
 */
import { Effect, Layer, Option, Redacted } from "effect"
import type { ChatEndpoint } from "../engines/llm/ChatCompletions.ts"
import { ExtractiveSummarizer } from "../engines/summary/ExtractiveSummarizer.ts"
import { LlmSummarizer } from "../engines/summary/LlmSummarizer.ts"
import { ApertiumTranslator } from "../engines/translate/ApertiumTranslator.ts"
import { LlmTranslator } from "../engines/translate/LlmTranslator.ts"
import { makeOutboundGuard } from "../storage/OutboundAddress.ts"
import type { AppConfigShape } from "./Config.ts"

/** Retries of a chat call on 429, 5xx or a failed connection, before its first content. */
const LLM_RETRIES = 3

/** The chat endpoint of the configuration; undefined when LLM_BASE_URL or LLM_MODEL is unset. */
export const chatEndpoint = (config: AppConfigShape): ChatEndpoint | undefined => {
  if (Option.isNone(config.llmBaseUrl) || Option.isNone(config.llmModel)) return undefined
  const guard = makeOutboundGuard({ allowPrivate: true })
  return {
    baseUrl: config.llmBaseUrl.value,
    model: config.llmModel.value,
    apiKey: Option.match(config.llmApiKey, { onNone: () => undefined, onSome: Redacted.value }),
    timeoutMs: config.llmTimeoutS * 1000,
    idleMs: Math.max(1000, Math.round((config.llmTimeoutS * 1000) / 3)),
    maxRetries: LLM_RETRIES,
    pin: (host) => Effect.runPromise(guard.check(host).pipe(Effect.map((target) => target.lookup)))
  }
}

export const languageEngineLayers = (config: AppConfigShape) => {
  // Config.ts refuses an llm engine without LLM_BASE_URL and LLM_MODEL, so the endpoint exists
  // whenever one of the engines below asks for it.
  const endpoint = chatEndpoint(config)
  const summarizer = config.summaryEngine === "llm" && endpoint !== undefined ? LlmSummarizer.layer(endpoint) : ExtractiveSummarizer.layer
  const translator = config.translateEngine === "llm" && endpoint !== undefined
    ? LlmTranslator.layer(endpoint)
    : ApertiumTranslator.layer({ modesDir: config.apertiumModesDir })
  return Layer.merge(summarizer, translator)
}
