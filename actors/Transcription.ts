/**
 * One recognition: media file → 16 kHz PCM spilled to a file (the `MediaDecoder` service,
 * ffmpeg) → speech segments and words (the `Recognizer` service: Silero VAD over blocks read
 * back from the file, then the ASR engine, one task per segment, in parallel across workers) →
 * optional speakers (`SpeakerLabeller`, per-segment audio read back again). The engines are
 * services, so tests run this actor with fakes. The synchronous endpoint and the job runner of
 * a later issue both call `transcribeFile`.
 *
 * Memory is bounded whatever the length of the audio: the decoded PCM goes to a spill file under
 * the temporary directory (2 h = 230 MB of disk, removed at the end), and the pipeline holds at
 * most one VAD block (~31 s, 0.98 MB), the per-frame probabilities (4 bytes per 32 ms: 0.9 MB
 * for 2 h) and the segments being recognised (≤ 20 s each, `concurrency` at once). The largest
 * buffer is reported as `largestBufferBytes` and the gauge `stt_buffer_bytes_peak`.
 *
 * Work before payment: the route refuses a caller below the minimum charge (402) before the
 * upload is stored (`requireCredit`); decodes run through a `DecodeGate`
 * (STT_MAX_CONCURRENT_DECODES at once, four times as many waiting, 503 past that).
 *
 * Credits: one per started second of decoded audio. Before decoding (actors/SttPrepay.ts), one
 * credit is reserved (a caller whose balance went to 0 during the upload starts no ffmpeg at
 * all), then the reservation grows to the duration the file declares (a header read of
 * milliseconds; 402 when the balance is short, before anything is decoded), and the decode is
 * stopped as soon as its audio outgrows the reservation plus the balance beside it (402: a
 * header that understates the length, or none). The reservation is then resized to the decoded
 * duration before recognition (402 when the balance went short meanwhile) and settled when
 * recognition succeeds, given back when anything fails or is interrupted, and given back at the
 * next start-up if the process dies. A caller that settles in its own transaction (a job) is
 * handed the reservation instead (`holdReservation`).
 */
import { Context, Effect, Layer, Metric } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import { mkdirSync, rmSync } from "node:fs"
import { randomBytes } from "node:crypto"
import { open } from "node:fs/promises"
import * as path from "node:path"
import { type PcmSource, Recognizer } from "../engines/asr/Recognizer.ts"
import { TranscriptionError } from "../engines/asr/TranscriptionError.ts"
import { DECODE_DEFAULTS, DECODE_SAMPLE_RATE } from "../engines/media/MediaDecoder.ts"
import { MediaDecoder } from "../engines/media/MediaDecoderService.ts"
import type { EngineError, Priority } from "../engines/Inference.ts"
import type { AccountsError } from "../storage/AccountsError.ts"
import { type CreditOrigin, Credits, type Reservation } from "../storage/Credits.ts"
import type { Voiceprint } from "../storage/SavedSpeakers.ts"
import { Users } from "../storage/Users.ts"
import { CreditPurpose, STT_MIN_CHARGE_CREDITS, sttBelowMinimum, sttCredits } from "./CreditPolicy.ts"
import { makeDecodeGate } from "./DecodeGate.ts"
import { overBudget, prepay } from "./SttPrepay.ts"
import { sttMetrics } from "./SttMetrics.ts"
import type { TimedWord } from "./Transcript.ts"


export interface TranscribeOptions<E = never> {
  /** ISO 639-1 requested by the caller; undefined lets the engine answer its language. */
  readonly language?: string | undefined
  readonly diarize: boolean
  readonly numSpeakers?: number | undefined
  /** Account billed per audio second; null when nobody is billed (anonymous). */
  readonly userId: string | null
  /** Ledger origin of the reservation; default purpose `stt` and the request id. */
  readonly origin?: CreditOrigin
  /**
   * Set by a caller that settles the reservation itself (a job, in its terminal transaction):
   * told each reservation taken or resized, which the transcriber then never settles.
   */
  readonly holdReservation?: (reservation: Reservation) => void
  /** Pool lane of the recognition tasks; default batch (synchronous requests). */
  readonly priority?: Priority
  /** Told where the work is: the stage and the fraction of it done (0-1). */
  readonly onProgress?: (progress: RecognitionProgress) => Effect.Effect<void>
  /**
   * Called once the decoded length is known (and paid for), before recognition: a job checks
   * its caps here, and a failure ends the transcription before any recognition.
   */
  readonly onDecoded?: (durationMs: number) => Effect.Effect<void, E>
}

export type RecognitionStage = "decoding" | "detecting_speech" | "recognising" | "diarizing"

export interface RecognitionProgress {
  readonly stage: RecognitionStage
  /** Of the stage, 0-1. */
  readonly fraction: number
}

