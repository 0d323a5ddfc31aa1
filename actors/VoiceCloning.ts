/**
 * Voice clones end to end (SPEC 2.3, endpoints 1–3, issue 5): one uploaded sample →
 * decode (`MediaDecoder`, in memory, type from the bytes) → speech measured by VAD (6–30 s, not
 * file length) → transcript (the caller's `refText`; else ASR when the language has an engine,
 * English only here; else none); VAD and ASR are the transcriber's own pipeline (`Recognizer`)
 * → `CloneAnalysis` (profile + synthesis plan) → the original sample into the BlobStore → the
 * `voice_clones` row. Deleting removes the row and the blob. Previews are the Synthesizer's.
 *
 * The stored profile is `{ profile, plan, candidates }`; Synthesizer.resolveVoice reads `plan`.
 * The original file is kept byte for byte so a future (neural) engine can analyse it again.
 */
import { Context, Data, Effect, Layer } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import { pcmInMemory, Recognizer } from "../engines/asr/Recognizer.ts"
import type { RecognizeOutput } from "../engines/asr/tasks.ts"
import type { TranscriptionError } from "../engines/asr/TranscriptionError.ts"
import { CloneAnalysis } from "../engines/clone/CloneAnalysis.ts"
import type { CloneAnalyzeOutput } from "../engines/clone/tasks.ts"
import { MediaDecoder } from "../engines/media/MediaDecoderService.ts"
import { presetsForLanguage, resolveLanguage } from "../engines/tts/Voices.ts"
import type { EngineError } from "../engines/Inference.ts"
import { BlobStore, type BlobStoreError } from "../storage/BlobStore.ts"
import { type CloneChanges, newCloneId, type VoiceCloneRow, VoiceClones, VoiceClonesError } from "../storage/VoiceClones.ts"
import { languageOfText, soundsEnglish } from "./CloneLanguage.ts"
import { previewSentence, Synthesizer } from "./Synthesizer.ts"

/** SPEC 8: speech in the sample, measured by voice activity. */
export const MIN_SPEECH_MS = 6_000
export const MAX_SPEECH_MS = 30_000
export const MAX_NAME_CHARS = 60
/** Languages with an ASR engine here (PocketSphinx, US English model). */
const ASR_LANGUAGES = new Set(["en"])
/** Segments of a sample recognised at once. */
const ASR_CONCURRENCY = 2
/** A clone's language when neither the caller nor the sample says (SPEC 2.3). */
const DEFAULT_LANGUAGE = "et"

export class VoiceCloneError extends Data.TaggedError("VoiceCloneError")<{
  readonly reason: "SpeechTooShort" | "SpeechTooLong" | "UnsupportedLanguage" | "InvalidRequest"
  readonly message: string
}> {}

export interface CreateCloneRequest {
  readonly userId: string
  readonly name: string
  /**
   * As given (ISO 639-1 or an English name); undefined lets `labels.language`, then the sample
   * and its texts decide (actors/CloneLanguage.ts), Estonian when nothing does.
   */
  readonly language?: string | undefined
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
  /** A new language (code or English name); `labels.language` does the same. Omit to keep. */
  readonly language?: string | undefined
  /** A new sample (local path, removed by the caller), or none to keep the current one. */
  readonly file?: string | undefined
}

/** What analysing a new sample may fail with: the media, the speech in it, the engines. */
export type SampleError = VoiceCloneError | TranscriptionError | EngineError

export class VoiceCloning extends Context.Service<VoiceCloning, {
  readonly createClone: (request: CreateCloneRequest) => Effect.Effect<VoiceCloneRow, SampleError | VoiceClonesError | BlobStoreError | SqlError>
  /** NotFound (404) for unknown, deleted or someone else's clones; NameTaken (409). */
  readonly editClone: (request: EditCloneRequest) => Effect.Effect<void, SampleError | VoiceClonesError | BlobStoreError | SqlError>
  /** NotFound (404) for unknown, deleted or someone else's clones. */
  readonly deleteClone: (userId: string, voiceId: string) => Effect.Effect<void, VoiceClonesError | BlobStoreError | SqlError>
  readonly listClones: (userId: string) => Effect.Effect<ReadonlyArray<VoiceCloneRow>, SqlError>
  readonly getClone: (userId: string, voiceId: string) => Effect.Effect<VoiceCloneRow, VoiceClonesError | SqlError>
}>()("speech/actors/VoiceCloning") {}

