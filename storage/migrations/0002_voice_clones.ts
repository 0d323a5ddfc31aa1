/**
 * Voice clones: one reference sample per clone (kept in the blob store under
 * `sample_blob_key`, so a future engine can analyse it again) and the analysis profile.
 *
 * Deleting a clone sets `deleted_at` and removes the blob; the name is free again at once
 * (the uniqueness index covers active clones only).
 *
 * Frozen once released: change the schema in a new numbered migration, never here.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql/SqlClient"

export default Effect.gen(function*() {
  const sql = yield* SqlClient
  yield* sql.unsafe(`
    CREATE TABLE voice_clones (
      id text PRIMARY KEY,
      user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      name text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 60),
      language text NOT NULL,
      description text,
      labels jsonb NOT NULL DEFAULT '{}'::jsonb,
      ref_text text,
      sample_blob_key text NOT NULL,
      profile jsonb NOT NULL,
      preview_text text,
      created_at timestamptz NOT NULL DEFAULT now(),
      deleted_at timestamptz
    )`)
  yield* sql.unsafe(`CREATE INDEX voice_clones_user_id ON voice_clones (user_id, created_at)`)
  yield* sql.unsafe(`CREATE UNIQUE INDEX voice_clones_active_name ON voice_clones (user_id, name) WHERE deleted_at IS NULL`)
})
