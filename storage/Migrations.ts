/**
 * The schema's version history, applied at start-up by every process that opens the database
 * (server and admin CLI alike, embedded or PostgreSQL).
 *
 * Migrations are a static record rather than a directory scan so that they are type-checked and
 * bundled like any other module. Concurrent runs are safe: the migrator locks its table inside
 * a transaction, and a run that finds the work done applies nothing.
 */
import * as Migrator from "effect/sql/Migrator"
import accounts from "./migrations/0001_accounts.ts"
import voiceClones from "./migrations/0002_voice_clones.ts"
import creditLedger from "./migrations/0003_credit_ledger.ts"
import recognitionJobs from "./migrations/0004_recognition_jobs.ts"
import savedSpeakers from "./migrations/0005_saved_speakers.ts"
import summaries from "./migrations/0006_summaries.ts"
import site from "./migrations/0007_site.ts"
import oauth from "./migrations/0008_oauth.ts"
import rateBuckets from "./migrations/0009_rate_buckets.ts"
import uploadClaims from "./migrations/0010_upload_claims.ts"
import noJobVoiceprints from "./migrations/0011_no_job_voiceprints.ts"
import singleUseTokens from "./migrations/0012_single_use_tokens.ts"

export const migrations = {
  "0001_accounts": accounts,
  "0002_voice_clones": voiceClones,
  "0003_credit_ledger": creditLedger,
  "0004_recognition_jobs": recognitionJobs,
  "0005_saved_speakers": savedSpeakers,
  "0006_summaries": summaries,
  "0007_site": site,
  "0008_oauth": oauth,
  "0009_rate_buckets": rateBuckets,
  "0010_upload_claims": uploadClaims,
  "0011_no_job_voiceprints": noJobVoiceprints,
  "0012_single_use_tokens": singleUseTokens
}

export const migrationsTable = "speech_migrations"

/** Applies pending migrations; returns the `[id, name]` pairs it applied. */
export const runMigrations = Migrator.make({})({
  loader: Migrator.fromRecord(migrations),
  table: migrationsTable
})
