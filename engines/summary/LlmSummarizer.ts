/**
 * `Summarizer` by an OpenAI-compatible chat model (ChatCompletions.ts): the transcript goes as
 * numbered sentence units (Sentences.ts) with speaker and time, the template's sections as
 * instructions, and the model answers one JSON object that cites the units each item rests on,
 * so items get times and speakers from the transcript, not from the model.
 *
 * A transcript longer than `TRANSCRIPT_BUDGET` characters is cut down to its most central units
 * (the extractive salience of Extractive.ts), kept in spoken order, and the model is told so.
 * An answer that is not the JSON asked for is an `EngineFailed` (502; nothing is stored).
 */
import { Effect, Layer } from "effect"
import { type ChatEndpoint, chatText } from "../llm/ChatCompletions.ts"
import { scoreUnits } from "./Extractive.ts"
import { type SentenceUnit, sentenceUnits } from "./Sentences.ts"
import { Summarizer, SummarizerError, type SummaryItem, type SummarySection, type SummarySource, type SummaryTemplate } from "./Summarizer.ts"
import { clock } from "./SummaryMarkdown.ts"

/** Characters of transcript sent at most (about 12k tokens of English). */
const TRANSCRIPT_BUDGET = 48_000

const label = (source: SummarySource, id: string | undefined) => (id === undefined ? undefined : source.speakerNames?.[id] ?? id)

const lineOf = (source: SummarySource, u: SentenceUnit) =>
  `[${u.index}]${u.speaker !== undefined ? ` ${label(source, u.speaker)}` : ""}${u.start !== undefined ? ` ${clock(u.start)}` : ""}: ${u.text}`

/** The units to send: all of them, or the most central ones within the budget, in spoken order. */
export const unitsWithinBudget = (units: ReadonlyArray<SentenceUnit>, budget = TRANSCRIPT_BUDGET): { units: ReadonlyArray<SentenceUnit>; cut: boolean } => {
  const size = units.reduce((s, u) => s + u.text.length + 24, 0)
  if (size <= budget) return { units, cut: false }
  const { score } = scoreUnits(units)
  const order = units.map((_, i) => i).sort((a, b) => score[b]! - score[a]!)
  const kept = new Set<number>()
  let used = 0
  for (const i of order) {
    const cost = units[i]!.text.length + 24
    if (used + cost > budget) continue
    kept.add(i)
    used += cost
  }
  return { units: units.filter((_, i) => kept.has(i)), cut: true }
}

export const summaryMessages = (source: SummarySource, template: SummaryTemplate, units: ReadonlyArray<SentenceUnit>, cut: boolean) => {
  const sections = template.sections.map((s) =>
    `- "${s.id}" (${s.title}; ${s.kind === "paragraph" ? "sentences of one paragraph" : s.kind === "speakers" ? "items per speaker, each with \"speaker\" set" : s.kind === "actions" ? "tasks, each with \"owner\": the person to do it or null" : "one point per item"}; ` +
    `${s.minItems !== undefined ? `${s.minItems} to ` : "at most "}${s.maxItems} items${s.kind === "speakers" ? " per speaker" : ""}): ${s.description}`
  ).join("\n")
  const system = [
    "You summarise transcripts of recorded speech. The transcript is machine-recognised: lower-case, no punctuation, some words wrong.",
    "It is given as numbered sentences: [number] speaker time: words.",
    `Write the summary "${template.name}" in the transcript's language (${source.language}), in full sentences, using only what was said.`,
    "Answer with one JSON object and nothing else, shaped as:",
    '{"sections": {"<section id>": [{"text": "...", "speaker": "<speaker or null>", "owner": "<name or null>", "units": [<numbers of the sentences the item rests on>]}]}}',
    "An empty list is right for a section the transcript has nothing for. The sections:",
    sections
  ].join("\n")
  const user = `${cut ? "Transcript (excerpt: the most central sentences of a longer recording, in order):" : "Transcript:"}\n${units.map((u) => lineOf(source, u)).join("\n")}`
  return [{ role: "system" as const, content: system }, { role: "user" as const, content: user }]
}

type Json = Record<string, unknown>

/** The model's JSON as sections of `template`; undefined when it is not what was asked for. */
export const parseSummary = (answer: string, source: SummarySource, template: SummaryTemplate, units: ReadonlyArray<SentenceUnit>): Array<SummarySection> | undefined => {
  const from = answer.indexOf("{")
  const to = answer.lastIndexOf("}")
  if (from < 0 || to <= from) return undefined
  let parsed: Json
  try {
    parsed = JSON.parse(answer.slice(from, to + 1)) as Json
  } catch {
    return undefined
  }
  const sections = parsed.sections
  if (typeof sections !== "object" || sections === null) return undefined
  const byIndex = new Map(units.map((u) => [u.index, u]))
  return template.sections.map((section) => {
    const raw = (sections as Json)[section.id]
    const items: Array<SummaryItem> = []
    for (const item of Array.isArray(raw) ? (raw as Array<unknown>) : []) {
      const o: Json = typeof item === "string" ? { text: item } : typeof item === "object" && item !== null ? (item as Json) : {}
      if (typeof o.text !== "string" || o.text.trim() === "") continue
      const cited = (Array.isArray(o.units) ? o.units : []).flatMap((n) => {
        const u = typeof n === "number" ? byIndex.get(n) : undefined
        return u === undefined ? [] : [u]
      })
      const starts = cited.flatMap((u) => (u.start === undefined ? [] : [u.start]))
      const ends = cited.flatMap((u) => (u.end === undefined ? [] : [u.end]))
      const speaker = typeof o.speaker === "string" && o.speaker.trim() !== "" ? o.speaker.trim() : label(source, cited[0]?.speaker) ?? null
      items.push({
        text: o.text.trim(),
        speaker,
        ...(section.kind === "actions" ? { owner: typeof o.owner === "string" && o.owner.trim() !== "" ? o.owner.trim() : null } : {}),
        ...(starts.length > 0 ? { start: Math.min(...starts) } : {}),
        ...(ends.length > 0 ? { end: Math.max(...ends) } : {})
      })
    }
    const cap = section.kind === "speakers" ? section.maxItems * 8 : section.maxItems
    return { id: section.id, title: section.title, kind: section.kind, items: items.slice(0, cap) }
  })
}

export const makeLlmSummarizer = (endpoint: ChatEndpoint) => {
  const engine = `llm:${endpoint.model}`
  return Summarizer.of({
    engine,
    summarize: Effect.fn("Summarizer.summarize")(function*(source, template) {
      const all = sentenceUnits(source.words)
      if (all.length === 0) return yield* new SummarizerError({ reason: "EmptyTranscript", message: "the transcript has no words to summarise" })
      const { units, cut } = unitsWithinBudget(all)
      const answer = yield* chatText(endpoint, summaryMessages(source, template, units, cut), { temperature: 0.2 }).pipe(
        Effect.mapError((e) => new SummarizerError({ reason: e.reason === "TimedOut" ? "TimedOut" : "EngineFailed", message: `the summary model failed: ${e.message}` }))
      )
      const sections = parseSummary(answer, source, template, units)
      if (sections === undefined) {
        return yield* new SummarizerError({ reason: "EngineFailed", message: "the summary model did not answer the JSON object it was asked for" })
      }
      return { engine, sections }
    })
  })
}

/** `Summarizer` by the chat model at `endpoint`. */
export const LlmSummarizer = {
  layer: (endpoint: ChatEndpoint) => Layer.succeed(Summarizer, makeLlmSummarizer(endpoint))
}
