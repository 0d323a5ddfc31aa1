/**
 * The MCP tools (SPEC 5: one scope family each), calling the same actors as the HTTP routes:
 * synthesis (`tts`), voices (`voices`), transcription (`asr`), summaries (`summary`),
 * translation (`translate`) and noise removal (`denoise`). A tool whose scope the token lacks answers an MCP tool error that
 * names the scope; domain errors answer tool errors with the API's code and message. Credits are
 * charged exactly as on the HTTP routes (the actors do it).
 */
import { Effect } from "effect"
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js"
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import { mkdirSync, rmSync, writeFileSync } from "node:fs"
import { randomBytes } from "node:crypto"
import * as path from "node:path"
import { z } from "zod"
import { prepareChunk, runChunk } from "../../actors/ChunkTranslation.ts"
import { prepareSpeech, synthesizeWhole } from "../../actors/SpeechRequest.ts"
import { summarizeJob, summaryWire } from "../../actors/Summarization.ts"
import { type RecognitionProgress, Transcriber } from "../../actors/Transcription.ts"
import { VoiceCloning } from "../../actors/VoiceCloning.ts"
import { Synthesizer } from "../../actors/Synthesizer.ts"
import { RecognitionJobs } from "../../storage/RecognitionJobs.ts"
import type { Principal } from "../../storage/ApiKeys.ts"
import { ApiError, toApiError } from "../ApiError.ts"
import { fetchToFile } from "../../storage/RemoteMedia.ts"
import { encodeWav } from "../../engines/audio/Wav.ts"
import { Denoiser } from "../../engines/denoise/Denoiser.ts"
import { MediaDecoder } from "../../engines/media/MediaDecoderService.ts"
import { visibleJob } from "../routes/jobs.ts"

/** Runs an effect with the service's context (the route captures it per request). */
export type Run = <A>(effect: Effect.Effect<A, unknown, any>) => Promise<A>

export interface ToolOptions {
  readonly tmpDir: string
  /** URL input goes through the one address guard; private addresses only when the operator allows. */
  readonly allowPrivateUrls: boolean
}

/**
 * What the route puts in `authInfo.extra` of each request: the credential and the request's own
 * context. Tools read them from the request they serve, never from the session (two requests of
 * one session may carry different tokens).
 */
export interface RequestAuth {
  readonly principal: Principal
  readonly run: Run
}

export interface ToolContext extends ToolOptions, RequestAuth {}

/** Longest audio the denoise tool takes: 10 minutes (its answer is inline base64). */
const MAX_DENOISE_MS = 10 * 60_000

/** Most bytes of base64 audio a tool accepts (decoded): 20 MB. */
const MAX_AUDIO_BYTES = 20 * 1024 * 1024

/** The audio a tool was given, as a local file: decoded base64, or fetched from a URL. */
const audioFile = (ctx: ToolContext, args: { audio_base64?: string | undefined; audio_url?: string | undefined }) =>
  Effect.gen(function*() {
    if ((args.audio_base64 === undefined) === (args.audio_url === undefined)) {
      return yield* Effect.fail(new ApiError({ status: 400, code: "invalid_request", message: "give exactly one of audio_base64 and audio_url" }))
    }
    if (args.audio_url !== undefined) {
      return (yield* fetchToFile(args.audio_url, { tmpDir: ctx.tmpDir, maxBytes: MAX_AUDIO_BYTES, timeoutMs: 60_000, allowPrivate: ctx.allowPrivateUrls })).file
    }
    const bytes = Buffer.from(args.audio_base64!, "base64")
    if (bytes.length === 0 || bytes.length > MAX_AUDIO_BYTES) {
      return yield* Effect.fail(new ApiError({ status: 400, code: "invalid_request", message: `audio_base64 must decode to 1 to ${MAX_AUDIO_BYTES} bytes` }))
    }
    mkdirSync(ctx.tmpDir, { recursive: true })
    const file = path.join(ctx.tmpDir, `mcp-${randomBytes(8).toString("hex")}`)
    writeFileSync(file, bytes)
    return file
  })

const audioArgs = {
  audio_base64: z.string().optional().describe("The file's bytes in base64 (wav, mp3, ogg, flac, m4a, webm…), at most 20 MB; or give audio_url."),
  audio_url: z.string().optional().describe("An https URL of the file instead of audio_base64 (public addresses only).")
}

const text = (t: string): CallToolResult => ({ content: [{ type: "text", text: t }] })
const failure = (t: string): CallToolResult => ({ content: [{ type: "text", text: t }], isError: true })

