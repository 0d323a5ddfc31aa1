/**
 * Summaries of recognition jobs and the template catalogue (SPEC 2.9, endpoints 19-22).
 *
 * A job's summaries are visible to whoever may see the job: its owner, or for an anonymous job
 * whoever holds its id (the id is the capability). Another user's job is 404. The catalogue is
 * data (no create or delete); PUT sets the caller's default and needs an account, since a
 * default belongs to one (anonymous PUT is 401).
 */
import { Effect } from "effect"
import { defaultTemplateId, requireTemplate, summarizeJob, summaryWire, templateCatalogue } from "../../actors/Summarization.ts"
import type { Summarizer } from "../../engines/summary/Summarizer.ts"
import type { Credits } from "../../storage/Credits.ts"
import { RecognitionJobs } from "../../storage/RecognitionJobs.ts"
import { Summaries } from "../../storage/Summaries.ts"
import { badRequest } from "../ApiError.ts"
import { optionalJsonObject } from "../decode.ts"
import { Reply, type Route } from "../Http.ts"
import { ErrorBody } from "../schemas/ErrorBody.ts"
import { SetDefaultTemplateRequest, Summary, SummaryGenerateRequest, SummaryList, TemplateCatalogue } from "../schemas/Summaries.ts"
import { visibleJob } from "./jobs.ts"

export interface SummaryRouteOptions {
  readonly apiBase: string
  readonly maxJsonBodyBytes: number
}

const errorDoc = (description: string) => ({ description, schema: ErrorBody })

/** An optional string field under either spelling; anything else is a 400 naming it. */
const stringField = (body: Record<string, unknown>, names: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    for (const name of names) {
      const value = body[name]
      if (value === undefined || value === null) continue
      if (typeof value !== "string") return yield* badRequest(`${name} must be a string`)
      return value
    }
    return undefined
  })

export const summaryRoutes = (options: SummaryRouteOptions): ReadonlyArray<Route<RecognitionJobs | Summaries | Summarizer | Credits>> => {
  const jobSummaries = `${options.apiBase}/recognition/jobs/{job_id}/summary`
  const templates = `${options.apiBase}/summary-templates`
  return [
    {
      method: "GET",
      path: jobSummaries,
      auth: "optional",
      operationId: "listJobSummaries",
      summary: "Every summary of a job, oldest first",
      tags: ["summaries"],
      responses: {
        200: { description: "the job's summaries", schema: SummaryList },
        401: errorDoc("an invalid credential"),
        404: errorDoc("no such job visible to the caller")
      },
      handler: (ctx) =>
        Effect.gen(function*() {
          const job = yield* visibleJob(yield* RecognitionJobs, ctx.params.job_id!, ctx.principal)
          const list = yield* (yield* Summaries).list(job.id)
          return Reply.json(200, { summaries: list.map(summaryWire) })
        })
    },
    {
      method: "POST",
      path: jobSummaries,
      auth: "optional",
      operationId: "generateJobSummary",
      summary: "Summarise a succeeded job with a template; every call stores a new summary",
      tags: ["summaries"],
      requestBody: { contentType: "application/json", schema: SummaryGenerateRequest, required: false },
      responses: {
        200: { description: "the new summary", schema: Summary },
        400: errorDoc("malformed body or an unknown template id"),
        401: errorDoc("an invalid credential"),
        402: errorDoc("the job owner's account is out of credits (one per started 100 transcript characters)"),
        404: errorDoc("no such job visible to the caller"),
        409: errorDoc("the job has not succeeded (job_not_succeeded), or its transcript has no words (empty_transcript)"),
        502: errorDoc("the summary engine failed (engine_failed); nothing was stored")
      },
      handler: (ctx) =>
        Effect.gen(function*() {
          const body = yield* optionalJsonObject(ctx, options.maxJsonBodyBytes)
          const templateId = yield* stringField(body, ["templateId", "template_id"])
          const job = yield* visibleJob(yield* RecognitionJobs, ctx.params.job_id!, ctx.principal)
          const stored = yield* summarizeJob(job, templateId)
          return Reply.json(200, summaryWire(stored))
        })
    },
    {
      method: "GET",
      path: templates,
      auth: "optional",
      operationId: "listSummaryTemplates",
      summary: "The template catalogue and the caller's default template",
      tags: ["summaries"],
      responses: { 200: { description: "the catalogue", schema: TemplateCatalogue }, 401: errorDoc("an invalid credential") },
      handler: (ctx) =>
        Effect.map(defaultTemplateId(ctx.principal?.userId ?? null), (id) => Reply.json(200, templateCatalogue(id)))
    },
    {
      method: "PUT",
      path: templates,
      auth: "key",
      operationId: "setDefaultSummaryTemplate",
      summary: "Set the caller's default template; answers the updated catalogue",
      tags: ["summaries"],
      requestBody: { contentType: "application/json", schema: SetDefaultTemplateRequest, required: true },
      responses: {
        200: { description: "the catalogue with the new default", schema: TemplateCatalogue },
        400: errorDoc("malformed body or an unknown template id"),
        401: errorDoc("no valid credential: a default belongs to an account")
      },
      handler: (ctx) =>
        Effect.gen(function*() {
          const body = yield* optionalJsonObject(ctx, options.maxJsonBodyBytes)
          const id = yield* stringField(body, ["default_template_id", "templateId", "template_id"])
          if (id === undefined) return yield* badRequest("default_template_id is required")
          const template = yield* requireTemplate(id)
          yield* (yield* Summaries).setDefaultTemplate(ctx.principal!.userId, template.id)
          return Reply.json(200, templateCatalogue(template.id))
        })
    }
  ]
}