export interface TranscriptionResult {
  readonly language: string
  /** True when speech was recognised in a known language. */
  readonly languageDetected: boolean
  readonly words: ReadonlyArray<TimedWord>
  readonly durationMs: number
  readonly timings: { readonly decodeMs: number; readonly vadMs: number; readonly asrMs: number; readonly diarizeMs: number }
  /** Largest single audio buffer this recognition held on the main thread, bytes. */
  readonly largestBufferBytes: number
  /** One per diarized speaker (empty without diarization): what speaker recognition compares. */
  readonly voiceprints: ReadonlyArray<Voiceprint>
}

/** Decoded audio as the later stages see it: a sample count and spans read back on demand. */
export type SpilledPcm = PcmSource

/** Speaker assignment, provided by the diarization module when it is configured. */
export class SpeakerLabeller extends Context.Service<SpeakerLabeller, {
  readonly label: (
    audio: SpilledPcm,
    segments: ReadonlyArray<{ startMs: number; endMs: number }>,
    words: ReadonlyArray<TimedWord>,
    numSpeakers: number | undefined
  ) => Effect.Effect<{ readonly words: ReadonlyArray<TimedWord>; readonly voiceprints: ReadonlyArray<Voiceprint> }, TranscriptionError | EngineError>
}>()("speech/actors/SpeakerLabeller") {}

export class Transcriber extends Context.Service<Transcriber, {
  /**
   * Fails with AccountsError `InsufficientCredits` (402) when the user cannot pay the minimum
   * charge; a cheap read, so the route refuses before it reads an upload.
   */
  readonly requireCredit: (userId: string | null) => Effect.Effect<void, AccountsError | SqlError>
  readonly transcribeFile: <E = never>(
    file: string,
    options: TranscribeOptions<E>
  ) => Effect.Effect<TranscriptionResult, TranscriptionError | EngineError | AccountsError | SqlError | E>
}>()("speech/actors/Transcriber") {}

/** Requests that may wait for a decode slot, per slot. */
export const DECODE_WAITING_PER_SLOT = 4

export interface TranscriberOptions {
  /** Segments recognised at once by one transcription (pool tasks in flight). */
  readonly concurrency: number
  /** Decodes (ffmpeg) running at once; STT_MAX_CONCURRENT_DECODES. */
  readonly maxConcurrentDecodes: number
  /** Directory for the spill files of decoded PCM (DATA_DIR/tmp). */
  readonly tmpDir: string
}

