/**
 * Speaker labels for recognised words: embedding windows inside the VAD's speech segments are
 * embedded in a worker (`speaker.embed`, the classical MFCC-statistics embedding by default),
 * clustered on the main thread (average linkage, cheap for the ≤ 2000 windows a recording gets),
 * and each word takes the speaker of the turn it overlaps most.
 */
import { Effect, Layer } from "effect"
import { assignWords, diarizationWindows, diarize } from "../engines/speaker/Diarizer.ts"
import type { SpeakerEmbedInput, SpeakerEmbedOutput } from "../engines/speaker/tasks.ts"
import { WorkerPool } from "../runtime/WorkerPool.ts"
import { SpeakerLabeller } from "./Transcription.ts"
import { transcriptionFromPool } from "./TranscriptionError.ts"

export const SpeakerLabellerLive = Layer.effect(
  SpeakerLabeller,
  Effect.gen(function*() {
    const pool = yield* WorkerPool
    return SpeakerLabeller.of({
      label: Effect.fn("SpeakerLabeller.label")(function*(pcm, segments, words, numSpeakers) {
        const windows = diarizationWindows(segments)
        if (windows.length === 0) return words.map((w) => ({ ...w, speaker: "speaker_0" }))
        const copy = pcm.slice()
        const embedded = yield* pool.run<SpeakerEmbedOutput>("speaker.embed", { pcm: copy, windows } satisfies SpeakerEmbedInput, {
          priority: "batch",
          transfer: [copy.buffer as ArrayBuffer]
        }).pipe(Effect.mapError(transcriptionFromPool))
        const result = diarize(
          windows.map((w, i) => ({ ...w, embedding: embedded.embeddings[i]! })),
          numSpeakers !== undefined ? { numSpeakers } : {}
        )
        const speakers = assignWords(words, result.turns)
        return words.map((w, i) => ({ ...w, speaker: speakers[i]! }))
      })
    })
  })
)
