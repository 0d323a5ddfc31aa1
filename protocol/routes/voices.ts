/**
 * Voice routes. The catalogue (SPEC endpoints 1 and 3, and beyond the spec because the
 * ElevenLabs SDKs call them: GET /voices/{voice_id}, the v2 search, the settings): the presets
 * plus the caller's own clones, listed, got and previewed alike. Clone management: SPEC endpoint 2
 * (POST /voices/add) and, beyond the spec, DELETE /voices/{voice_id} and POST …/edit.
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
import { Synthesizer } from "../../actors/Synthesizer.ts"
import { MAX_NAME_CHARS, VoiceCloning } from "../../actors/VoiceCloning.ts"
import type { PresetVoice } from "../../engines/tts/Voices.ts"
import type { VoiceCloneRow } from "../../storage/VoiceClones.ts"
import { ApiError, badRequest, notFound, unauthorized } from "../ApiError.ts"
import { decodeQuery, parseJson } from "../decode.ts"
import { Reply, type RequestContext, type Route } from "../Http.ts"
import { withMultipart } from "../MultipartForm.ts"
import { ErrorBody } from "../schemas/ErrorBody.ts"
import { Voice, VoiceSettings, VoicesList, VoicesPage } from "../schemas/Tts.ts"
import { searchVoices, VoicesSearchQuery } from "../VoiceSearch.ts"

export interface VoiceCatalogueOptions {
  readonly apiBase: string
  /** The public origin for `preview_url`; known only after listening when PORT=0. */
  readonly siteUrl: () => string
}

const voiceJson = (v: PresetVoice, siteUrl: string, apiBase: string): typeof Voice.Type => ({
  voice_id: v.voiceId,
  name: v.name,
  category: v.category,
  description: v.description,
  preview_url: `${siteUrl}${apiBase}/voices/${encodeURIComponent(v.voiceId)}/preview`,
  labels: { ...v.labels }
})

/**
 * A clone as SPEC 2.2 Voice; its preview needs the owner's credential. `labels.language` is the
 * clone's language (given, or worked out from the sample), as presets show theirs.
 */
export const cloneJson = (c: VoiceCloneRow, siteUrl: string, apiBase: string): typeof Voice.Type => ({
  voice_id: c.voiceId,
  name: c.name,
  category: "cloned",
  description: c.description,
  preview_url: `${siteUrl}${apiBase}/voices/${encodeURIComponent(c.voiceId)}/preview`,
  labels: { ...c.labels, language: c.language }
})

/** The caller's clones when clone storage is configured (VoiceCloning provided), else none. */
const callerClones = (userId: string | undefined) =>
  Effect.flatMap(Effect.serviceOption(VoiceCloning), (cloning) =>
    cloning._tag === "None" || userId === undefined ? Effect.succeed([] as ReadonlyArray<VoiceCloneRow>) : cloning.value.listClones(userId))

/**
 * What GET /voices/{id}/settings reports for every voice: ElevenLabs' defaults. Requests may
 * send any of them; only `speed` changes the audio here (SPEC 2.4).
 */
const DEFAULT_VOICE_SETTINGS: typeof VoiceSettings.Type = { stability: 0.5, similarity_boost: 0.75, style: 0, use_speaker_boost: true, speed: 1 }

