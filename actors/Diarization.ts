/**
 * Speaker labels for recognised words, in three steps on the worker pool:
 *  1. each VAD speech segment is cut into units at its pauses, with the Gaussian statistics of
 *     their band-limited cepstra (`units`, SpeechUnits.ts), and every unit is embedded
 *     (`embed`: the classical MFCC-statistics embedding, or a neural model from
 *     SPEAKER_EMBEDDING_DIR);
 *  2. the units are clustered: with the classical embedding by BIC over their statistics
 *     (`cluster`, BicClustering.ts: the number of speakers chosen by the criterion, or
 *     `num_speakers`), since its vectors separate speakers only on average (bench/diarization);
 *     with a neural model by average-linkage clustering of the embeddings at the model's own
 *     threshold (Diarizer.ts);
 *  3. units become turns and each word takes the speaker of the turn it overlaps most.
 * Each speaker's voiceprint is the normalised mean of its units' embeddings (the input of
 * speaker recognition, actors/SpeakerRecognition.ts).
 */
import { Effect, Layer } from "effect"
import { assignWords, diarize, unitTurns } from "../engines/speaker/Diarizer.ts"
import { HOP_SAMPLES } from "../engines/speaker/FrameFeatures.ts"
import { isZero, l2Normalise } from "../engines/speaker/SpeakerEmbedding.ts"
import { SpeakerEmbedding } from "../engines/speaker/SpeakerEmbeddingService.ts"
import { STATS_WIDTH } from "../engines/speaker/SpeechUnits.ts"
import type { Voiceprint } from "../storage/SavedSpeakers.ts"
import { SpeakerLabeller } from "./Transcription.ts"

const SAMPLE_RATE = 16000

/** `speaker_3` (the ElevenLabs speaker_id) → `SPEAKER_03` (the raw label of SPEC 2.7). */
export const rawLabel = (speakerId: string): string => `SPEAKER_${speakerId.replace(/^speaker_/, "").padStart(2, "0")}`

/** Per speaker: the normalised mean of its units' non-silent embeddings, and its turns' length. */
const voiceprintsOf = (
  labels: ReadonlyArray<string>,
  embeddings: ReadonlyArray<Float32Array>,
  turns: ReadonlyArray<{ startMs: number; endMs: number; speaker: string }>,
  model: string
): Array<Voiceprint> => {
  const sums = new Map<string, Float32Array>()
  labels.forEach((speaker, i) => {
    const e = embeddings[i]!
    if (isZero(e)) return
    let sum = sums.get(speaker)
    if (sum === undefined) sums.set(speaker, (sum = new Float32Array(e.length)))
    for (let k = 0; k < e.length; k++) sum[k]! += e[k]!
  })
  return [...sums].map(([speaker, sum]) => ({
    label: rawLabel(speaker),
    model,
    centroid: l2Normalise(sum),
    speechSeconds: Math.round(turns.filter((t) => t.speaker === speaker).reduce((s, t) => s + t.endMs - t.startMs, 0)) / 1000
  })).sort((a, b) => a.label.localeCompare(b.label))
}

export const SpeakerLabellerLive = Layer.effect(
  SpeakerLabeller,
  Effect.gen(function*() {
    const embedder = yield* SpeakerEmbedding
    return SpeakerLabeller.of({
      label: Effect.fn("SpeakerLabeller.label")(function*(audio, segments, words, numSpeakers) {
        if (segments.length === 0) return { words: words.map((w) => ({ ...w, speaker: "speaker_0" })), voiceprints: [] }
        // One pair of tasks per speech segment with that segment's audio read back from the
        // spill, so memory stays one segment (≤ 20 s) per task whatever the recording's length.
        // Each chunk starts on the 10 ms analysis grid of the whole recording (HOP_SAMPLES).
        let model = ""
        const perSegment = yield* Effect.forEach(segments, (segment) =>
          Effect.gen(function*() {
            const from = Math.floor(Math.floor((segment.startMs * SAMPLE_RATE) / 1000) / HOP_SAMPLES) * HOP_SAMPLES
            const to = Math.min(audio.samples, Math.ceil((segment.endMs * SAMPLE_RATE) / 1000))
            const pcm = yield* audio.read(from, to)
            const offsetMs = (from * 1000) / SAMPLE_RATE
            const found = yield* embedder.units({ pcm: pcm.slice(), segments: [segment], offsetMs })
            const embedded = yield* embedder.embed({ pcm, windows: found.units, offsetMs })
            model = embedded.name
            return { units: found.units, stats: found.stats, embeddings: embedded.embeddings }
          }), { concurrency: 2 })
        const units = perSegment.flatMap((p) => p.units)
        const embeddings = perSegment.flatMap((p) => p.embeddings)
        let labels: ArrayLike<number>
        if (embedder.profile.directory === undefined) {
          const stats = new Float64Array(units.length * STATS_WIDTH)
          let at = 0
          for (const p of perSegment) {
            stats.set(p.stats, at)
            at += p.stats.length
          }
          labels = yield* embedder.cluster({ stats, units: units.length, ...(numSpeakers !== undefined ? { numSpeakers } : {}) })
        } else {
          // A neural embedding separates speakers by itself: cluster its vectors (no smoothing:
          // units do not overlap).
          const result = diarize(
            units.map((u, i) => ({ ...u, embedding: embeddings[i]! })),
            { smoothing: 0, minClusterMs: 300, ...(numSpeakers !== undefined ? { numSpeakers } : { threshold: embedder.profile.diarizationThreshold }) }
          )
          labels = result.labels.map((l) => Number(l.replace("speaker_", "")))
        }
        const { turns, speakers } = unitTurns(units, labels)
        const assigned = assignWords(words, turns)
        return {
          words: words.map((w, i) => ({ ...w, speaker: assigned[i]! })),
          voiceprints: voiceprintsOf(speakers, embeddings, turns, model)
        }
      })
    })
  })
)
