/**
 * One recognition: media file → 16 kHz PCM (ffmpeg) → speech segments (Silero VAD) → words
 * (the ASR engine, one pool task per segment, in parallel across workers) → optional speakers.
 * The synchronous endpoint and the job runner of a later issue both call `transcribeFile`.
 *
 * Credits: one per started second of decoded audio. One credit (the least any file costs) is
 * reserved before decoding, so a caller with no balance is refused (402) before any work; the
 * reservation grows to the decoded duration before recognition (402 when the balance is short)
 * and is settled when recognition succeeds, given back when anything fails or is interrupted,
 * and given back at the next start-up if the process dies.
 */
import { Context, Effect, Layer } from "effect"
import type { RecognizeInput, RecognizeOutput } from "../engines/asr/tasks.ts"
import { decodeMedia } from "../engines/media/MediaDecoder.ts"
import type { VadSegmentsInput, VadSegmentsOutput } from "../engines/vad/tasks.ts"
import type { PoolError } from "../runtime/WorkerPool.ts"
import { WorkerPool } from "../runtime/WorkerPool.ts"
import { Accounts } from "../storage/Accounts.ts"
import type { TimedWord } from "./Transcript.ts"
import { TranscriptionError, transcriptionFromMedia, transcriptionFromPool } from "./TranscriptionError.ts"

export interface TranscribeOptions {
  /** ISO 639-1 requested by the caller; undefined lets the engine answer its language. */
  readonly language?: string | undefined
  readonly diarize: boolean
  readonly numSpeakers?: number | undefined
  /** Account billed per audio second; null for anonymous job uploads. */
  readonly userId: string | null
}

export interface TranscriptionResult {
  readonly language: string
  /** True when speech was recognised in a known language. */
  readonly languageDetected: boolean
  readonly words: ReadonlyArray<TimedWord>
  readonly durationMs: number
  readonly timings: { readonly decodeMs: number; readonly vadMs: number; readonly asrMs: number; readonly diarizeMs: number }
}

/** Speaker assignment, provided by the diarization module when it is configured. */
export class SpeakerLabeller extends Context.Service<SpeakerLabeller, {
  readonly label: (
    pcm: Int16Array,
    segments: ReadonlyArray<{ startMs: number; endMs: number }>,
    words: ReadonlyArray<TimedWord>,
    numSpeakers: number | undefined
  ) => Effect.Effect<ReadonlyArray<TimedWord>, TranscriptionError | PoolError>
}>()("speech/actors/SpeakerLabeller") {}

export class Transcriber extends Context.Service<Transcriber, {
  readonly transcribeFile: (file: string, options: TranscribeOptions) => Effect.Effect<TranscriptionResult, unknown>
}>()("speech/actors/Transcriber") {}

const SAMPLE_RATE = 16000

export const TranscriberLive = (options: { readonly concurrency: number }) =>
  Layer.effect(
    Transcriber,
    Effect.gen(function*() {
      const pool = yield* WorkerPool
      const accounts = yield* Accounts
      const labeller = yield* Effect.serviceOption(SpeakerLabeller)

      const transcribeFile = Effect.fn("Transcriber.transcribeFile")(function*(file: string, request: TranscribeOptions) {
        /** Credits to charge when the scope closes: set only once the transcript is complete. */
        let charged = 0
        const held = request.userId === null ? undefined : yield* Effect.acquireRelease(
          accounts.reserve(request.userId, 1, { purpose: "stt" }),
          (reservation) => accounts.settle(reservation, charged).pipe(Effect.ignore)
        )
        const decodeStarted = performance.now()
        const audio = yield* Effect.tryPromise({
          try: (signal) => decodeMedia(file, { signal }),
          catch: transcriptionFromMedia
        })
        const decodeMs = performance.now() - decodeStarted
        const seconds = Math.max(1, Math.ceil(audio.durationMs / 1000))
        if (held !== undefined) yield* accounts.resize(held, seconds)

        const recognise = Effect.gen(function*() {
          const vadStarted = performance.now()
          const vadCopy = audio.pcm.slice()
          const vad = yield* pool.run<VadSegmentsOutput>("vad.segments", { pcm: vadCopy } satisfies VadSegmentsInput, {
            priority: "batch",
            transfer: [vadCopy.buffer as ArrayBuffer]
          })
          const vadMs = performance.now() - vadStarted
          const asrStarted = performance.now()
          const parts = yield* Effect.forEach(vad.segments, (segment) => {
            const from = Math.floor((segment.startMs * SAMPLE_RATE) / 1000)
            const to = Math.min(audio.pcm.length, Math.ceil((segment.endMs * SAMPLE_RATE) / 1000))
            const pcm = audio.pcm.slice(from, to)
            const input: RecognizeInput = { pcm, sampleOffset: from, ...(request.language !== undefined ? { language: request.language } : {}) }
            return pool.run<RecognizeOutput>("asr.recognize", input, { priority: "batch", transfer: [pcm.buffer as ArrayBuffer] })
          }, { concurrency: options.concurrency })
          const asrMs = performance.now() - asrStarted
          let words: ReadonlyArray<TimedWord> = parts.flatMap((p) => p.words).sort((a, b) => a.startMs - b.startMs)
          const diarizeStarted = performance.now()
          if (request.diarize && words.length > 0) {
            if (labeller._tag === "None") {
              return yield* new TranscriptionError({ reason: "EngineUnavailable", message: "diarization is not available on this deployment" })
            }
            words = yield* labeller.value.label(audio.pcm, vad.segments, words, request.numSpeakers)
          }
          const diarizeMs = performance.now() - diarizeStarted
          // "und" (ISO 639 undetermined) when nothing was recognised: language_code is never null.
          const language = words.length > 0 ? parts[0]?.language ?? request.language ?? "en" : "und"
          yield* Effect.logInfo("transcribed", {
            audioMs: Math.round(audio.durationMs),
            speechSegments: vad.segments.length,
            words: words.length,
            diarized: request.diarize,
            ms: { decode: Math.round(decodeMs), vad: Math.round(vadMs), asr: Math.round(asrMs), diarize: Math.round(diarizeMs) }
          })
          return {
            language,
            languageDetected: words.length > 0,
            words,
            durationMs: audio.durationMs,
            timings: { decodeMs, vadMs, asrMs, diarizeMs }
          } satisfies TranscriptionResult
        })
        const result = yield* recognise.pipe(
          Effect.mapError((e) => (e instanceof TranscriptionError ? e : (e as { _tag?: string })._tag === "PoolError" ? transcriptionFromPool(e as PoolError) : e))
        )
        charged = seconds
        return result
      }, Effect.scoped)
      return { transcribeFile }
    })
  )
