/**
 * Speech recognition as the main thread sees it, the one pipeline behind both the transcriber
 * (actors/Transcription.ts, audio spilled to a file) and voice cloning (actors/VoiceCloning.ts,
 * a short sample in memory): decoded 16 kHz PCM (a `PcmSource`, see MediaDecoder) → speech
 * segments (`findSpeech`: Silero VAD) → words (`recognize`: the ASR engine, one task per
 * segment, in parallel across workers).
 *
 * `findSpeech` reads the audio in blocks of `VAD_BLOCK_SAMPLES` and carries the model state from
 * block to block (`vad.probabilities`), so the probabilities, and the segments made from them on
 * this thread, are exactly those of one pass over the whole recording, whatever its length:
 * memory is one block (0.98 MB) plus 4 bytes per 32 ms frame (0.9 MB for 2 h).
 *
 * Worker failures become `TranscriptionError` with the engine's reason (VadError/AsrError);
 * a busy or closing pool stays `EngineError` (503). `Recognizer` is the interface;
 * `PoolRecognizer.layer` runs it on the inference worker pool. Main thread only.
 */
import { Context, Effect, Layer } from "effect"
import { type EngineError, Inference, type Priority } from "../Inference.ts"
import { VAD_FRAME_MS, VAD_FRAME_SAMPLES, type VadCarry } from "../vad/SileroVad.ts"
import { type SpeechSegment, speechSegments } from "../vad/SpeechSegments.ts"
import type { VadProbabilitiesInput } from "../vad/tasks.ts"
import type { PocketSphinxOptions } from "./PocketSphinxAsr.ts"
import type { RecognizeInput, RecognizeOutput } from "./tasks.ts"
import { type TranscriptionError, transcriptionFromEngine } from "./TranscriptionError.ts"

/** The rate of every `PcmSource`: what the decoder makes and what VAD and ASR take. */
export const RECOGNIZER_SAMPLE_RATE = 16000

/**
 * Samples per VAD pool task: 960 frames of 512 (30.72 s, 0.98 MB), a whole number of frames so
 * the carried state gives the probabilities of one pass; the largest buffer of a silent file.
 */
export const VAD_BLOCK_SAMPLES = 960 * VAD_FRAME_SAMPLES

/** Decoded 16 kHz mono audio as the pipeline sees it: a sample count and spans read on demand. */
export interface PcmSource {
  readonly samples: number
  /** Samples [from, to) in a buffer of their own (it is moved to a worker). */
  readonly read: (from: number, to: number) => Effect.Effect<Int16Array>
}

/** Audio already in memory; each read is a copy (`slice`), the original stays whole. */
export const pcmInMemory = (pcm: Int16Array): PcmSource => ({
  samples: pcm.length,
  read: (from, to) => Effect.sync(() => pcm.slice(from, to))
})

export interface FindSpeechOptions {
  /** Told the size of the buffers the pipeline itself allocates (the probabilities), bytes. */
  readonly held?: (bytes: number) => Effect.Effect<void>
  /** Pool lane; default batch (queued jobs run as background). */
  readonly priority?: Priority
  /** Told the fraction of the audio scanned after each block, 0-1. */
  readonly progress?: (fraction: number) => Effect.Effect<void>
}

export interface RecognizeOptions {
  /** ISO 639-1; undefined lets the engine answer its own language. */
  readonly language?: string | undefined
  /** Segments recognised at once (pool tasks in flight). */
  readonly concurrency: number
  /** Pool lane; default batch. */
  readonly priority?: Priority
  /** Told the fraction of speech recognised (by duration) after each segment, 0-1. */
  readonly progress?: (fraction: number) => Effect.Effect<void>
}

export class Recognizer extends Context.Service<Recognizer, {
  /** Speech segments of the whole recording, ms, in order. */
  readonly findSpeech: (audio: PcmSource, options?: FindSpeechOptions) => Effect.Effect<ReadonlyArray<SpeechSegment>, TranscriptionError | EngineError>
  /** One result per segment, in the segments' order; words carry recording times. */
  readonly recognize: (
    audio: PcmSource,
    segments: ReadonlyArray<SpeechSegment>,
    options: RecognizeOptions
  ) => Effect.Effect<ReadonlyArray<RecognizeOutput>, TranscriptionError | EngineError>
}>()("speech/engines/Recognizer") {}

