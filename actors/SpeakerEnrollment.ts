/**
 * The voiceprint an enroll call stores (SPEC 2.7), computed for that call from the job's audio.
 *
 * A job with speaker recognition keeps no voiceprint (they are biometric data, stored only on
 * the explicit enroll call): its voiceprints live in memory while it matches them and are
 * dropped when it ends. What it keeps instead is its audio, for SPEAKER_ENROLL_WINDOW_MINUTES
 * after it finished (RecognitionJobRunner, `keepAudio`); an enroll call within that window runs
 * the job's speaker pipeline again on that audio (decode → speech detection → units, embeddings
 * and clustering of `SpeakerLabeller`, with the job's `num_speakers`; no speech recognition)
 * and takes the voiceprint of the requested label. Every stage is deterministic, so the labels
 * and centroids are the job's own: the voiceprint stored is the one the job matched with.
 *
 * Cost: a decode and a diarization pass of the recording per enroll call (no ASR), on the
 * background lane of the pool; one enrollment computes at a time per instance, others wait.
 */
import { Context, Effect, Layer, Semaphore } from "effect"
import { randomBytes } from "node:crypto"
import { mkdirSync, rmSync } from "node:fs"
import { open } from "node:fs/promises"
import * as path from "node:path"
import { Recognizer } from "../engines/asr/Recognizer.ts"
import type { TranscriptionError } from "../engines/asr/TranscriptionError.ts"
import type { EngineError } from "../engines/Inference.ts"
import { MediaDecoder } from "../engines/media/MediaDecoderService.ts"
import { BlobStore, type BlobStoreError } from "../storage/BlobStore.ts"
import type { Voiceprint } from "../storage/SavedSpeakers.ts"
import { SpeakerLabeller } from "./Transcription.ts"

export class SpeakerEnrollment extends Context.Service<SpeakerEnrollment, {
  /**
   * The voiceprints of the recording under blob `key`, as a diarized job with `numSpeakers`
   * computed them; fails with BlobStoreError `NotFound` once the audio is gone.
   */
  readonly voiceprints: (key: string, numSpeakers: number | undefined) => Effect.Effect<ReadonlyArray<Voiceprint>, BlobStoreError | TranscriptionError | EngineError>
}>()("speech/actors/SpeakerEnrollment") {}

export const SpeakerEnrollmentLive = (options: { readonly tmpDir: string }) =>
  Layer.effect(
    SpeakerEnrollment,
    Effect.gen(function*() {
      const blobs = yield* BlobStore
      const decoder = yield* MediaDecoder
      const recognizer = yield* Recognizer
      const labeller = yield* SpeakerLabeller
      // One recomputation at a time: each is a whole decode and diarization.
      const one = yield* Semaphore.make(1)
      return SpeakerEnrollment.of({
        voiceprints: (key, numSpeakers) =>
          Semaphore.withPermits(one, 1)(Effect.gen(function*() {
            const file = yield* blobs.localFile(key, options.tmpDir)
            mkdirSync(options.tmpDir, { recursive: true })
            const spillFile = path.join(options.tmpDir, `enroll-${randomBytes(8).toString("hex")}.pcm`)
            yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(spillFile, { force: true })))
            const audio = yield* decoder.decodeToFile(file, spillFile)
            const handle = yield* Effect.acquireRelease(Effect.promise(() => open(spillFile, "r")), (h) => Effect.promise(() => h.close()))
            const pcm = { samples: audio.samples, read: (from: number, to: number) => decoder.readSamples(handle, from, to) }
            const segments = yield* recognizer.findSpeech(pcm, { priority: "background" })
            // The voiceprints do not depend on the words (only on the units and their clusters).
            return (yield* labeller.label(pcm, segments, [], numSpeakers)).voiceprints
          }).pipe(Effect.scoped))
      })
    })
  )
