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
import type { Translator } from "../engines/translate/Translator.ts"
import type { AppConfigShape } from "./Config.ts"
import type { GaugeSource } from "./Metrics.ts"

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

/** APERTIUM_WARM: `all`, `none`, or a comma list of pairs. */
const apertiumWarm = (value: string): "all" | "none" | ReadonlyArray<string> => {
  const v = value.trim().toLowerCase()
  return v === "all" || v === "none" ? v : v.split(",").map((p) => p.trim()).filter((p) => p !== "")
}

export const languageEngineLayers = (config: AppConfigShape) => {
  // Config.ts refuses an llm engine without LLM_BASE_URL and LLM_MODEL, so the endpoint exists
  // whenever one of the engines below asks for it.
  const endpoint = chatEndpoint(config)
  const summarizer = config.summaryEngine === "llm" && endpoint !== undefined ? LlmSummarizer.layer(endpoint) : ExtractiveSummarizer.layer
  const translator = config.translateEngine === "llm" && endpoint !== undefined
    ? LlmTranslator.layer(endpoint)
    : ApertiumTranslator.layer({ modesDir: config.apertiumModesDir, warm: apertiumWarm(config.apertiumWarm) })
  return Layer.merge(summarizer, translator)
}

/**
 * The `/readyz` check of the translation engine (optional: the rest of the service is ready
 * while pairs start): fails, naming them, while pairs are starting or their last start failed;
 * so the warm-up at start-up can be watched there.
 */
export const translationReady = (translator: Translator["Service"]) =>
  Effect.suspend(() => {
    const status = translator.status()
    const starting = status.filter((s) => s.state === "starting").map((s) => s.mode)
    const failed = status.filter((s) => s.state === "failed").map((s) => s.mode)
    if (starting.length === 0 && failed.length === 0) return Effect.void
    const parts = [starting.length > 0 ? `starting: ${starting.join(", ")}` : "", failed.length > 0 ? `failed to start: ${failed.join(", ")}` : ""]
    return Effect.fail(new Error(parts.filter((p) => p !== "").join("; ")))
  })

/** Gauges of the translation engine's pairs by state, and its starts (restarts included). */
export const translationGauges = (translator: Translator["Service"]): ReadonlyArray<GaugeSource> => {
  const count = (state: string) => () => translator.status().filter((s) => s.state === state).length
  return [
    { name: "translation_pairs_ready", description: "Translation pairs whose engine (Apertium pipeline) is running", read: count("ready") },
    { name: "translation_pairs_starting", description: "Translation pairs whose engine is starting (requests get 503 engine_starting)", read: count("starting") },
    { name: "translation_pairs_failed", description: "Translation pairs whose engine's last start failed", read: count("failed") },
    { name: "translation_engine_starts", description: "Starts of translation engines since the process began (the warm-up, first uses, restarts after a crash)", read: () => translator.status().reduce((n, s) => n + s.starts, 0) }
  ]
}
