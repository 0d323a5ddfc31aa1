/**
 * Asynchronous recognition: jobs (reserved upload → queued → claimed under a lease → one
 * terminal state), webhook subscriptions, the webhook outbox, and secrets the instances share.
 *
 * - `recognition_jobs`: one row per reserved upload. `user_id` NULL is an anonymous job (its
 *   unguessable id is the capability; `client_address` bounds anonymous minutes per hour).
 *   The blob of the upload is `upload_key` in the blob store. A job is claimed by one instance
 *   (`claimed_by`) until `lease_until`, renewed by a heartbeat; an expired lease makes a
 *   `running` job claimable again. `claims` counts claims (a job that keeps killing its
 *   instance is failed after a few). `result` is the synchronous endpoint's body.
 * - `webhooks`: subscriptions; `signing_secret` is needed in clear to sign (HMAC), so it is
 *   stored as given out, and shown only in the create answer.
 * - `webhook_deliveries`: the outbox. A row is written in the same transaction as the job's
 *   terminal state; `body` is the exact JSON sent on every attempt (same `event_id`).
 * - `service_secrets`: random secrets made once per database and shared by every instance
 *   (the key of presigned upload addresses).
 *
 * Frozen once released: change the schema in a new numbered migration, never here.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql/SqlClient"

export default Effect.gen(function*() {
  const sql = yield* SqlClient
  yield* sql.unsafe(`
    CREATE TABLE recognition_jobs (
      id text PRIMARY KEY,
      user_id text REFERENCES users(id) ON DELETE CASCADE,
      client_address text,
      state text NOT NULL CHECK (state IN ('uploading', 'pending', 'running', 'succeeded', 'failed', 'cancelled')),
      filename text,
      content_type text,
      declared_bytes bigint,
      max_bytes bigint NOT NULL,
      upload_key text NOT NULL,
      upload_bytes bigint,
      upload_expires_at timestamptz NOT NULL,
      source_url text,
      options jsonb,
      webhook_id text,
      webhook_metadata jsonb,
      transcription_id text UNIQUE,
      created_at timestamptz NOT NULL DEFAULT now(),
      queued_at timestamptz,
      started_at timestamptz,
      finished_at timestamptz,
      claimed_by text,
      lease_until timestamptz,
      claims integer NOT NULL DEFAULT 0,
      progress_stage text,
      progress_fraction real,
      audio_duration_s double precision,
      result jsonb,
      error_code text,
      error_message text
    )`)
  yield* sql.unsafe(`CREATE INDEX recognition_jobs_user ON recognition_jobs (user_id, created_at DESC)`)
  yield* sql.unsafe(`CREATE INDEX recognition_jobs_queue ON recognition_jobs (queued_at) WHERE state IN ('pending', 'running')`)
  yield* sql.unsafe(`CREATE INDEX recognition_jobs_uploading ON recognition_jobs (upload_expires_at) WHERE state = 'uploading'`)
  yield* sql.unsafe(`CREATE INDEX recognition_jobs_anonymous ON recognition_jobs (client_address, created_at) WHERE user_id IS NULL`)
  yield* sql.unsafe(`
    CREATE TABLE webhooks (
      id text PRIMARY KEY,
      user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      url text NOT NULL,
      description text,
      signing_secret text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      revoked_at timestamptz
    )`)
  yield* sql.unsafe(`CREATE INDEX webhooks_user ON webhooks (user_id, created_at DESC)`)
  yield* sql.unsafe(`
    CREATE TABLE webhook_deliveries (
      event_id text PRIMARY KEY,
      webhook_id text NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
      job_id text REFERENCES recognition_jobs(id) ON DELETE SET NULL,
      body text NOT NULL,
      state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'dead')),
      attempts integer NOT NULL DEFAULT 0,
      next_attempt_at timestamptz NOT NULL DEFAULT now(),
      last_status integer,
      last_error text,
      created_at timestamptz NOT NULL DEFAULT now(),
      delivered_at timestamptz
    )`)
  yield* sql.unsafe(`CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE state = 'pending'`)
  yield* sql.unsafe(`CREATE INDEX webhook_deliveries_job ON webhook_deliveries (job_id)`)
  yield* sql.unsafe(`
    CREATE TABLE service_secrets (
      name text PRIMARY KEY,
      value text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`)
})
