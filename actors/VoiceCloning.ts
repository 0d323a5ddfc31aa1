/**
 * Voice clones end to end (SPEC 2.3, endpoints 1–3, issue 5): one uploaded sample →
 * decode (ffmpeg, type from the bytes) → speech measured by VAD (6–30 s, not file length) →
 * transcript (the caller's `refText`; else ASR when the language has an engine, English only
 * here; else none) → `clone.analyze` on a worker (profile + synthesis plan) → the original
 * sample into the BlobStore → the `voice_clones` row. Deleting removes the row and the blob.
 *
 * The stored profile is `{ profile, plan, candidates }`; Synthesizer.resolveVoice reads `plan`.
 * The original file is kept byte for byte so a future (neural) engine can analyse it again.
 */
import { Context, Data, Effect, Layer } from "effect"
import type { RecognizeInput, RecognizeOutput } from "../engines/asr/tasks.ts"
import type { CloneAnalyzeInput, CloneAnalyzeOutput } from "../engines/clone/tasks.ts"
import { decodeMedia } from "../engines/media/MediaDecoder.ts"
import { presetsForLanguage } from "../engines/tts/Voices.ts"
import type { VadSegmentsInput, VadSegmentsOutput } from "../engines/vad/tasks.ts"
import { type PoolError, WorkerPool } from "../runtime/WorkerPool.ts"
import { BlobStore } from "../storage/BlobStore.ts"
import { type CloneChanges, newCloneId, type VoiceCloneRow, VoiceClones, VoiceClonesError } from "../storage/VoiceClones.ts"
import { previewSentence } from "./Synthesizer.ts"
import { transcriptionFromMedia, transcriptionFromPool } from "./TranscriptionError.ts"

/** SPEC 8: speech in the sample, measured by voice activity. */
export const MIN_SPEECH_MS = 6_000
export const MAX_SPEECH_MS = 30_000
export const MAX_NAME_CHARS = 60
/** Languages with an ASR engine here (PocketSphinx, US English model). */
const ASR_LANGUAGES = new Set(["en"])
const SAMPLE_RATE = 16000

export class VoiceCloneError extends Data.TaggedError("VoiceCloneError")<{
  readonly reason: "SpeechTooShort" | "SpeechTooLong" | "UnsupportedLanguage" | "InvalidRequest"
  readonly message: string
}> {}

export interface CreateCloneRequest {
  readonly userId: string
  readonly name: string
  readonly language: string
  readonly previewText?: string | undefined
  readonly refText?: string | undefined
  readonly description?: string | undefined
  readonly labels?: Readonly<Record<string, string>> | undefined
  /** Local path of the uploaded sample (removed by the caller). */
  readonly file: string
}

export interface EditCloneRequest {
  readonly userId: string
  readonly voiceId: string
  readonly name: string
  readonly description?: string | undefined
  readonly labels?: Readonly<Record<string, string>> | undefined
  readonly refText?: string | undefined
  /** A new sample (local path, removed by the caller), or none to keep the current one. */
  readonly file?: string | undefined
}

export class VoiceCloning extends Context.Service<VoiceCloning, {
  readonly createClone: (request: CreateCloneRequest) => Effect.Effect<VoiceCloneRow, unknown>
  /** NotFound (404) for unknown, deleted or someone else's clones; NameTaken (409). */
  readonly editClone: (request: EditCloneRequest) => Effect.Effect<void, unknown>
  /** NotFound (404) for unknown, deleted or someone else's clones. */
  readonly deleteClone: (userId: string, voiceId: string) => Effect.Effect<void, unknown>
  readonly listClones: (userId: string) => Effect.Effect<ReadonlyArray<VoiceCloneRow>, unknown>
  readonly getClone: (userId: string, voiceId: string) => Effect.Effect<VoiceCloneRow, unknown>
}>()("speech/actors/VoiceCloning") {}

