/**
 * The voice clones of each user: rows of `voice_clones` (migration 0002). Every query filters
 * by the owner, so another user's clone id reads exactly like an unknown one (404 at the edge).
 * The sample itself lives in the BlobStore; this module stores its key only.
 */
import { Context, Data, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import { randomBytes } from "node:crypto"
import { jsonbValue } from "./Database.ts"

export class VoiceClonesError extends Data.TaggedError("VoiceClonesError")<{
  readonly reason: "NameTaken" | "NotFound"
  readonly message: string
}> {}

export interface VoiceCloneRow {
  /** `vc_<hex>`. */
  readonly voiceId: string
  readonly userId: string
  readonly name: string
  readonly language: string
  readonly description: string | null
  readonly labels: Readonly<Record<string, string>>
  readonly refText: string | null
  readonly sampleBlobKey: string
  /** The analysis and synthesis plan (engines/clone/VoiceAnalysis.ts `CloneProfile`). */
  readonly profile: unknown
  readonly previewText: string | null
  readonly createdAt: Date
}

export type NewVoiceClone = Omit<VoiceCloneRow, "createdAt" | "userId" | "voiceId"> & { readonly voiceId?: string }

/** What `update` may change; absent fields stay as they are. */
export type CloneChanges = Partial<Pick<VoiceCloneRow, "name" | "language" | "description" | "labels" | "refText" | "sampleBlobKey" | "profile" | "previewText">>

export const newCloneId = (): string => `vc_${randomBytes(10).toString("hex")}`

/**
 * What `newCloneId` makes. Anything else cannot be a clone and is NotFound without a query (a
 * NUL byte, for one, would make PostgreSQL fail the query instead of finding nothing).
 */
export const isCloneId = (voiceId: string): boolean => /^vc_[0-9a-f]{1,64}$/.test(voiceId)

export interface VoiceClonesShape {
  /** Fails with NameTaken when the user already has an active clone of that name. */
  readonly create: (userId: string, clone: NewVoiceClone) => Effect.Effect<VoiceCloneRow, VoiceClonesError | SqlError>
  /** Active clones of the user, oldest first. */
  readonly list: (userId: string) => Effect.Effect<ReadonlyArray<VoiceCloneRow>, SqlError>
  /** NotFound for unknown, deleted, or someone else's clones. */
  readonly get: (userId: string, voiceId: string) => Effect.Effect<VoiceCloneRow, VoiceClonesError | SqlError>
  readonly nameTaken: (userId: string, name: string) => Effect.Effect<boolean, SqlError>
  /**
   * Changes an active clone in place (NameTaken, NotFound as above). Returns the row as it was
   * and as it is, so the caller can remove a replaced sample blob.
   */
  readonly update: (userId: string, voiceId: string, changes: CloneChanges) => Effect.Effect<{
    readonly before: VoiceCloneRow
    readonly after: VoiceCloneRow
  }, VoiceClonesError | SqlError>
  /** Marks the clone deleted; returns the row as it was (the caller removes its blob). */
  readonly remove: (userId: string, voiceId: string) => Effect.Effect<VoiceCloneRow, VoiceClonesError | SqlError>
}

export class VoiceClones extends Context.Service<VoiceClones, VoiceClonesShape>()("speech/storage/VoiceClones") {}

interface Row {
  id: string
  user_id: string
  name: string
  language: string
  description: string | null
  labels: unknown
  ref_text: string | null
  sample_blob_key: string
  profile: unknown
  preview_text: string | null
  created_at: Date
}

const toClone = (r: Row): VoiceCloneRow => ({
  voiceId: r.id,
  userId: r.user_id,
  name: r.name,
  language: r.language,
  description: r.description,
  labels: (jsonbValue(r.labels) ?? {}) as Record<string, string>,
  refText: r.ref_text,
  sampleBlobKey: r.sample_blob_key,
  profile: jsonbValue(r.profile),
  previewText: r.preview_text,
  createdAt: r.created_at
})

const notFound = (voiceId: string) => new VoiceClonesError({ reason: "NotFound", message: `voice "${voiceId}" not found` })
const nameTaken = (name: string) =>
  new VoiceClonesError({ reason: "NameTaken", message: `you already have a voice clone named "${name}"; delete it or choose another name` })

/** PostgreSQL's unique_violation, however the driver wraps it. */
const isUniqueViolation = (e: SqlError): boolean => {
  const reason = (e as unknown as { reason?: { _tag?: string; cause?: { code?: string } } }).reason
  return reason?._tag === "UniqueViolation" || reason?.cause?.code === "23505"
}

export const makeVoiceClones = Effect.gen(function*() {
  const sql = yield* SqlClient
  const columns = sql.unsafe(
    "id, user_id, name, language, description, labels, ref_text, sample_blob_key, profile, preview_text, created_at"
  )

  const create = Effect.fn("VoiceClones.create")(function*(userId: string, clone: NewVoiceClone) {
    const id = clone.voiceId ?? newCloneId()
    const rows = yield* sql<Row>`
      INSERT INTO voice_clones (id, user_id, name, language, description, labels, ref_text, sample_blob_key, profile, preview_text)
      VALUES (${id}, ${userId}, ${clone.name}, ${clone.language}, ${clone.description}, ${JSON.stringify(clone.labels)}::jsonb,
        ${clone.refText}, ${clone.sampleBlobKey}, ${JSON.stringify(clone.profile)}::jsonb, ${clone.previewText})
      RETURNING ${columns}`.pipe(
      Effect.catchIf((e) => isUniqueViolation(e), () => Effect.fail(nameTaken(clone.name)))
    )
    return toClone(rows[0]!)
  })

  const list = Effect.fn("VoiceClones.list")(function*(userId: string) {
    const rows = yield* sql<Row>`
      SELECT ${columns} FROM voice_clones WHERE user_id = ${userId} AND deleted_at IS NULL ORDER BY created_at, id`
    return rows.map(toClone)
  })

  const get = Effect.fn("VoiceClones.get")(function*(userId: string, voiceId: string) {
    if (!isCloneId(voiceId)) return yield* notFound(voiceId)
    const rows = yield* sql<Row>`
      SELECT ${columns} FROM voice_clones WHERE id = ${voiceId} AND user_id = ${userId} AND deleted_at IS NULL`
    if (rows[0] === undefined) return yield* notFound(voiceId)
    return toClone(rows[0])
  })

  const isTaken = Effect.fn("VoiceClones.nameTaken")(function*(userId: string, name: string) {
    const rows = yield* sql`SELECT 1 FROM voice_clones WHERE user_id = ${userId} AND name = ${name} AND deleted_at IS NULL`
    return rows.length > 0
  })

  const update = Effect.fn("VoiceClones.update")(function*(userId: string, voiceId: string, changes: CloneChanges) {
    if (!isCloneId(voiceId)) return yield* notFound(voiceId)
    return yield* sql.withTransaction(Effect.gen(function*() {
      const current = yield* sql<Row>`
        SELECT ${columns} FROM voice_clones WHERE id = ${voiceId} AND user_id = ${userId} AND deleted_at IS NULL FOR UPDATE`
      if (current[0] === undefined) return yield* notFound(voiceId)
      const before = toClone(current[0])
      const next = { ...before, ...changes }
      const rows = yield* sql<Row>`
        UPDATE voice_clones SET name = ${next.name}, language = ${next.language}, description = ${next.description},
          labels = ${JSON.stringify(next.labels)}::jsonb, ref_text = ${next.refText},
          sample_blob_key = ${next.sampleBlobKey}, profile = ${JSON.stringify(next.profile)}::jsonb,
          preview_text = ${next.previewText}
        WHERE id = ${voiceId}
        RETURNING ${columns}`.pipe(
        Effect.catchIf((e) => isUniqueViolation(e), () => Effect.fail(nameTaken(next.name)))
      )
      return { before, after: toClone(rows[0]!) }
    }))
  })

  const remove = Effect.fn("VoiceClones.remove")(function*(userId: string, voiceId: string) {
    if (!isCloneId(voiceId)) return yield* notFound(voiceId)
    const rows = yield* sql<Row>`
      UPDATE voice_clones SET deleted_at = now()
      WHERE id = ${voiceId} AND user_id = ${userId} AND deleted_at IS NULL
      RETURNING ${columns}`
    if (rows[0] === undefined) return yield* notFound(voiceId)
    return toClone(rows[0])
  })

  return VoiceClones.of({ create, list, get, nameTaken: isTaken, update, remove })
})

export const VoiceClonesLive: Layer.Layer<VoiceClones, never, SqlClient> = Layer.effect(VoiceClones, makeVoiceClones)
