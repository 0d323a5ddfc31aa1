/**
 * One recognition: media file → 16 kHz PCM spilled to a file (ffmpeg) → speech segments (Silero
 * VAD over blocks read back from the file) → words (the ASR engine, one pool task per segment,
 * in parallel across workers) → optional speakers (per-segment audio read back again).
 * The synchronous endpoint and the job runner of a later issue both call `transcribeFile`.
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
 * Credits: one per started second of decoded audio. One credit (the least any file costs) is
 * reserved before decoding, so a caller whose balance went to 0 during the upload is still
 * refused (402) before ffmpeg runs; the reservation grows to the decoded duration before
 * recognition (402 when the balance is short) and is settled when recognition succeeds, given
 * back when anything fails or is interrupted, and given back at the next start-up if the
 * process dies.
 */
import { Context, Effect, Layer, Metric } from "effect"
import { mkdirSync, rmSync } from "node:fs"
import { randomBytes } from "node:crypto"
import { open } from "node:fs/promises"
import * as path from "node:path"
import type { RecognizeInput, RecognizeOutput } from "../engines/asr/tasks.ts"
import { DECODE_SAMPLE_RATE, decodeToFile, readSamples } from "../engines/media/MediaDecoder.ts"
import { VAD_FRAME_MS, VAD_FRAME_SAMPLES } from "../engines/vad/SileroVad.ts"
import { speechSegments, type SpeechSegment } from "../engines/vad/SpeechSegments.ts"
import type { VadProbabilitiesInput, VadProbabilitiesOutput } from "../engines/vad/tasks.ts"
import type { VadCarry } from "../engines/vad/SileroVad.ts"
import { sttMetrics } from "../runtime/Metrics.ts"
import type { EngineError } from "../engines/Inference.ts"
import { Inference } from "../engines/Inference.ts"
import { Credits } from "../storage/Credits.ts"
import { Users } from "../storage/Users.ts"
import { CreditPurpose, STT_MIN_CHARGE_CREDITS, sttBelowMinimum, sttCredits } from "./CreditPolicy.ts"
import { makeDecodeGate } from "./DecodeGate.ts"
import type { TimedWord } from "./Transcript.ts"
import { TranscriptionError, transcriptionFromMedia, transcriptionFromEngine } from "./TranscriptionError.ts"

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
  /** Largest single audio buffer this recognition held on the main thread, bytes. */
  readonly largestBufferBytes: number
}

/** Decoded audio as the later stages see it: a sample count and spans read back on demand. */
export interface SpilledPcm {
  /** 16 kHz mono samples in the recording. */
  readonly samples: number
  /** Samples [from, to) in a buffer of their own (movable to a worker). */
  readonly read: (from: number, to: number) => Effect.Effect<Int16Array>
}

/** Speaker assignment, provided by the diarization module when it is configured. */
export class SpeakerLabeller extends Context.Service<SpeakerLabeller, {
  readonly label: (
    audio: SpilledPcm,
    segments: ReadonlyArray<{ startMs: number; endMs: number }>,
    words: ReadonlyArray<TimedWord>,
    numSpeakers: number | undefined
  ) => Effect.Effect<ReadonlyArray<TimedWord>, TranscriptionError | EngineError>
}>()("speech/actors/SpeakerLabeller") {}

export class Transcriber extends Context.Service<Transcriber, {
  /**
   * Fails with AccountsError `InsufficientCredits` (402) when the user cannot pay the minimum
   * charge; a cheap read, so the route refuses before it reads an upload.
   */
  readonly requireCredit: (userId: string | null) => Effect.Effect<void, unknown>
  readonly transcribeFile: (file: string, options: TranscribeOptions) => Effect.Effect<TranscriptionResult, unknown>
}>()("speech/actors/Transcriber") {}

const SAMPLE_RATE = DECODE_SAMPLE_RATE
/**
 * Samples per VAD pool task: 960 frames of 512 (30.72 s, 0.98 MB), a whole number of frames so
 * the carried state gives the probabilities of one pass; the largest buffer of a silent file.
 */