/** The ISO 639-1 code of a language given by the caller, or a 400 naming the bad value. */
const givenLanguage = (value: string) => {
  const code = resolveLanguage(value)
  return code !== undefined && presetsForLanguage(code).length > 0
    ? Effect.succeed(code)
    : Effect.fail(new VoiceCloneError({ reason: "UnsupportedLanguage", message: `no base voice speaks language "${value}"; give an ISO 639-1 code or an English name (GET /v1/voices lists the languages)` }))
}

/** A clone's language lives in its own column and shows as `labels.language`; never stored twice. */
const withoutLanguage = (labels: Readonly<Record<string, string>>): Record<string, string> => {
  const { language: _, ...rest } = labels
  return rest
}

/** PostgreSQL text cannot hold NUL: refuse it here (400) rather than fail in the database (500). */
const refuseNul = (fields: ReadonlyArray<string | undefined>, labels: Readonly<Record<string, string>> | undefined) => {
  const all = [...fields, ...Object.entries(labels ?? {}).flat()]
  return all.some((v) => v !== undefined && v.includes("\u0000"))
    ? Effect.fail(new VoiceCloneError({ reason: "InvalidRequest", message: "text fields and labels must not contain NUL characters" }))
    : Effect.void
}

/** What the `profile` column holds; Synthesizer.resolveVoice reads `plan`. */
const storedProfile = (analysis: CloneAnalyzeOutput) =>
  ({ profile: analysis.profile, plan: analysis.plan, candidates: analysis.candidates.slice(0, 5), dropped: analysis.dropped })

const seconds = (ms: number) => (ms / 1000).toFixed(1)

