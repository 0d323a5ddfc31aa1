/**
 * Summaries of finished recognition jobs (SPEC 2.9, 4.1 rule 6, endpoints 19-22): picks the
 * template (the one asked for, else the caller's default, else the service's), turns the job's
 * stored transcript into the `Summarizer`'s input, runs it, renders Markdown and stores a new
 * record on every call. The engine failing stores nothing and charges nothing.
 *
 * Credits (CreditPolicy.ts): the job's owner is charged per 100 transcript characters, reserved
 * before the engine runs (402 up front) and settled when the record is stored. Anonymous jobs are
 * summarised free. Who may see the job is the route's decision; this module trusts its caller.
 */
import { Data, Effect, Exit } from "effect"
import { type SummarySource, Summarizer, type SummaryTemplate, type SummaryWord } from "../engines/summary/Summarizer.ts"
import { summaryMarkdown } from "../engines/summary/SummaryMarkdown.ts"
import { DEFAULT_TEMPLATE_ID, findTemplate, SUMMARY_TEMPLATES } from "../engines/summary/SummaryTemplates.ts"
import { Credits } from "../storage/Credits.ts"
import type { JobRow } from "../storage/RecognitionJobs.ts"
import { type StoredSummary, Summaries } from "../storage/Summaries.ts"
import { CreditPurpose, textCredits } from "./CreditPolicy.ts"

export class SummaryRequestError extends Data.TaggedError("SummaryRequestError")<{
  readonly reason: "UnknownTemplate" | "JobNotSucceeded"
  readonly message: string
}> {}

const templateIds = () => SUMMARY_TEMPLATES.map((t) => t.id).join(", ")

/** The template of `id`, or a 400 naming the catalogue. */
export const requireTemplate = (id: string): Effect.Effect<SummaryTemplate, SummaryRequestError> => {
  const template = findTemplate(id)
  return template !== undefined
    ? Effect.succeed(template)
    : Effect.fail(new SummaryRequestError({ reason: "UnknownTemplate", message: `no summary template ${JSON.stringify(id)}; the templates are ${templateIds()}` }))
}

/** The caller's default template id; anonymous callers and stale ids get the service default. */
export const defaultTemplateId = Effect.fn("Summarization.defaultTemplateId")(function*(userId: string | null) {
  if (userId === null) return DEFAULT_TEMPLATE_ID
  const chosen = yield* (yield* Summaries).defaultTemplate(userId)
  return chosen !== undefined && findTemplate(chosen) !== undefined ? chosen : DEFAULT_TEMPLATE_ID
})

type Json = Record<string, unknown>
const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : undefined)

/** The summarizer's input from a job's stored result (the ElevenLabs transcript body). */
export const summarySource = (result: Json | null): SummarySource => {
  const words: Array<SummaryWord> = []
  for (const w of Array.isArray(result?.words) ? (result.words as Array<Json>) : []) {
    if (w.type !== "word" || typeof w.text !== "string") continue
    words.push({ text: w.text, start: num(w.start), end: num(w.end), speaker: typeof w.speaker_id === "string" ? w.speaker_id : undefined })
  }
  const speakerNames: Record<string, string> = {}
  for (const s of Array.isArray(result?.speakers) ? (result.speakers as Array<Json>) : []) {
    if (typeof s.speaker_id === "string" && typeof s.speaker_name === "string") speakerNames[s.speaker_id] = s.speaker_name
  }
  return { words, language: typeof result?.language_code === "string" ? result.language_code : "en", speakerNames }
}

/** Generates, stores and returns a new summary of a job the caller may see. */
export const summarizeJob = Effect.fn("Summarization.summarizeJob")(function*(job: JobRow, templateId: string | undefined) {
  if (job.state !== "succeeded") {
    return yield* new SummaryRequestError({ reason: "JobNotSucceeded", message: `job ${job.id} is ${job.state}; only a succeeded job can be summarised` })
  }
  const template = yield* requireTemplate(templateId ?? (yield* defaultTemplateId(job.user_id)))
  const source = summarySource(job.result)
  const summarizer = yield* Summarizer
  const summaries = yield* Summaries
  const generate = Effect.gen(function*() {
    const output = yield* summarizer.summarize(source, template)
    return yield* summaries.add({
      jobId: job.id,
      templateId: template.id,
      engine: output.engine,
      sections: output.sections,
      text: summaryMarkdown(template, output)
    })
  })
  if (job.user_id === null) return yield* generate
  const credits = yield* Credits
  const cost = textCredits(source.words.map((w) => w.text).join(" "))
  const reservation = yield* credits.reserve(job.user_id, cost, { purpose: CreditPurpose.summary, reference: job.id })
  return yield* generate.pipe(
    Effect.onExit((exit) =>
      (Exit.isSuccess(exit) ? credits.settle(reservation, cost) : credits.release(reservation)).pipe(
        Effect.catchCause((cause) => Effect.logWarning("summary credits not settled", cause))
      )
    )
  )
})

/** A stored summary as the API returns it. */
export const summaryWire = (s: StoredSummary) => ({
  summary_id: s.id,
  job_id: s.jobId,
  template_id: s.templateId,
  engine: s.engine,
  created_at: s.createdAt.toISOString(),
  sections: s.sections,
  text: s.text
})

/** The catalogue as GET/PUT /summary-templates return it. */
export const templateCatalogue = (defaultId: string) => ({
  templates: SUMMARY_TEMPLATES.map((t) => ({
    id: t.id,
    name: t.name,
    description: t.description,
    sections: t.sections.map((s) => ({ id: s.id, title: s.title, kind: s.kind, description: s.description, max_items: s.maxItems }))
  })),
  default_template_id: defaultId
})