export const VAD_BLOCK_SAMPLES = 960 * VAD_FRAME_SAMPLES
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
      const pool = yield* Inference
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

      const transcribeFile = Effect.fn("Transcriber.transcribeFile")(function*(file: string, request: TranscribeOptions) {
        /** Credits to charge when the scope closes: set only once the transcript is complete. */
        let charged = 0
        // Before any work (the balance may have changed while the upload arrived): one credit.
        const reservation = request.userId === null ? undefined : yield* Effect.acquireRelease(
          credits.reserve(request.userId, STT_MIN_CHARGE_CREDITS, { purpose: CreditPurpose.stt }),
          (r) => credits.settle(r, charged).pipe(Effect.ignore)
        )
        let largestBufferBytes = 0
        const held = (bytes: number) => {
          largestBufferBytes = Math.max(largestBufferBytes, bytes)
          if (bytes <= peakBufferBytes) return Effect.void
          peakBufferBytes = bytes
          return Metric.update(sttMetrics.bufferBytesPeak, bytes)
        }
        mkdirSync(options.tmpDir, { recursive: true })
        const spillFile = path.join(options.tmpDir, `stt-${randomBytes(8).toString("hex")}.pcm`)
        yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(spillFile, { force: true })))

        // decodeMs is ffmpeg's own time (spawn to exit); a wait for a decode slot is not in it.
        const audio = yield* gate.run(
          Effect.andThen(
            Metric.update(sttMetrics.decodesStarted, 1),
            Effect.tryPromise({
              try: (signal) => decodeToFile(file, spillFile, { signal }),
              catch: transcriptionFromMedia
            })
          )
        )
        yield* held(audio.largestChunkBytes)
        const decodeMs = audio.decodeMs
        const seconds = sttCredits(audio.durationMs)
        if (reservation !== undefined) yield* credits.resize(reservation, seconds)

        const handle = yield* Effect.acquireRelease(Effect.promise(() => open(spillFile, "r")), (h) => Effect.promise(() => h.close()))
        const pcm: SpilledPcm = {
          samples: audio.samples,
          read: (from, to) => Effect.promise(() => readSamples(handle, from, to)).pipe(Effect.tap((b) => held(b.byteLength)))
        }

        const recognise = Effect.gen(function*() {
          const vadStarted = performance.now()
          const segments = yield* findSpeech(pcm, held)
          const vadMs = performance.now() - vadStarted
          const asrStarted = performance.now()
          const parts = yield* Effect.forEach(segments, (segment) =>
            Effect.gen(function*() {
              const from = Math.floor((segment.startMs * SAMPLE_RATE) / 1000)
              const to = Math.min(pcm.samples, Math.ceil((segment.endMs * SAMPLE_RATE) / 1000))
              const samples = yield* pcm.read(from, to)
              const input: RecognizeInput = { pcm: samples, sampleOffset: from, ...(request.language !== undefined ? { language: request.language } : {}) }
              return yield* pool.run("asr.recognize", input, { priority: "batch", transfer: [samples.buffer as ArrayBuffer] })
            }), { concurrency: options.concurrency })
          const asrMs = performance.now() - asrStarted
          let words: ReadonlyArray<TimedWord> = parts.flatMap((p) => p.words).sort((a, b) => a.startMs - b.startMs)
          const diarizeStarted = performance.now()
          if (request.diarize && words.length > 0) {
            if (labeller._tag === "None") {
              return yield* new TranscriptionError({ reason: "EngineUnavailable", message: "diarization is not available on this deployment" })
            }
            words = yield* labeller.value.label(pcm, segments, words, request.numSpeakers)
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
            largestBufferBytes
          } satisfies TranscriptionResult
        })
        const result = yield* recognise.pipe(
          Effect.mapError((e) => (e instanceof TranscriptionError ? e : (e as { _tag?: string })._tag === "EngineError" ? transcriptionFromEngine(e as EngineError) : e))
        )
        charged = seconds
        return result
      }, Effect.scoped)

      /**
       * Speech segments of the whole recording: Silero over blocks of `VAD_BLOCK_SAMPLES` read
       * from the spill, the model state carried from block to block, so the probabilities (and
       * the segments) are those of one pass over the whole PCM.
       */
      const findSpeech = (pcm: SpilledPcm, held: (bytes: number) => Effect.Effect<void>) =>
        Effect.gen(function*() {
          const probabilities = new Float32Array(Math.ceil(pcm.samples / VAD_FRAME_SAMPLES))
          yield* held(probabilities.byteLength)
          let carry: VadCarry | undefined
          for (let from = 0; from < pcm.samples; from += VAD_BLOCK_SAMPLES) {
            const block = yield* pcm.read(from, Math.min(pcm.samples, from + VAD_BLOCK_SAMPLES))
            const moved = [block.buffer as ArrayBuffer, ...(carry !== undefined ? [carry.state.buffer as ArrayBuffer, carry.context.buffer as ArrayBuffer] : [])]
            const out = yield* pool.run("vad.probabilities", { pcm: block, ...(carry !== undefined ? { carry } : {}) } satisfies VadProbabilitiesInput, {
              priority: "batch",
              transfer: moved
            })
            probabilities.set(out.probabilities, from / VAD_FRAME_SAMPLES)
            carry = out.carry
          }
          return speechSegments(probabilities, VAD_FRAME_MS, (pcm.samples * 1000) / SAMPLE_RATE) as ReadonlyArray<SpeechSegment>
        })

      return { requireCredit, transcribeFile }
    })
  )