export const VoiceCloningLive = Layer.effect(
  VoiceCloning,
  Effect.gen(function*() {
    const decoder = yield* MediaDecoder
    const recognizer = yield* Recognizer
    const cloneAnalysis = yield* CloneAnalysis
    const synthesizer = yield* Synthesizer
    const blobs = yield* BlobStore
    const clones = yield* VoiceClones

    /**
     * One sample → its transcript and the worker's analysis (profile + plan): decode, VAD
     * (6–30 s of speech), ASR when no transcript was given and the language has an engine.
     */
    const analyseSample = Effect.fn("VoiceCloning.analyseSample")(function*(
      file: string,
      givenLanguage: string | undefined,
      givenRefText: string | undefined,
      /** `previewText` and `description`: weaker hints than `refText`, used after the sound. */
      hints: ReadonlyArray<string | undefined> = []
    ) {
      const audio = yield* decoder.decodeMedia(file, { maxDurationMs: 10 * 60_000 })
      const sample = pcmInMemory(audio.pcm)
      const segments = yield* recognizer.findSpeech(sample)
      const speechMs = segments.reduce((sum, s) => sum + (s.endMs - s.startMs), 0)
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
      // No language given: the transcript's language, else the sound of the sample, else the
      // other texts, else Estonian (actors/CloneLanguage.ts).
      let language = givenLanguage ?? languageOfText(refText)
      // The recogniser runs to hear whether the sample is English, or to transcribe an English one.
      if (language === undefined || (refText === undefined && ASR_LANGUAGES.has(language))) {
        const parts = yield* recognizer.recognize(sample, segments, { language: "en", concurrency: ASR_CONCURRENCY }).pipe(
          // A transcript only helps the analysis; without one the clone is still made.
          Effect.catch((e) => Effect.logWarning("clone sample not transcribed", { cause: String(e) }).pipe(Effect.as([] as ReadonlyArray<RecognizeOutput>)))
        )
        const words = parts.flatMap((p) => p.words).sort((a, b) => a.startMs - b.startMs)
        if (language === undefined && soundsEnglish(words)) language = "en"
        const text = words.map((w) => w.text).join(" ").trim()
        // Recognised English words are a transcript only of English speech.
        if (refText === undefined && language === "en" && text !== "") refText = text
      }
      language ??= hints.map(languageOfText).find((l) => l !== undefined) ?? DEFAULT_LANGUAGE

      const analysis = yield* cloneAnalysis.analyze({ pcm: audio.pcm.slice(), segments, language, refText })

      return { refText, analysis, language }
    })

    const createClone = Effect.fn("VoiceCloning.createClone")(function*(request: CreateCloneRequest) {
      const name = request.name.trim()
      if (name === "") return yield* new VoiceCloneError({ reason: "InvalidRequest", message: "name is required" })
      if (name.length > MAX_NAME_CHARS) {
        return yield* new VoiceCloneError({ reason: "InvalidRequest", message: `name is longer than ${MAX_NAME_CHARS} characters` })
      }
      yield* refuseNul([name, request.description, request.refText, request.previewText], request.labels)
      const asked = request.language?.trim() || request.labels?.language?.trim() || undefined
      const given = asked === undefined ? undefined : yield* givenLanguage(asked)
      // Fail fast on a taken name; the unique index still decides under a race.
      if (yield* clones.nameTaken(request.userId, name)) {
        return yield* new VoiceClonesError({ reason: "NameTaken", message: `you already have a voice clone named "${name}"; delete it or choose another name` })
      }

      const { refText, analysis, language } = yield* analyseSample(request.file, given, request.refText, [request.previewText, request.description])
      const voiceId = newCloneId()
      const sampleBlobKey = `clones/${voiceId}/sample`
      yield* blobs.putFile(sampleBlobKey, request.file)
      const row = yield* clones.create(request.userId, {
        voiceId,
        name,
        language,
        description: request.description?.trim() || null,
        labels: withoutLanguage(request.labels ?? {}),
        refText: refText ?? null,
        sampleBlobKey,
        profile: storedProfile(analysis),
        // Null: the canned sentence of the clone's language at preview time (it may change).
        previewText: request.previewText?.trim() || null
      }).pipe(Effect.onError(() => blobs.delete(sampleBlobKey).pipe(Effect.ignore)))
      yield* Effect.logInfo("voice clone created", {
        voiceId,
        userId: request.userId,
        language,
        languageFrom: given !== undefined ? "request" : "sample",
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
     * new one). The clone keeps its id; `language` or `labels.language` changes its language (no
     * new analysis: the plan's timbre moves to the new language's voice, Synthesizer.revoice).
     */
    const editClone = Effect.fn("VoiceCloning.editClone")(function*(request: EditCloneRequest) {
      const name = request.name.trim()
      if (name === "") return yield* new VoiceCloneError({ reason: "InvalidRequest", message: "name is required" })
      if (name.length > MAX_NAME_CHARS) {
        return yield* new VoiceCloneError({ reason: "InvalidRequest", message: `name is longer than ${MAX_NAME_CHARS} characters` })
      }
      yield* refuseNul([name, request.description, request.refText], request.labels)
      const asked = request.language?.trim() || request.labels?.language?.trim() || undefined
      const language = asked === undefined ? undefined : yield* givenLanguage(asked)
      const current = yield* clones.get(request.userId, request.voiceId)
      const changes: CloneChanges = {
        name,
        ...(request.description !== undefined ? { description: request.description.trim() || null } : {}),
        ...(request.labels !== undefined ? { labels: withoutLanguage(request.labels) } : {}),
        ...(language !== undefined && language !== current.language
          ? {
            language,
            // A canned preview sentence of the old language follows the language.
            ...(current.previewText === previewSentence(current.language) ? { previewText: null } : {})
          }
          : {})
      }
      yield* synthesizer.dropPreview(request.voiceId)
      if (request.file === undefined) {
        yield* clones.update(request.userId, request.voiceId, changes)
        return
      }
      const { refText, analysis } = yield* analyseSample(request.file, language ?? current.language, request.refText)
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
      yield* synthesizer.dropPreview(voiceId)
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
