/**
 * Saved speakers (SPEC 2.7, endpoints 12-15). A voiceprint is biometric data: the only place
 * one is stored is a saved speaker, made by the explicit enroll call from a voiceprint computed
 * for that call (actors/SpeakerEnrollment.ts), read for matching only by its owner's jobs, and
 * deleted for real. Jobs keep none (migration 0011 dropped `job_voiceprints`): a job's
 * voiceprints live in its memory while it matches them, and are gone when it ends.
 */
import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import { randomBytes } from "node:crypto"

export interface Voiceprint {
  /** The raw diarization label, `SPEAKER_00`, … */
  readonly label: string
  /** The embedding model and calibration that made `centroid`; only equal models compare. */
  readonly model: string
  /** L2-normalised mean of the speaker's window embeddings. */
  readonly centroid: Float32Array
  /** Seconds of speech the centroid came from. */
  readonly speechSeconds: number
}

export interface SavedSpeaker {
  readonly id: string
  readonly name: string
  readonly createdAt: Date
  readonly sourceJobId: string
  readonly speechSeconds: number
}

export interface SavedVoiceprint extends SavedSpeaker {
  readonly model: string
  readonly voiceprint: Float32Array
}

export type EnrollResult =
  | { readonly _tag: "Enrolled"; readonly speaker: SavedSpeaker }
  | { readonly _tag: "NoSuchJob" }
  | { readonly _tag: "AlreadyEnrolled" }

export const encodeVector = (v: Float32Array): string => Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("base64")

export const decodeVector = (text: string): Float32Array => {
  const bytes = Buffer.from(text, "base64")
  const out = new Float32Array(bytes.byteLength / 4)
  for (let i = 0; i < out.length; i++) out[i] = bytes.readFloatLE(i * 4)
  return out
}

const newSpeakerId = (): string => `spk_${randomBytes(12).toString("hex")}`

interface SpeakerRow {
  id: string
  name: string
  created_at: Date
  source_job_id: string
  speech_seconds: number
}

const fromRow = (r: SpeakerRow): SavedSpeaker => ({
  id: r.id,
  name: r.name,
  createdAt: new Date(r.created_at),
  sourceJobId: r.source_job_id,
  speechSeconds: Number(r.speech_seconds)
})

export const makeSavedSpeakers = Effect.gen(function*() {
  const sql = yield* SqlClient
  return {
    /** True when `label` of this job is already one of the user's saved speakers. */
    isEnrolled: (userId: string, jobId: string, label: string) =>
      sql`SELECT 1 FROM saved_speakers WHERE user_id = ${userId} AND source_job_id = ${jobId} AND source_label = ${label}`.pipe(
        Effect.map((rows) => rows.length > 0)
      ),

    /** Stores `print`, computed from the user's job for this call, as a new saved speaker. */
    enroll: (userId: string, jobId: string, name: string, print: Voiceprint): Effect.Effect<EnrollResult, SqlError> =>
      Effect.gen(function*() {
        const rows = yield* sql<SpeakerRow>`INSERT INTO saved_speakers
            (id, user_id, name, source_job_id, source_label, model, voiceprint, speech_seconds)
          SELECT ${newSpeakerId()}, ${userId}, ${name}, j.id, ${print.label}, ${print.model}, ${encodeVector(print.centroid)}, ${print.speechSeconds}
          FROM recognition_jobs j WHERE j.id = ${jobId} AND j.user_id = ${userId}
          ON CONFLICT (user_id, source_job_id, source_label) DO NOTHING
          RETURNING id, name, created_at, source_job_id, speech_seconds`
        if (rows[0] !== undefined) return { _tag: "Enrolled", speaker: fromRow(rows[0]) } as const
        // Enrolled by a concurrent call, or the job was deleted meanwhile.
        const again = yield* sql`SELECT 1 FROM saved_speakers WHERE user_id = ${userId} AND source_job_id = ${jobId} AND source_label = ${print.label}`
        return again.length > 0 ? { _tag: "AlreadyEnrolled" } as const : { _tag: "NoSuchJob" } as const
      }),

    /** The user's saved speakers, oldest first. */
    list: (userId: string) =>
      sql<SpeakerRow>`SELECT id, name, created_at, source_job_id, speech_seconds FROM saved_speakers
        WHERE user_id = ${userId} ORDER BY created_at, id`.pipe(Effect.map((rows) => rows.map(fromRow))),

    rename: (userId: string, id: string, name: string) =>
      sql<SpeakerRow>`UPDATE saved_speakers SET name = ${name} WHERE id = ${id} AND user_id = ${userId}
        RETURNING id, name, created_at, source_job_id, speech_seconds`.pipe(
        Effect.map((rows) => (rows[0] === undefined ? undefined : fromRow(rows[0])))
      ),

    /** A hard delete; true when the user had it. */
    remove: (userId: string, id: string) =>
      sql`DELETE FROM saved_speakers WHERE id = ${id} AND user_id = ${userId} RETURNING id`.pipe(Effect.map((rows) => rows.length > 0)),

    /** The user's voiceprints of one embedding model: the only ones a job of theirs is compared with. */
    forMatching: (userId: string, model: string) =>
      sql<SpeakerRow & { model: string; voiceprint: string }>`SELECT id, name, created_at, source_job_id, speech_seconds, model, voiceprint
        FROM saved_speakers WHERE user_id = ${userId} AND model = ${model} ORDER BY created_at, id`.pipe(
        Effect.map((rows) => rows.map((r): SavedVoiceprint => ({ ...fromRow(r), model: r.model, voiceprint: decodeVector(r.voiceprint) })))
      )
  }
})

export class SavedSpeakers extends Context.Service<SavedSpeakers, Effect.Success<typeof makeSavedSpeakers>>()("speech/storage/SavedSpeakers") {}

export const savedSpeakersLayer: Layer.Layer<SavedSpeakers, never, SqlClient> = Layer.effect(SavedSpeakers, makeSavedSpeakers)
