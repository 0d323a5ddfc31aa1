/**
 * Stored summaries of recognition jobs and each user's default template (migration 0006).
 * Who may read or write a job's summaries is decided by the route (the job's visibility);
 * this module stores what it is given. Sections are kept as the JSON the API returns.
 */
import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import { randomBytes } from "node:crypto"
import { jsonbValue } from "./Database.ts"

export interface StoredSummary {
  readonly id: string
  readonly jobId: string
  readonly templateId: string
  readonly engine: string
  readonly sections: unknown
  readonly text: string
  readonly createdAt: Date
}

export interface NewSummary {
  readonly jobId: string
  readonly templateId: string
  readonly engine: string
  readonly sections: unknown
  readonly text: string
}

interface Row {
  id: string
  job_id: string
  template_id: string
  engine: string
  sections: unknown
  text: string
  created_at: Date
}

const fromRow = (r: Row): StoredSummary => ({
  id: r.id,
  jobId: r.job_id,
  templateId: r.template_id,
  engine: r.engine,
  sections: jsonbValue(r.sections),
  text: r.text,
  createdAt: new Date(r.created_at)
})

const newSummaryId = (): string => `sum_${randomBytes(12).toString("hex")}`

export const makeSummaries = Effect.gen(function*() {
  const sql = yield* SqlClient
  return {
    add: (summary: NewSummary): Effect.Effect<StoredSummary, SqlError> =>
      sql<Row>`INSERT INTO job_summaries (id, job_id, template_id, engine, sections, text)
        VALUES (${newSummaryId()}, ${summary.jobId}, ${summary.templateId}, ${summary.engine},
                ${JSON.stringify(summary.sections)}::jsonb, ${summary.text})
        RETURNING id, job_id, template_id, engine, sections, text, created_at`.pipe(Effect.map((rows) => fromRow(rows[0]!))),

    /** A job's summaries, oldest first. */
    list: (jobId: string): Effect.Effect<ReadonlyArray<StoredSummary>, SqlError> =>
      sql<Row>`SELECT id, job_id, template_id, engine, sections, text, created_at FROM job_summaries
        WHERE job_id = ${jobId} ORDER BY seq`.pipe(Effect.map((rows) => rows.map(fromRow))),

    /** The user's default template id, or undefined for the service default. */
    defaultTemplate: (userId: string): Effect.Effect<string | undefined, SqlError> =>
      sql<{ summary_template_id: string | null }>`SELECT summary_template_id FROM users WHERE id = ${userId}`.pipe(
        Effect.map((rows) => rows[0]?.summary_template_id ?? undefined)
      ),

    setDefaultTemplate: (userId: string, templateId: string): Effect.Effect<void, SqlError> =>
      sql`UPDATE users SET summary_template_id = ${templateId} WHERE id = ${userId}`.pipe(Effect.asVoid)
  }
})

export class Summaries extends Context.Service<Summaries, Effect.Success<typeof makeSummaries>>()("speech/storage/Summaries") {}

export const summariesLayer: Layer.Layer<Summaries, never, SqlClient> = Layer.effect(Summaries, makeSummaries)