/** A tool body guarded by its scope, with domain errors turned into tool errors. */
const guarded = (options: ToolOptions, extra: { authInfo?: { extra?: Record<string, unknown> } }, scope: string, body: (ctx: ToolContext) => Promise<CallToolResult>) => async (): Promise<CallToolResult> => {
  const auth = extra.authInfo?.extra as RequestAuth | undefined
  if (auth?.principal === undefined) return failure("this request carries no credential")
  const ctx: ToolContext = { ...options, ...auth }
  if (!ctx.principal.scopes.includes(scope)) return failure(`this tool needs the "${scope}" scope, which this connection was not granted; authorize again asking for it`)
  try {
    return await body(ctx)
  } catch (e) {
    const { error, internal } = toApiError(e)
    if (internal) await ctx.run(Effect.logError("MCP tool failed", e)).catch(() => {})
    return failure(`${error.code}: ${error.message}`)
  }
}

export const registerTools = (server: McpServer, options: ToolOptions) => {

  server.registerTool("synthesize_speech", {
    title: "Synthesize speech",
    description: "Turn text into speech with one of the service's voices or your clones. Returns WAV audio and its duration. Costs one credit per character.",
    inputSchema: {
      text: z.string().min(1).max(8000).describe("The text to speak (at most 8000 characters)."),
      voice_id: z.string().default("emma-en").describe("A voice id from list_voices, e.g. emma-en (English) or mari (Estonian)."),
      speed: z.number().min(0.7).max(1.2).default(1).describe("Speaking rate, 0.7 to 1.2.")
    }
  }, (args, extra) => guarded(options, extra, "tts", async (ctx) => {
    const userId = ctx.principal.userId
    const result = await ctx.run(Effect.gen(function*() {
      const speech = yield* prepareSpeech({ voiceId: args.voice_id, text: args.text, speed: args.speed, outputFormat: "wav", userId, chunking: true })
      return yield* synthesizeWhole(speech, 1)
    }))
    const audio = Buffer.concat(result.parts).toString("base64")
    result.release()
    return {
      content: [
        { type: "audio", data: audio, mimeType: "audio/wav" },
        { type: "text", text: `${(result.durationMs / 1000).toFixed(2)} s of speech (WAV, 24 kHz)` }
      ]
    }
  })())

  server.registerTool("list_voices", {
    title: "List voices",
    description: "The voices you can speak with: the service's presets (id, name, language) and your clones.",
    inputSchema: { language: z.string().optional().describe("Only voices of this ISO 639-1 language, e.g. en.") }
  }, (args, extra) => guarded(options, extra, "voices", async (ctx) => {
    const userId = ctx.principal.userId
    const voices = await ctx.run(Effect.gen(function*() {
      const synthesizer = yield* Synthesizer
      const clones = yield* (yield* VoiceCloning).listClones(userId)
      return { presets: synthesizer.voices, clones }
    }))
    const presets = voices.presets.filter((v) => args.language === undefined || v.labels.language === args.language)
      .map((v) => ({ voice_id: v.voiceId, name: v.name, language: v.labels.language }))
    const clones = voices.clones.filter((c) => args.language === undefined || c.language === args.language)
      .map((c) => ({ voice_id: c.voiceId, name: c.name, language: c.language, category: "cloned" }))
    return text(JSON.stringify({ voices: [...clones, ...presets] }))
  })())

  server.registerTool("delete_voice", {
    title: "Delete a voice clone",
    description: "Delete one of your voice clones (preset voices cannot be deleted).",
    inputSchema: { voice_id: z.string().describe("The clone's id (vc_…) from list_voices.") },
    annotations: { destructiveHint: true }
  }, (args, extra) => guarded(options, extra, "voices", async (ctx) => {
    const userId = ctx.principal.userId
    await ctx.run(Effect.gen(function*() {
      yield* (yield* VoiceCloning).deleteClone(userId, args.voice_id)
    }))
    return text(`deleted ${args.voice_id}`)
  })())

  server.registerTool("transcribe_audio", {
    title: "Transcribe audio",
    description: "Speech to text (English) of an audio or video file given as base64. Returns the transcript with word timings; with diarize, who spoke when. Costs one credit per started second.",
    inputSchema: { ...audioArgs, diarize: z.boolean().default(false).describe("Tell speakers apart.") }
  }, (args, extra) => guarded(options, extra, "asr", async (ctx) => {
    const userId = ctx.principal.userId
    // Long recordings take a while: a client that sent a progressToken gets notifications/progress
    // (0-100 over the stages decoding 0-10, speech detection 10-20, recognition 20-95, diarization 95-100).
    const token = extra._meta?.progressToken
    const spans = { decoding: [0, 10], detecting_speech: [10, 20], recognising: [20, 95], diarizing: [95, 100] } as const
    let last = -1
    const onProgress = (p: RecognitionProgress) =>
      Effect.sync(() => {
        const [from, to] = spans[p.stage]
        const progress = Math.floor(from + (to - from) * Math.min(1, Math.max(0, p.fraction)))
        if (token === undefined || progress <= last) return
        last = progress
        void extra.sendNotification({ method: "notifications/progress", params: { progressToken: token, progress, total: 100, message: p.stage } }).catch(() => {})
      })
    const result = await ctx.run(Effect.gen(function*() {
      const file = yield* audioFile(ctx, args)
      return yield* (yield* Transcriber).transcribeFile(file, { diarize: args.diarize, userId, onProgress }).pipe(Effect.ensuring(Effect.sync(() => rmSync(file, { force: true }))))
    }))
    const words = result.words.map((w) => ({ text: w.text, start: w.startMs / 1000, end: w.endMs / 1000, ...(w.speaker !== undefined ? { speaker: w.speaker } : {}) }))
    return text(JSON.stringify({ text: result.words.map((w) => w.text).join(" "), duration_s: result.durationMs / 1000, words }))
  })())

  server.registerTool("create_voice_clone", {
    title: "Clone a voice",
    description: "Make a new voice from 6 to 30 seconds of one person's clear speech (base64 or a URL). Returns the new voice id for synthesize_speech. Free.",
    inputSchema: {
      ...audioArgs,
      name: z.string().min(1).max(100).describe("A name for the new voice."),
      language: z.string().optional().describe("ISO 639-1 language the voice speaks (e.g. en); found from the sample when omitted.")
    }
  }, (args, extra) => guarded(options, extra, "voices", async (ctx) => {
    const userId = ctx.principal.userId
    const clone = await ctx.run(Effect.gen(function*() {
      const file = yield* audioFile(ctx, args)
      return yield* (yield* VoiceCloning).createClone({ userId, name: args.name, language: args.language, file }).pipe(Effect.ensuring(Effect.sync(() => rmSync(file, { force: true }))))
    }))
    return text(JSON.stringify({ voice_id: clone.voiceId, name: clone.name, language: clone.language }))
  })())

  server.registerTool("denoise_audio", {
    title: "Remove noise",
    description: "Clean background noise out of speech with RNNoise (a small neural denoiser). Audio as base64 or a URL; returns 16 kHz mono WAV of the same length. Free.",
    inputSchema: { ...audioArgs }
  }, (args, extra) => guarded(options, extra, "denoise", async (ctx) => {
    const userId = ctx.principal.userId
    const cleaned = await ctx.run(Effect.gen(function*() {
      const file = yield* audioFile(ctx, args)
      const decoded = yield* (yield* MediaDecoder).decodeMedia(file, { maxDurationMs: MAX_DENOISE_MS }).pipe(Effect.ensuring(Effect.sync(() => rmSync(file, { force: true }))))
      const pcm = yield* (yield* Denoiser).clean(decoded.pcm, decoded.sampleRate)
      return { wav: encodeWav(pcm, decoded.sampleRate), seconds: pcm.length / decoded.sampleRate }
    }))
    return {
      content: [
        { type: "audio", data: Buffer.from(cleaned.wav).toString("base64"), mimeType: "audio/wav" },
        { type: "text", text: `${cleaned.seconds.toFixed(2)} s of denoised audio (WAV, 16 kHz mono)` }
      ]
    }
  })())

  server.registerTool("summarize_job", {
    title: "Summarize a transcription job",
    description: "Write a summary of one of your succeeded recognition jobs with a template (meeting_notes, brief, bullet_points, speaker_recap). Returns the summary as Markdown and JSON.",
    inputSchema: {
      job_id: z.string().describe("A recognition job id (job_…) whose state is succeeded."),
      template_id: z.string().optional().describe("meeting_notes (default), brief, bullet_points or speaker_recap.")
    }
  }, (args, extra) => guarded(options, extra, "summary", async (ctx) => {
    const userId = ctx.principal.userId
    const summary = await ctx.run(Effect.gen(function*() {
      // The same visibility as the HTTP route: the owner, or anyone for an anonymous job.
      const job = yield* visibleJob(yield* RecognitionJobs, args.job_id, ctx.principal)
      return summaryWire(yield* summarizeJob(job, args.template_id))
    }))
    return text(`${summary.text}\n\n${JSON.stringify({ summary_id: summary.summary_id, sections: summary.sections })}`)
  })())

  server.registerTool("translate_text", {
    title: "Translate text",
    description: "Translate text between the languages this service has (see GET /api/v1/translate/languages), e.g. en to es. Costs one credit per started 100 characters.",
    inputSchema: {
      text: z.string().min(1).max(5000).describe("The text to translate (at most 5000 characters)."),
      source: z.string().describe("Source language, ISO 639-1 (en) or 639-3 (eng)."),
      target: z.string().describe("Target language, ISO 639-1 (es) or 639-3 (spa).")
    }
  }, (args, extra) => guarded(options, extra, "translate", async (ctx) => {
    const userId = ctx.principal.userId
    let out = ""
    await ctx.run(Effect.gen(function*() {
      const chunk = yield* prepareChunk({ newSource: args.text, source: args.source, target: args.target, previous: "", userId })
      yield* runChunk(chunk, (piece) => Effect.sync(() => void (out += piece)))
    }))
    return text(out)
  })())
}
