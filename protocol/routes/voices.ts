/**
 * Voice clone routes: SPEC endpoint 2 (POST /voices/add) and, beyond the spec because the
 * ElevenLabs SDKs call it, DELETE /voices/{voice_id}. Listing, getting and previewing clones
 * share the preset routes in tts.ts.
 *
 * POST /voices/add takes what ElevenLabs' `voices.ivc.create` sends: `files` (repeated; the
 * first is used), `name`, `description`, `labels` (a JSON object as a string),
 * `remove_background_noise` (accepted, not applied), plus SPEC 2.3's `audio` (legacy alias,
 * used only without `files`), `language`, `previewText`, `refText`. Without `language` (the SDK
 * sends none) the clone's language comes from `labels.language`, else from the sample
 * (actors/CloneLanguage.ts), else Estonian; GET /voices shows it as `labels.language`.
 * A file over 10 MB is refused with 413 while it streams in.
 *
 * DELETE answers `{status: "ok"}` (ElevenLabs' shape) for the caller's own clone; another
 * user's or an unknown id is 404; a preset id is 400 (presets are part of the service and
 * cannot be deleted, which is not the same as "not found").
 */
import { Effect, Schema } from "effect"
import { MAX_NAME_CHARS, VoiceCloning } from "../../actors/VoiceCloning.ts"
import { Synthesizer } from "../../actors/Synthesizer.ts"
import { ApiError, badRequest, notFound } from "../ApiError.ts"
import { Reply, type Route } from "../Http.ts"
import { withMultipart } from "../MultipartForm.ts"
import { ErrorBody } from "../schemas/ErrorBody.ts"

/** SPEC 8: a clone sample. */
export const MAX_SAMPLE_BYTES = 10 * 1024 * 1024

export interface VoiceRouteOptions {
  readonly apiBase: string
  readonly tmpDir: string
}

const AddVoiceRequest = Schema.Struct({
  name: Schema.String.annotate({ description: `required; at most ${MAX_NAME_CHARS} characters; unique among your active clones` }),
  files: Schema.optional(Schema.Array(Schema.String)).annotate({ description: "audio (type detected from the bytes); only the first file is used; 6 to 30 s of speech; at most 10 MB" }),
  audio: Schema.optional(Schema.String).annotate({ description: "legacy alias for the first of files; ignored when files is present" }),
  language: Schema.optional(Schema.String).annotate({
    description: "ISO 639-1 code or English name of the sample's language. Omitted: labels.language, else worked out from refText, the sample (English speech recognised with confidence), previewText or description, else et"
  }),
  previewText: Schema.optional(Schema.String),
  refText: Schema.optional(Schema.String).annotate({ description: "transcript of the sample; when omitted, English samples are transcribed by the service" }),
  description: Schema.optional(Schema.String),
  labels: Schema.optional(Schema.String).annotate({ description: "JSON object of string values" }),
  remove_background_noise: Schema.optional(Schema.String).annotate({ description: "accepted and ignored" })
}).annotate({ identifier: "AddVoiceRequest" })

const EditVoiceRequest = Schema.Struct({
  name: Schema.String.annotate({ description: `required (the SDK always sends it); at most ${MAX_NAME_CHARS} characters` }),
  files: Schema.optional(Schema.Array(Schema.String)).annotate({ description: "a new sample replacing the current one (same rules as POST /voices/add); omit to keep it" }),
  refText: Schema.optional(Schema.String).annotate({ description: "transcript of the new sample" }),
  language: Schema.optional(Schema.String).annotate({ description: "a new language (ISO 639-1 code or English name), as labels.language also does; omit to keep" }),
  description: Schema.optional(Schema.String).annotate({ description: "omit to keep; empty clears" }),
  labels: Schema.optional(Schema.String).annotate({ description: "JSON object of string values; omit to keep" }),
  remove_background_noise: Schema.optional(Schema.String).annotate({ description: "accepted and ignored" })
}).annotate({ identifier: "EditVoiceRequest" })

const AddVoiceResponse = Schema.Struct({ voice_id: Schema.String, requires_verification: Schema.Boolean }).annotate({ identifier: "AddVoiceResponse" })
const DeleteVoiceResponse = Schema.Struct({ status: Schema.String }).annotate({ identifier: "DeleteVoiceResponse" })

/** `labels` as the SDK sends it: a JSON object; values become strings. */
export const parseLabels = (raw: string | undefined): Effect.Effect<Record<string, string>, ApiError> => {
  if (raw === undefined || raw.trim() === "") return Effect.succeed({})
  let parsed: unknown
  try {
    parsed = JSON.parse(raw)
  } catch {
    return Effect.fail(badRequest("labels must be a JSON object, e.g. {\"accent\": \"british\"}"))
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
    return Effect.fail(badRequest("labels must be a JSON object, e.g. {\"accent\": \"british\"}"))
  }
  return Effect.succeed(Object.fromEntries(Object.entries(parsed).map(([k, v]) => [k, typeof v === "string" ? v : JSON.stringify(v)])))
}