export const TranscriberLive = (options: TranscriberOptions) =>
  Layer.effect(
    Transcriber,
    Effect.gen(function*() {
      const decoder = yield* MediaDecoder
      const recognizer = yield* Recognizer
      const users = yield* Users
      const credits = yield* Credits
      const labeller = yield* Effect.serviceOption(SpeakerLabeller)

      const gate = makeDecodeGate({
        permits: options.maxConcurrentDecodes,
        maxWaiting: DECODE_WAITING_PER_SLOT * options.maxConcurrentDecodes,
        publish: (s) =>
          Effect.all([
            Metric.update(sttMetrics.decodesActive, s.active),
            Metric.update(sttMetrics.decodesWaiting, s.waiting),
            Metric.update(sttMetrics.decodesActivePeak, s.peakActive)
          ], { discard: true }),
        refused: Metric.update(sttMetrics.decodesRefused, 1)
      })
      let peakBufferBytes = 0
      // Listed from start-up, so a scrape reads 0 rather than nothing.
      yield* Effect.all([
        Metric.update(sttMetrics.decodesStarted, 0),
        Metric.update(sttMetrics.decodedSeconds, 0),
        Metric.update(sttMetrics.decodesRefused, 0),
        Metric.update(sttMetrics.decodesActive, 0),
        Metric.update(sttMetrics.decodesWaiting, 0),
        Metric.update(sttMetrics.decodesActivePeak, 0),
        Metric.update(sttMetrics.bufferBytesPeak, 0)
      ], { discard: true })

      const requireCredit = Effect.fn("Transcriber.requireCredit")(function*(userId: string | null) {
        if (userId === null) return
        const balance = yield* users.balance(userId)
        if (balance < STT_MIN_CHARGE_CREDITS) return yield* sttBelowMinimum(balance)
      })

      const transcribeFile = Effect.fn("Transcriber.transcribeFile")(function*<E>(file: string, request: TranscribeOptions<E>) {
        /** Credits to charge when the scope closes: set only once the transcript is complete. */
        let charged = 0
        /** The reservation, from when it is taken; settled here unless a holder took it. */
        let reservation: Reservation | undefined
        const holder = request.holdReservation
        const hold = (r: Reservation) => Effect.sync(() => {
          reservation = r
          holder?.(r)
        })
        if (holder === undefined) {
          yield* Effect.addFinalizer(() => (reservation === undefined ? Effect.void : credits.settle(reservation, charged).pipe(Effect.ignore)))
        }
        let largestBufferBytes = 0
        const held = (bytes: number) => {
          largestBufferBytes = Math.max(largestBufferBytes, bytes)
          if (bytes <= peakBufferBytes) return Effect.void
          peakBufferBytes = bytes
          return Metric.update(sttMetrics.bufferBytesPeak, bytes)
        }
        const progress = (stage: RecognitionStage, fraction: number) =>
          request.onProgress === undefined ? Effect.void : request.onProgress({ stage, fraction })
        mkdirSync(options.tmpDir, { recursive: true })
        const spillFile = path.join(options.tmpDir, `stt-${randomBytes(8).toString("hex")}.pcm`)
        yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(spillFile, { force: true })))

        // decodeMs is ffmpeg's own time (spawn to exit); a wait for a decode slot is not in it.
        yield* progress("decoding", 0)
        const maxMs = DECODE_DEFAULTS.maxDurationMs
        const userId = request.userId
        const audio = yield* gate.run(Effect.gen(function*() {
          // Paid for before it is decoded: the declared duration, then a decode bounded by the balance.
          const budgetMs = userId === null ? maxMs : (yield* prepay(credits, users.balance, {
            userId,
            declared: decoder.probeDurationMs(file),
            maxMs,
            origin: request.origin ?? { purpose: CreditPurpose.stt },
            hold
          })).budgetMs
          yield* Metric.update(sttMetrics.decodesStarted, 1)
          let decoded = 0
          return yield* decoder.decodeToFile(file, spillFile, { maxDurationMs: Math.min(maxMs, budgetMs), onSamples: (n) => void (decoded = n) }).pipe(
            Effect.catchTag("TranscriptionError", (e) => Effect.fail(e.reason === "TooLong" && budgetMs < maxMs ? overBudget(budgetMs) : e)),
            Effect.ensuring(Effect.suspend(() => Metric.update(sttMetrics.decodedSeconds, decoded / DECODE_SAMPLE_RATE)))
          )
        }))
        yield* held(audio.largestChunkBytes)
        const decodeMs = audio.decodeMs
        const seconds = sttCredits(audio.durationMs)
        if (reservation !== undefined) yield* Effect.uninterruptible(Effect.flatMap(credits.resize(reservation, seconds), hold))
        if (request.onDecoded !== undefined) yield* request.onDecoded(audio.durationMs)

        const handle = yield* Effect.acquireRelease(Effect.promise(() => open(spillFile, "r")), (h) => Effect.promise(() => h.close()))
        const pcm: SpilledPcm = {
          samples: audio.samples,
          read: (from, to) => decoder.readSamples(handle, from, to).pipe(Effect.tap((b) => held(b.byteLength)))
        }

        const recognise = Effect.gen(function*() {
          const vadStarted = performance.now()
          const priority = request.priority ?? "batch"
          yield* progress("detecting_speech", 0)
          const segments = yield* recognizer.findSpeech(pcm, { held, priority, progress: (f) => progress("detecting_speech", f) })
          const vadMs = performance.now() - vadStarted
          const asrStarted = performance.now()
          yield* progress("recognising", 0)
          const parts = yield* recognizer.recognize(pcm, segments, {
            language: request.language,
            concurrency: options.concurrency,
            priority,
            progress: (f) => progress("recognising", f)
          })
          const asrMs = performance.now() - asrStarted
          let words: ReadonlyArray<TimedWord> = parts.flatMap((p) => p.words).sort((a, b) => a.startMs - b.startMs)
          let voiceprints: ReadonlyArray<Voiceprint> = []
          const diarizeStarted = performance.now()
          if (request.diarize && words.length > 0) {
            if (labeller._tag === "None") {
              return yield* new TranscriptionError({ reason: "EngineUnavailable", message: "diarization is not available on this deployment" })
            }
            yield* progress("diarizing", 0)
            const labelled = yield* labeller.value.label(pcm, segments, words, request.numSpeakers)
            words = labelled.words
            voiceprints = labelled.voiceprints
            yield* progress("diarizing", 1)
          }
          const diarizeMs = performance.now() - diarizeStarted
          // "und" (ISO 639 undetermined) when nothing was recognised: language_code is never null.
          const language = words.length > 0 ? parts[0]?.language ?? request.language ?? "en" : "und"
          yield* Effect.logInfo("transcribed", {
            audioMs: Math.round(audio.durationMs),
            speechSegments: segments.length,
            words: words.length,
            diarized: request.diarize,
            largestBufferBytes,
            ms: { decode: Math.round(decodeMs), vad: Math.round(vadMs), asr: Math.round(asrMs), diarize: Math.round(diarizeMs) }
          })
          return {
            language,
            languageDetected: words.length > 0,
            words,
            durationMs: audio.durationMs,
            timings: { decodeMs, vadMs, asrMs, diarizeMs },
            largestBufferBytes,
            voiceprints
          } satisfies TranscriptionResult
        })
        const result = yield* recognise
        charged = seconds
        return result
      }, Effect.scoped)

      return { requireCredit, transcribeFile }
    })
  )