/** The samples [from, to) of a segment: whole samples around its ms bounds, inside the audio. */
export const segmentSamples = (audio: PcmSource, segment: { readonly startMs: number; readonly endMs: number }) => ({
  from: Math.floor((segment.startMs * RECOGNIZER_SAMPLE_RATE) / 1000),
  to: Math.min(audio.samples, Math.ceil((segment.endMs * RECOGNIZER_SAMPLE_RATE) / 1000))
})

export interface PoolRecognizerOptions {
  /** Library and model locations (POCKETSPHINX_LIBRARY, POCKETSPHINX_MODEL_DIR); default Debian's. */
  readonly pocketsphinx?: PocketSphinxOptions
  /** Threads give their speech-to-text models back after this long unused, ms (STT_MODEL_IDLE_RELEASE_S); undefined keeps them. */
  readonly releaseAfterMs?: number
}

const makePoolRecognizer = (options: PoolRecognizerOptions = {}) => Effect.map(Inference, (pool) => {
  const release = options.releaseAfterMs !== undefined ? { releaseAfterMs: options.releaseAfterMs } : {}
  const findSpeech = (audio: PcmSource, options: FindSpeechOptions = {}) =>
    Effect.gen(function*() {
      const probabilities = new Float32Array(Math.ceil(audio.samples / VAD_FRAME_SAMPLES))
      if (options.held !== undefined) yield* options.held(probabilities.byteLength)
      let carry: VadCarry | undefined
      for (let from = 0; from < audio.samples; from += VAD_BLOCK_SAMPLES) {
        const block = yield* audio.read(from, Math.min(audio.samples, from + VAD_BLOCK_SAMPLES))
        const moved = [block.buffer as ArrayBuffer, ...(carry !== undefined ? [carry.state.buffer as ArrayBuffer, carry.context.buffer as ArrayBuffer] : [])]
        const input: VadProbabilitiesInput = { pcm: block, ...(carry !== undefined ? { carry } : {}), ...release }
        const out = yield* pool.run("vad.probabilities", input, {
          priority: options.priority ?? "batch",
          transfer: moved
        })
        probabilities.set(out.probabilities, from / VAD_FRAME_SAMPLES)
        carry = out.carry
        if (options.progress !== undefined) yield* options.progress(Math.min(1, (from + VAD_BLOCK_SAMPLES) / audio.samples))
      }
      return speechSegments(probabilities, VAD_FRAME_MS, (audio.samples * 1000) / RECOGNIZER_SAMPLE_RATE) as ReadonlyArray<SpeechSegment>
    }).pipe(Effect.mapError(transcriptionFromEngine))

  const engine = { ...(options.pocketsphinx !== undefined ? { pocketsphinx: options.pocketsphinx } : {}), ...release }
  const recognize = (audio: PcmSource, segments: ReadonlyArray<SpeechSegment>, options: RecognizeOptions) => {
    // Progress by speech duration: segments differ in length and finish out of order.
    const totalMs = segments.reduce((sum, s) => sum + (s.endMs - s.startMs), 0)
    let doneMs = 0
    return Effect.forEach(segments, (segment) =>
      Effect.gen(function*() {
        const { from, to } = segmentSamples(audio, segment)
        const pcm = yield* audio.read(from, to)
        const input: RecognizeInput = { pcm, sampleOffset: from, ...engine, ...(options.language !== undefined ? { language: options.language } : {}) }
        const out = yield* pool.run("asr.recognize", input, { priority: options.priority ?? "batch", transfer: [pcm.buffer as ArrayBuffer] })
        doneMs += segment.endMs - segment.startMs
        if (options.progress !== undefined) yield* options.progress(totalMs > 0 ? doneMs / totalMs : 1)
        return out
      }), { concurrency: options.concurrency }).pipe(Effect.mapError(transcriptionFromEngine))
  }

  return Recognizer.of({ findSpeech, recognize })
})

/** `Recognizer` on the worker pool (Silero VAD, PocketSphinx), batch priority. */
export const PoolRecognizer = {
  make: makePoolRecognizer(),
  layer: Layer.effect(Recognizer, makePoolRecognizer()) as Layer.Layer<Recognizer, never, Inference>,
  /** With the engine's library and model somewhere other than Debian's places. */
  layerWith: (options: PoolRecognizerOptions): Layer.Layer<Recognizer, never, Inference> => Layer.effect(Recognizer, makePoolRecognizer(options))
}