export const voiceRoutes = (options: VoiceRouteOptions): ReadonlyArray<Route<VoiceCloning | Synthesizer>> => [
  {
    method: "POST",
    path: `${options.apiBase}/voices/add`,
    auth: "key",
    operationId: "addVoice",
    summary: "Create a voice clone from one sample (6 to 30 s of speech, at most 10 MB)",
    tags: ["voices"],
    requestBody: { contentType: "multipart/form-data", schema: AddVoiceRequest },
    responses: {
      200: { description: "the new clone's id", schema: AddVoiceResponse },
      400: { description: "missing or too long name, bad labels, damaged media, too little or too much speech", schema: ErrorBody },
      409: { description: "you already have an active clone of that name", schema: ErrorBody },
      413: { description: "sample over 10 MB", schema: ErrorBody },
      415: { description: "the file is not audio or video", schema: ErrorBody },
      502: { description: "analysis failed", schema: ErrorBody }
    },
    handler: (ctx) =>
      withMultipart(ctx, { tmpDir: options.tmpDir, maxFileBytes: MAX_SAMPLE_BYTES, fileFields: new Set(["files", "audio"]), maxFiles: 2 }, (form) =>
        Effect.gen(function*() {
          const f = form.fields
          const name = (f.name ?? "").trim()
          if (name === "") return yield* badRequest("name is required")
          if (name.length > MAX_NAME_CHARS) return yield* badRequest(`name is longer than ${MAX_NAME_CHARS} characters`)
          const labels = yield* parseLabels(f.labels)
          const file = form.files.find((x) => x.field === "files") ?? form.files.find((x) => x.field === "audio")
          if (file === undefined) return yield* badRequest("send the voice sample as the multipart file field files (or audio)")
          const cloning = yield* VoiceCloning
          const clone = yield* cloning.createClone({
            userId: ctx.principal!.userId,
            name,
            language: f.language,
            previewText: f.previewText,
            refText: f.refText,
            description: f.description,
            labels,
            file: file.path
          })
          return Reply.json(200, { voice_id: clone.voiceId, requires_verification: false })
        }))
  },
  {
    method: "DELETE",
    path: `${options.apiBase}/voices/{voice_id}`,
    auth: "key",
    operationId: "deleteVoice",
    summary: "Delete one of your voice clones with its sample (presets cannot be deleted)",
    tags: ["voices"],
    responses: {
      200: { description: "deleted", schema: DeleteVoiceResponse },
      400: { description: "a preset voice", schema: ErrorBody },
      404: { description: "not one of your clones", schema: ErrorBody }
    },
    handler: (ctx) =>
      Effect.gen(function*() {
        const voiceId = yield* cloneIdOf(ctx.params.voice_id!, "deleted")
        const cloning = yield* VoiceCloning
        yield* cloning.deleteClone(ctx.principal!.userId, voiceId)
        return Reply.json(200, { status: "ok" })
      })
  },
  {
    method: "POST",
    path: `${options.apiBase}/voices/{voice_id}/edit`,
    auth: "key",
    operationId: "editVoice",
    summary: "Rename one of your clones, change its description or labels, or give it a new sample (beyond the SPEC, for the SDKs' voices.update)",
    tags: ["voices"],
    requestBody: { contentType: "multipart/form-data", schema: EditVoiceRequest },
    responses: {
      200: { description: "changed", schema: DeleteVoiceResponse },
      400: { description: "a preset voice, missing or too long name, bad labels, a sample with too little or too much speech", schema: ErrorBody },
      404: { description: "not one of your clones", schema: ErrorBody },
      409: { description: "you already have another clone of that name", schema: ErrorBody },
      413: { description: "sample over 10 MB", schema: ErrorBody },
      415: { description: "the file is not audio or video", schema: ErrorBody }
    },
    handler: (ctx) =>
      withMultipart(ctx, { tmpDir: options.tmpDir, maxFileBytes: MAX_SAMPLE_BYTES, fileFields: new Set(["files"]), maxFiles: 1 }, (form) =>
        Effect.gen(function*() {
          const voiceId = yield* cloneIdOf(ctx.params.voice_id!, "edited")
          const f = form.fields
          const cloning = yield* VoiceCloning
          yield* cloning.editClone({
            userId: ctx.principal!.userId,
            voiceId,
            name: f.name ?? "",
            description: f.description,
            labels: f.labels === undefined ? undefined : yield* parseLabels(f.labels),
            refText: f.refText,
            language: f.language,
            file: form.files[0]?.path
          })
          return Reply.json(200, { status: "ok" })
        }))
  }
]

/** The id of a clone to change: presets are 400, ids that cannot be clones the usual 404. */
const cloneIdOf = (voiceId: string, what: string) =>
  Effect.flatMap(Synthesizer, (synthesizer) =>
    synthesizer.findVoice(voiceId) !== undefined
      ? Effect.fail(badRequest(`"${voiceId}" is a preset voice; only your clones can be ${what}`))
      : voiceId.startsWith("vc_")
      ? Effect.succeed(voiceId)
      : Effect.fail(notFound(`voice "${voiceId}" not found`, "voice_not_found")))
