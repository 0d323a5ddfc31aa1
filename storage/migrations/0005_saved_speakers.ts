/**
 * Speaker voiceprints (SPEC 2.7): biometric data, so nothing but the vectors is kept, and only
 * on request.
 *
 * - `job_voiceprints`: one row per raw diarization label (`SPEAKER_00`, …) of a job that ran
 *   with speaker recognition: the speaker's embedding centroid, the embedding model that made
 *   it (vectors of different models are never compared) and the seconds of speech it came
 *   from. Removed with the job.
 * - `saved_speakers`: a user's enrolled speakers, each a copy of one job voiceprint made by the
 *   explicit enroll call. Deleting one deletes the row (no soft delete). `source_job_id` is a
 *   plain reference: the job may be deleted while the speaker stays. A label is enrolled at
 *   most once per job.
 *
 * Vectors are base64 of little-endian float32, the same text on PGlite and PostgreSQL.
 * Frozen once released: change the schema in a new numbered migration, never here.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql/SqlClient"

export default Effect.gen(function*() {
  const sql = yield* SqlClient
  yield* sql.unsafe(`
    CREATE TABLE job_voiceprints (
      job_id text NOT NULL REFERENCES recognition_jobs(id) ON DELETE CASCADE,
      label text NOT NULL,
      model text NOT NULL,
      centroid text NOT NULL,
      speech_seconds double precision NOT NULL,
      PRIMARY KEY (job_id, label)
    )`)
  yield* sql.unsafe(`
    CREATE TABLE saved_speakers (
      id text PRIMARY KEY,
      user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      name text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      source_job_id text NOT NULL,
      source_label text NOT NULL,
      model text NOT NULL,
      voiceprint text NOT NULL,
      speech_seconds double precision NOT NULL,
      UNIQUE (user_id, source_job_id, source_label)
    )`)
  yield* sql.unsafe(`CREATE INDEX saved_speakers_user ON saved_speakers (user_id, created_at)`)
})
