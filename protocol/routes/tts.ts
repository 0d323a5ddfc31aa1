/**
 * Text-to-speech and voice routes (SPEC endpoints 1, 3, 4, 5, plus ElevenLabs' with-timestamps
 * variants that Pipecat and the SDKs call). Handlers decode, call the speech actors, encode.
 */
import { Effect } from "effect"
import { characterAlignment } from "../../actors/Alignment.ts"
import {
  concatBytes,
  encodeBody,
  prepareSpeech,
  runSegments,
  streamingHeader,
  synthesizeWhole
} from "../../actors/SpeechRequest.ts"
import { requestedLanguage, Synthesizer } from "../../actors/Synthesizer.ts"
import type { PresetVoice } from "../../engines/tts/Voices.ts"
import type { Accounts } from "../../storage/Accounts.ts"
import { VoiceCloning } from "../../actors/VoiceCloning.ts"
import type { VoiceCloneRow } from "../../storage/VoiceClones.ts"
import { ApiError, notFound, unauthorized } from "../ApiError.ts"
import { decodeJsonBody, decodeQuery } from "../decode.ts"
import { Reply, type RequestContext, type Route } from "../Http.ts"
import { ErrorBody } from "../schemas/ErrorBody.ts"
import { AudioWithTimestamps, TextToSpeechRequest, TtsQuery, Voice, VoiceSettings, VoicesList, VoicesPage } from "../schemas/Tts.ts"
import { searchVoices, VoicesSearchQuery } from "../VoiceSearch.ts"

export interface TtsRouteOptions {
  readonly apiBase: string
  readonly siteUrl: () => string
  readonly maxJsonBodyBytes: number
  /** Syntheses in flight per request: the next sentences are made while one is sent. */
  readonly ahead: number
}

type Services = Synthesizer | Accounts

