/**
 * Meeting summaries (SPEC 2.9, endpoints 19-22).
 *
 * - `job_summaries`: every generate call adds a row (no dedup); listed oldest first by `seq`
 *   (timestamps of two calls in one millisecond would tie). `sections` is the structured JSON
 *   the API returns, `text` its Markdown. Removed with the job.
 * - `users.summary_template_id`: the user's default template; NULL means the service default.
 *   Not a foreign key: templates are data in code (engines/summary/SummaryTemplates.ts), and a
 *   removed template id falls back to the service default when read.
 *
 * Frozen once released: change the schema in a new numbered migration, never here.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql/SqlClient"

export default Effect.gen(function*() {
  const sql = yield* SqlClient
  yield* sql.unsafe(`
    CREATE TABLE job_summaries (
      id text PRIMARY KEY,
      seq bigint GENERATED ALWAYS AS IDENTITY,
      job_id text NOT NULL REFERENCES recognition_jobs(id) ON DELETE CASCADE,
      template_id text NOT NULL,
      engine text NOT NULL,
      sections jsonb NOT NULL,
      text text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`)
  yield* sql.unsafe(`CREATE INDEX job_summaries_job ON job_summaries (job_id, seq)`)
  yield* sql.unsafe(`ALTER TABLE users ADD COLUMN summary_template_id text`)
})