/** What the `profile` column holds; Synthesizer.resolveVoice reads `plan`. */
const storedProfile = (analysis: CloneAnalyzeOutput) =>
  ({ profile: analysis.profile, plan: analysis.plan, candidates: analysis.candidates.slice(0, 5), dropped: analysis.dropped })

const seconds = (ms: number) => (ms / 1000).toFixed(1)
const mapPool = (e: PoolError) => transcriptionFromPool(e)

export const VoiceCloningLive = Layer.effect(
  VoiceCloning,
  Effect.gen(function*() {
    const pool = yield* WorkerPool
    const blobs = yield* BlobStore
    const clones = yield* VoiceClones

    /**
     * One sample → its transcript and the worker's analysis (profile + plan): decode, VAD
     * (6–30 s of speech), ASR when no transcript was given and the language has an engine.
     */
    const analyseSample = Effect.fn("VoiceCloning.analyseSample")(function*(file: string, language: string, givenRefText: string | undefined) {
      const audio = yield* Effect.tryPromise({
        try: (signal) => decodeMedia(file, { signal, maxDurationMs: 10 * 60_000 }),
        catch: transcriptionFromMedia
      })
      const vadCopy = audio.pcm.slice()
      const vad = yield* pool.run<VadSegmentsOutput>("vad.segments", { pcm: vadCopy } satisfies VadSegmentsInput, {
        priority: "batch",
        transfer: [vadCopy.buffer as ArrayBuffer]
      }).pipe(Effect.mapError(mapPool))
      const speechMs = vad.segments.reduce((sum, s) => sum + (s.endMs - s.startMs), 0)
      if (speechMs < MIN_SPEECH_MS) {
        return yield* new VoiceCloneError({
          reason: "SpeechTooShort",
          message: `the sample holds ${seconds(speechMs)} s of speech (of ${seconds(audio.durationMs)} s audio); a clone needs 6 to 30 s of speech`
        })
      }
      if (speechMs > MAX_SPEECH_MS) {
        return yield* new VoiceCloneError({
          reason: "SpeechTooLong",
          message: `the sample holds ${seconds(speechMs)} s of speech; a clone needs 6 to 30 s of speech: trim it`
        })
      }

      let refText = givenRefText?.trim() || undefined
      if (refText === undefined && ASR_LANGUAGES.has(language)) {
        const parts = yield* Effect.forEach(vad.segments, (segment) => {
          const from = Math.floor((segment.startMs * SAMPLE_RATE) / 1000)
          const to = Math.min(audio.pcm.length, Math.ceil((segment.endMs * SAMPLE_RATE) / 1000))
          const pcm = audio.pcm.slice(from, to)
          const input: RecognizeInput = { pcm, sampleOffset: from, language }
          return pool.run<RecognizeOutput>("asr.recognize", input, { priority: "batch", transfer: [pcm.buffer as ArrayBuffer] })
        }, { concurrency: 2 }).pipe(
          // A transcript only helps the analysis; without one the clone is still made.
          Effect.catch((e) => Effect.logWarning("clone sample not transcribed", { cause: String(e) }).pipe(Effect.as([] as Array<RecognizeOutput>)))
        )
        const text = parts.flatMap((p) => p.words).sort((a, b) => a.startMs - b.startMs).map((w) => w.text).join(" ").trim()
        refText = text === "" ? undefined : text
      }

      const pcm = audio.pcm.slice()
      const analysis = yield* pool.run<CloneAnalyzeOutput>(
        "clone.analyze",
        { pcm, segments: vad.segments, language, refText } satisfies CloneAnalyzeInput,
        { priority: "batch", transfer: [pcm.buffer as ArrayBuffer] }
      )

      return { refText, analysis }
    })

    const createClone = Effect.fn("VoiceCloning.createClone")(function*(request: CreateCloneRequest) {
      const name = request.name.trim()
      if (name === "") return yield* new VoiceCloneError({ reason: "InvalidRequest", message: "name is required" })
      if (name.length > MAX_NAME_CHARS) {
        return yield* new VoiceCloneError({ reason: "InvalidRequest", message: `name is longer than ${MAX_NAME_CHARS} characters` })
      }
      const language = request.language.trim().toLowerCase()
      if (presetsForLanguage(language).length === 0) {
        return yield* new VoiceCloneError({ reason: "UnsupportedLanguage", message: `no base voice speaks language "${language}"; GET /v1/voices lists the languages` })
      }
      // Fail fast on a taken name; the unique index still decides under a race.
      if (yield* clones.nameTaken(request.userId, name)) {
        return yield* new VoiceClonesError({ reason: "NameTaken", message: `you already have a voice clone named "${name}"; delete it or choose another name` })
      }

      const { refText, analysis } = yield* analyseSample(request.file, language, request.refText)
      const voiceId = newCloneId()
      const sampleBlobKey = `clones/${voiceId}/sample`
      yield* blobs.putFile(sampleBlobKey, request.file)
      const row = yield* clones.create(request.userId, {
        voiceId,
        name,
        language,
        description: request.description?.trim() || null,
        labels: request.labels ?? {},
        refText: refText ?? null,
        sampleBlobKey,
        profile: storedProfile(analysis),
        previewText: request.previewText?.trim() || previewSentence(language)
      }).pipe(Effect.onError(() => blobs.delete(sampleBlobKey).pipe(Effect.ignore)))
      yield* Effect.logInfo("voice clone created", {
        voiceId,
        userId: request.userId,
        language,
        baseVoiceId: analysis.plan.baseVoiceId,
        speechMs: Math.round(analysis.profile.speechMs),
        analysisMs: Math.round(analysis.engineMs),
        dropped: analysis.dropped
      })
      return row
    })

    /**
     * SDK `voices.update`: rename, new description or labels, and with a file a new sample (the
     * analysis and plan are redone; the old sample blob is removed once the row points at the
     * new one). The clone keeps its id and language.
     */
    const editClone = Effect.fn("VoiceCloning.editClone")(function*(request: EditCloneRequest) {
      const name = request.name.trim()
      if (name === "") return yield* new VoiceCloneError({ reason: "InvalidRequest", message: "name is required" })
      if (name.length > MAX_NAME_CHARS) {
        return yield* new VoiceCloneError({ reason: "InvalidRequest", message: `name is longer than ${MAX_NAME_CHARS} characters` })
      }
      const current = yield* clones.get(request.userId, request.voiceId)
      const changes: CloneChanges = {
        name,
        ...(request.description !== undefined ? { description: request.description.trim() || null } : {}),
        ...(request.labels !== undefined ? { labels: request.labels } : {})
      }
      if (request.file === undefined) {
        yield* clones.update(request.userId, request.voiceId, changes)
        return
      }
      const { refText, analysis } = yield* analyseSample(request.file, current.language, request.refText)
      const sampleBlobKey = `clones/${request.voiceId}/sample-${Date.now().toString(36)}`
      yield* blobs.putFile(sampleBlobKey, request.file)
      const { before } = yield* clones.update(request.userId, request.voiceId, {
        ...changes,
        refText: refText ?? null,
        sampleBlobKey,
        profile: storedProfile(analysis)
      }).pipe(Effect.onError(() => blobs.delete(sampleBlobKey).pipe(Effect.ignore)))
      yield* blobs.delete(before.sampleBlobKey).pipe(Effect.ignore)
    })

    const deleteClone = Effect.fn("VoiceCloning.deleteClone")(function*(userId: string, voiceId: string) {
      const row = yield* clones.remove(userId, voiceId)
      yield* blobs.delete(row.sampleBlobKey)
    })

    return {
      createClone,
      editClone,
      deleteClone,
      listClones: (userId) => clones.list(userId),
      getClone: (userId, voiceId) => clones.get(userId, voiceId)
    }
  })
)
