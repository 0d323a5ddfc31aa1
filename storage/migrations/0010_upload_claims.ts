/**
 * One upload per presigned address (issue 38, item 8).
 *
 * - `recognition_jobs.upload_claim`: a random token written by the PUT that won the address
 *   (`UPDATE … WHERE upload_claim IS NULL … RETURNING`, atomic on every instance sharing the
 *   database) before it reads a byte; any other PUT to the address is 409 while it is set. The
 *   winner records its size only under its own token, and clears the token when its upload is
 *   refused, so the client may try again.
 *
 * Frozen once released: change the schema in a new numbered migration, never here.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql/SqlClient"

export default Effect.gen(function*() {
  const sql = yield* SqlClient
  yield* sql.unsafe(`ALTER TABLE recognition_jobs ADD COLUMN upload_claim text`)
})