const audioErrors = {
  400: { description: "malformed request or text_too_long", schema: ErrorBody },
  402: { description: "out of credits", schema: ErrorBody },
  404: { description: "unknown voice", schema: ErrorBody },
  415: { description: "unsupported output_format (MP3, Opus, ...)", schema: ErrorBody },
  502: { description: "synthesis failed", schema: ErrorBody }
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

export const ttsRoutes = (options: TtsRouteOptions): ReadonlyArray<Route<Services>> => {
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

  const prepare = (ctx: RequestContext, chunkingAllowed: boolean) =>
    Effect.gen(function*() {
      const query = yield* decodeQuery(TtsQuery, ctx)
      const body = yield* decodeJsonBody(TextToSpeechRequest, ctx, options.maxJsonBodyBytes)
      const language = yield* requestedLanguage(
        nonEmpty(query.language) ?? nonEmpty(query.language_code) ?? nonEmpty(body.language_code) ?? nonEmpty(ctx.request.headers["x-speak-language"])
      )
      return yield* prepareSpeech({
        language,
        voiceId: ctx.params.voice_id!,
        text: body.text,
        speed: body.voice_settings?.speed ?? 1,
        outputFormat: query.output_format,
        userId: ctx.principal?.userId ?? null,
        chunking: chunkingAllowed ? body.sentence_chunking !== false : true
      })
    })

  const audioHeaders = (contentType: string, sampleRate: number) => ({
    "content-type": contentType,
    "x-audio-sample-rate": String(sampleRate)
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
    },
    {
      method: "POST",
      path: `${apiBase}/text-to-speech/{voice_id}`,
      auth: "key",
      operationId: "textToSpeech",
      summary: "Synthesize text; the whole audio in one response",
      tags: ["text-to-speech"],
      query: TtsQuery,
      requestBody: { contentType: "application/json", schema: TextToSpeechRequest },
      responses: {
        200: { description: "audio/wav, audio/pcm (s16le) or audio/basic (µ-law)", contentType: "audio/wav" },
        ...audioErrors
      },
      handler: (ctx) =>
        Effect.gen(function*() {
          const speech = yield* prepare(ctx, false)
          const result = yield* synthesizeWhole(speech, options.ahead)
          return Reply.bytes(200, result.bytes, {
            ...audioHeaders(speech.format.contentType, speech.format.sampleRate),
            "x-audio-duration-ms": String(Math.round(result.durationMs))
          })
        })
    },
    {
      method: "POST",
      path: `${apiBase}/text-to-speech/{voice_id}/stream`,
      auth: "key",
      operationId: "textToSpeechStream",
      summary: "Synthesize text sentence by sentence, streamed as it is made (WAV with 0xFFFFFFFF lengths, or raw PCM)",
      tags: ["text-to-speech"],
      query: TtsQuery,
      requestBody: { contentType: "application/json", schema: TextToSpeechRequest },
      responses: {
        200: { description: "streamed audio; x-streaming-mode sentence or single, x-sentence-count", contentType: "audio/wav" },
        ...audioErrors
      },
      handler: (ctx) =>
        Effect.gen(function*() {
          const speech = yield* prepare(ctx, true)
          const mode = speech.chunked ? "sentence" : "single"
          const headers: Record<string, string> = {
            ...audioHeaders(speech.format.contentType, speech.format.sampleRate),
            "x-streaming-mode": mode
          }
          if (mode === "sentence") headers["x-sentence-count"] = String(speech.segments.length)
          return Reply.stream(200, headers, (writer) =>
            runSegments(speech, { ahead: 2, priority: "realtime" }, ({ index, output }) => {
              const audio = encodeBody(speech.format, output.pcm)
              // The header goes out with the first segment's audio, so a failure before any
              // audio still answers with a normal error status (SPEC 4.1 rule 3).
              return writer.write(index === 0 ? concatBytes(streamingHeader(speech.format), audio) : audio)
            }))
        })
    },
    {
      method: "POST",
      path: `${apiBase}/text-to-speech/{voice_id}/with-timestamps`,
      auth: "key",
      operationId: "textToSpeechWithTimestamps",
      summary: "Synthesize text; audio as base64 with per-character timings (ElevenLabs alignment)",
      tags: ["text-to-speech"],
      query: TtsQuery,
      requestBody: { contentType: "application/json", schema: TextToSpeechRequest },
      responses: { 200: { description: "audio and alignment", schema: AudioWithTimestamps }, ...audioErrors },
      handler: (ctx) =>
        Effect.gen(function*() {
          const speech = yield* prepare(ctx, false)
          const result = yield* synthesizeWhole(speech, options.ahead)
          const words = result.audios.flatMap((a) =>
            a.output.words.map((w) => shiftWord(w, a.segment.charStart, a.offsetMs))
          )
          const alignment = characterAlignment(speech.text, words, result.durationMs)
          return Reply.json(200, { audio_base64: Buffer.from(result.bytes).toString("base64"), alignment, normalized_alignment: alignment }, {
            "x-audio-sample-rate": String(speech.format.sampleRate),
            "x-audio-duration-ms": String(Math.round(result.durationMs))
          })
        })
    },
    {
      method: "POST",
      path: `${apiBase}/text-to-speech/{voice_id}/stream/with-timestamps`,
      auth: "key",
      operationId: "textToSpeechStreamWithTimestamps",
      summary: "Streamed synthesis as newline-delimited JSON chunks of base64 audio with character alignment",
      tags: ["text-to-speech"],
      query: TtsQuery,
      requestBody: { contentType: "application/json", schema: TextToSpeechRequest },
      responses: { 200: { description: "application/x-ndjson of AudioWithTimestamps", schema: AudioWithTimestamps }, ...audioErrors },
      handler: (ctx) =>
        Effect.gen(function*() {
          const speech = yield* prepare(ctx, true)
          const encoder = new TextEncoder()
          return Reply.stream(200, {
            "content-type": "application/x-ndjson",
            "x-audio-sample-rate": String(speech.format.sampleRate),
            "x-streaming-mode": "sentence",
            "x-sentence-count": String(speech.segments.length)
          }, (writer) =>
            runSegments(speech, { ahead: 2, priority: "realtime" }, ({ index, output, segment, offsetMs }) => {
              const audio = encodeBody(speech.format, output.pcm)
              const bytes = index === 0 ? concatBytes(streamingHeader(speech.format), audio) : audio
              // Alignment covers the text between segments too, so concatenated chunks spell the input.
              const from = index === 0 ? 0 : segment.charStart
              const to = index === speech.segments.length - 1 ? speech.text.length : speech.segments[index + 1]!.charStart
              const alignment = characterAlignment(
                speech.text.slice(from, to),
                output.words.map((w) => shiftWord(w, segment.charStart - from, 0)),
                (output.pcm.length * 1000) / output.sampleRate,
                offsetMs
              )
              const line = JSON.stringify({ audio_base64: Buffer.from(bytes).toString("base64"), alignment, normalized_alignment: alignment }) + "\n"
              return writer.write(encoder.encode(line))
            }))
        })
    }
  ]
}

/**
 * The language of a TTS request, first given wins: `?language=`, `?language_code=`, the body's
 * `language_code`, the `X-Speak-Language` header. The query beats the header as on the
 * WebSocket; the body, the request's own words, beats the header (often set per connection by a
 * proxy or client default). Blank values count as absent; a value that loses is never parsed.
 */
const nonEmpty = (value: string | null | undefined): string | undefined =>
  value === undefined || value === null || value.trim() === "" ? undefined : value

/** Moves segment-relative word timings into the coordinates of a larger text and timeline. */
const shiftWord = <W extends { charStart: number; charEnd: number; startMs: number; endMs: number }>(w: W, chars: number, ms: number): W => ({
  ...w,
  charStart: w.charStart + chars,
  charEnd: w.charEnd + chars,
  startMs: w.startMs + ms,
  endMs: w.endMs + ms
})
