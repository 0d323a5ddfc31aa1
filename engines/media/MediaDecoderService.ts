/**
 * Media decoding as an Effect service: any audio or video file → 16 kHz mono s16le, collected
 * in memory (`decodeMedia`, short clips) or spilled to a file as it arrives (`decodeToFile`,
 * recordings of any length, read back in spans with `readSamples`), and the duration a file
 * declares before decoding it (`probeDurationMs`, MediaProbe.ts). Interrupting the caller
 * stops ffmpeg. A `MediaError` becomes the `TranscriptionError` of the same reason (415 not
 * media, 400 damaged or no audio, 413 too long, 502 decoder missing or failed).
 *
 * Not to be confused with `MediaDecoder.ts` beside it, the plain functions over the ffmpeg
 * child process. `MediaDecoder` here is the service tag; `FfmpegMediaDecoder.layer` is those
 * functions, today's only implementation; tests provide fakes. Main thread only.
 */
import { Context, Effect, Layer } from "effect"
import type { FileHandle } from "node:fs/promises"
import { type TranscriptionError, transcriptionFromMedia } from "../asr/TranscriptionError.ts"
import { type DecodedAudio, decodeMedia, type DecodeOptions, decodeToFile, readSamples, type SpilledAudio } from "./MediaDecoder.ts"
import { probeDurationMs } from "./MediaProbe.ts"

/** What callers may set: the signal is the calling fiber's. */
export type DecodeLimits = Omit<DecodeOptions, "signal">

export class MediaDecoder extends Context.Service<MediaDecoder, {
  readonly decodeMedia: (file: string, options?: DecodeLimits) => Effect.Effect<DecodedAudio, TranscriptionError>
  /** Creates or truncates `spillFile`; the caller removes it in every case. */
  readonly decodeToFile: (file: string, spillFile: string, options?: DecodeLimits) => Effect.Effect<SpilledAudio, TranscriptionError>
  /** Samples [from, to) of a spill file, in a buffer of their own (shorter past the end). */
  readonly readSamples: (spill: FileHandle, from: number, to: number) => Effect.Effect<Int16Array>
  /** The duration the file's header declares, ms (a claim: it may lie); undefined when none or on any failure. */
  readonly probeDurationMs: (file: string) => Effect.Effect<number | undefined>
}>()("speech/engines/MediaDecoder") {}

const ffmpeg = MediaDecoder.of({
  decodeMedia: (file, options = {}) =>
    Effect.tryPromise({ try: (signal) => decodeMedia(file, { ...options, signal }), catch: transcriptionFromMedia }),
  decodeToFile: (file, spillFile, options = {}) =>
    Effect.tryPromise({ try: (signal) => decodeToFile(file, spillFile, { ...options, signal }), catch: transcriptionFromMedia }),
  readSamples: (spill, from, to) => Effect.promise(() => readSamples(spill, from, to)),
  probeDurationMs: (file) => Effect.promise((signal) => probeDurationMs(file, { signal }).catch(() => undefined))
})

/** `MediaDecoder` by the static ffmpeg binary in a child process per decode. */
export const FfmpegMediaDecoder = {
  make: ffmpeg,
  layer: Layer.succeed(MediaDecoder, ffmpeg)
}