/** GET /voices, /v2/voices, /voices/{voice_id}, the settings and the preview (mounted before the TTS routes). */
export const voiceCatalogueRoutes = (options: VoiceCatalogueOptions): ReadonlyArray<Route<Synthesizer>> => {
  const { apiBase } = options

  /** A preset, or the caller's own clone; anyone else's clone is the same 404 as an unknown id. */
  const voiceById = (ctx: RequestContext) =>
    Effect.flatMap(Synthesizer, (s) => {
      const voiceId = ctx.params.voice_id!
      const unknown = notFound(`voice "${voiceId}" not found`, "voice_not_found")
      const preset = s.findVoice(voiceId)
      if (preset !== undefined) return Effect.succeed(voiceJson(preset, options.siteUrl(), apiBase))
      if (!voiceId.startsWith("vc_") || ctx.principal === null) return Effect.fail(unknown)
      return Effect.flatMap(Effect.serviceOption(VoiceCloning), (cloning): Effect.Effect<typeof Voice.Type, unknown> =>
        cloning._tag === "None"
          ? Effect.fail(unknown)
          : Effect.map(cloning.value.getClone(ctx.principal!.userId, voiceId), (c) => cloneJson(c, options.siteUrl(), apiBase)))
    })

  return [
    {
      method: "GET",
      path: `${apiBase}/voices`,
      auth: "key",
      operationId: "listVoices",
      summary: "All preset voices plus the caller's clones",
      tags: ["voices"],
      responses: { 200: { description: "voices", schema: VoicesList } },
      handler: (ctx) =>
        Effect.gen(function*() {
          const s = yield* Synthesizer
          const clones = yield* callerClones(ctx.principal?.userId)
          const voices = [
            ...s.voices.map((v) => voiceJson(v, options.siteUrl(), apiBase)),
            ...clones.map((c) => cloneJson(c, options.siteUrl(), apiBase))
          ]
          return Reply.json(200, { voices })
        })
    },
    {
      method: "GET",
      // The v2 list sits beside v1 under the same /api prefix (…/v1 → …/v2).
      path: `${apiBase.replace(/\/v1$/, "/v2")}/voices`,
      auth: "key",
      operationId: "searchVoices",
      summary: "Voices, filtered and paged as the SDKs' voices.search() asks (protocol/VoiceSearch.ts)",
      tags: ["voices"],
      query: VoicesSearchQuery,
      responses: { 200: { description: "one page of voices", schema: VoicesPage }, 400: { description: "malformed query", schema: ErrorBody } },
      handler: (ctx) =>
        Effect.gen(function*() {
          yield* decodeQuery(VoicesSearchQuery, ctx)
          const s = yield* Synthesizer
          const clones = yield* callerClones(ctx.principal?.userId)
          const page = searchVoices([
            ...s.voices.map((v) => ({ json: voiceJson(v, options.siteUrl(), apiBase), language: v.engineVoice.language, createdAtUnix: 0 })),
            ...clones.map((c) => ({ json: cloneJson(c, options.siteUrl(), apiBase), language: c.language, createdAtUnix: Math.floor(c.createdAt.getTime() / 1000) }))
          ], ctx.request.query)
          return page instanceof ApiError ? yield* page : Reply.json(200, page)
        })
    },
    {
      method: "GET",
      path: `${apiBase}/voices/{voice_id}`,
      auth: "key",
      operationId: "getVoice",
      summary: "One voice",
      tags: ["voices"],
      responses: { 200: { description: "the voice", schema: Voice }, 404: { description: "unknown voice", schema: ErrorBody } },
      handler: (ctx) => Effect.map(voiceById(ctx), (voice) => Reply.json(200, voice))
    },
    {
      method: "GET",
      path: `${apiBase}/voices/settings/default`,
      // Public as at ElevenLabs: constant data, and elevenlabs-node calls it without a key.
      auth: "none",
      operationId: "getDefaultVoiceSettings",
      summary: "Default voice settings (beyond the SPEC, for the SDKs); only speed changes the audio here",
      tags: ["voices"],
      responses: { 200: { description: "the settings", schema: VoiceSettings } },
      handler: () => Effect.succeed(Reply.json(200, DEFAULT_VOICE_SETTINGS))
    },
    {
      method: "GET",
      path: `${apiBase}/voices/{voice_id}/settings`,
      auth: "key",
      operationId: "getVoiceSettings",
      summary: "A voice's settings: the defaults for every voice (beyond the SPEC, for the SDKs)",
      tags: ["voices"],
      responses: { 200: { description: "the settings", schema: VoiceSettings }, 404: { description: "unknown voice", schema: ErrorBody } },
      handler: (ctx) => Effect.map(voiceById(ctx), () => Reply.json(200, DEFAULT_VOICE_SETTINGS))
    },
    {
      method: "GET",
      path: `${apiBase}/voices/{voice_id}/preview`,
      auth: "optional",
      operationId: "voicePreview",
      summary: "A short WAV preview of a voice in its language (public for presets; a clone's needs its owner's key)",
      tags: ["voices"],
      responses: { 200: { description: "audio/wav", contentType: "audio/wav" }, 404: { description: "unknown voice", schema: ErrorBody } },
      handler: (ctx) =>
        Effect.gen(function*() {
          const voiceId = ctx.params.voice_id!
          const synthesizer = yield* Synthesizer
          if (voiceId.startsWith("vc_") && ctx.principal === null) {
            return yield* unauthorized("a cloned voice's preview needs the owner's API key (xi-api-key or Authorization: Bearer)")
          }
          // Rendered once and cached by the Synthesizer (a clone's: per version, dropped on edit/delete).
          const preview = yield* synthesizer.preview(voiceId, ctx.principal?.userId ?? null)
          return Reply.bytes(200, preview.wav, { "content-type": "audio/wav", "cache-control": preview.shared ? "public, max-age=86400" : "private, no-store" })
        })
    }
  ]
}

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
  const json = parseJson(raw)
  if (!json.ok) return Effect.fail(badRequest(`labels must be a JSON object, e.g. {"accent": "british"}: ${json.message}`))
  const parsed = json.value
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
