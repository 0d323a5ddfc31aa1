/**
 * No voiceprint without enrollment (issue 38, item 4; SPEC 2.7: a voiceprint is biometric data,
 * stored only on the explicit enroll call, deleted hard).
 *
 * - `job_voiceprints` is dropped with every row it held: a job no longer keeps the voiceprints
 *   of the speakers it heard. Enrollment computes the one it stores from the job's audio
 *   (actors/SpeakerEnrollment.ts), and `saved_speakers` is the only place a voiceprint lives.
 * - `recognition_jobs.audio_kept_until`: a job that ran with speaker recognition keeps its
 *   audio until then (SPEAKER_ENROLL_WINDOW_MINUTES after it finished) so that a speaker of it
 *   can be enrolled; the sweeper deletes the audio and clears the column after it. NULL: the
 *   audio is gone (or was never kept).
 *
 * Frozen once released: change the schema in a new numbered migration, never here.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql/SqlClient"

export default Effect.gen(function*() {
  const sql = yield* SqlClient
  yield* sql.unsafe(`DROP TABLE IF EXISTS job_voiceprints`)
  yield* sql.unsafe(`ALTER TABLE recognition_jobs ADD COLUMN audio_kept_until timestamptz`)
  yield* sql.unsafe(`CREATE INDEX recognition_jobs_audio_kept ON recognition_jobs (audio_kept_until) WHERE audio_kept_until IS NOT NULL`)
})
