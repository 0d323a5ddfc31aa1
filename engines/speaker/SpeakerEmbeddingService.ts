/**
 * Speaker embeddings as the main thread sees it: fixed-length vectors of windows of 16 kHz
 * speech (`speaker.embed`; by default the classical MFCC-statistics embedding). Worker failures
 * become `TranscriptionError` (diarization is a stage of recognition); a busy or closing pool
 * stays `EngineError`.
 *
 * Not to be confused with `SpeakerEmbedding.ts` beside it, the worker-side interface an
 * embedding implementation provides. `SpeakerEmbedding` here is the service tag;
 * `PoolSpeakerEmbedding.layer` runs it on the inference worker pool. Main thread only.
 */
import { Context, Effect, Layer } from "effect"
import { type EngineError, Inference } from "../Inference.ts"
import { type TranscriptionError, transcriptionFromEngine } from "../asr/TranscriptionError.ts"
import { CLASSICAL_SPEAKER_MODEL, type SpeakerModelProfile } from "./SpeakerModel.ts"
import type { SpeakerClusterInput, SpeakerEmbedInput, SpeakerEmbedOutput, SpeakerUnitsInput, SpeakerUnitsOutput } from "./tasks.ts"

export class SpeakerEmbedding extends Context.Service<SpeakerEmbedding, {
  /** The embedding the workers run and its thresholds. */
  readonly profile: SpeakerModelProfile
  /** `input.pcm`'s buffer moves to the engine: the caller passes a buffer of its own. */
  readonly embed: (input: Omit<SpeakerEmbedInput, "modelDirectory">) => Effect.Effect<SpeakerEmbedOutput, TranscriptionError | EngineError>
  /** Pause-bounded units of speech and their cepstral statistics (SpeechUnits.ts); `pcm` moves too. */
  readonly units: (input: SpeakerUnitsInput) => Effect.Effect<SpeakerUnitsOutput, TranscriptionError | EngineError>
  /** BIC clustering of a recording's units (BicClustering.ts): a label per unit, −1 set aside. */
  readonly cluster: (input: SpeakerClusterInput) => Effect.Effect<Int32Array, TranscriptionError | EngineError>
}>()("speech/engines/SpeakerEmbedding") {}

const makePoolSpeakerEmbedding = (profile: SpeakerModelProfile) =>
  Effect.map(Inference, (pool) =>
    SpeakerEmbedding.of({
      profile,
      embed: (input) =>
        pool.run("speaker.embed", { ...input, ...(profile.directory !== undefined ? { modelDirectory: profile.directory } : {}) }, {
          priority: "batch",
          transfer: [input.pcm.buffer as ArrayBuffer]
        }).pipe(Effect.mapError(transcriptionFromEngine)),
      units: (input) =>
        pool.run("speaker.units", input, { priority: "batch", transfer: [input.pcm.buffer as ArrayBuffer] }).pipe(Effect.mapError(transcriptionFromEngine)),
      cluster: (input) =>
        pool.run("speaker.cluster", input, { priority: "batch", transfer: [input.stats.buffer as ArrayBuffer] }).pipe(
          Effect.map((r) => r.labels),
          Effect.mapError(transcriptionFromEngine)
        )
    }))

/** `SpeakerEmbedding` on the worker pool, batch priority; the classical embedding unless a profile says otherwise. */
export const PoolSpeakerEmbedding = {
  make: makePoolSpeakerEmbedding,
  layer: (profile: SpeakerModelProfile = CLASSICAL_SPEAKER_MODEL) =>
    Layer.effect(SpeakerEmbedding, makePoolSpeakerEmbedding(profile)) as Layer.Layer<SpeakerEmbedding, never, Inference>
}
