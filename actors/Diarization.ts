/**
 * Speaker labels for recognised words: embedding windows inside the VAD's speech segments are
 * embedded by the `SpeakerEmbedding` service (a worker task; the classical MFCC-statistics
 * embedding by default), clustered on the main thread (average linkage, cheap for the ≤ 2000
 * windows a recording gets), and each word takes the speaker of the turn it overlaps most.
 * Each speaker's voiceprint is the normalised mean of its windows' embeddings (the input of
 * speaker recognition, actors/SpeakerRecognition.ts); it costs nothing more to compute.
 */
import { Effect, Layer } from "effect"
import { assignWords, diarizationWindows, diarize } from "../engines/speaker/Diarizer.ts"
import { HOP_SAMPLES } from "../engines/speaker/FrameFeatures.ts"
import { isZero, l2Normalise } from "../engines/speaker/SpeakerEmbedding.ts"
import { SpeakerEmbedding } from "../engines/speaker/SpeakerEmbeddingService.ts"
import type { Voiceprint } from "../storage/SavedSpeakers.ts"
import { SpeakerLabeller } from "./Transcription.ts"

const SAMPLE_RATE = 16000

interface WindowGroup {
  readonly startMs: number
  readonly endMs: number
  /** Indexes into the window list. */
  readonly members: Array<number>
}

/**
 * Windows grouped by the speech segment that holds them (`diarizationWindows` makes every
 * window inside one segment); a window no segment holds, which it never makes, gets its own.
 */
const groupBySegment = (
  segments: ReadonlyArray<{ startMs: number; endMs: number }>,
  windows: ReadonlyArray<{ startMs: number; endMs: number }>
): Array<WindowGroup> => {
  const groups = new Map<number, WindowGroup>()
  const loose: Array<WindowGroup> = []
  windows.forEach((w, i) => {
    const s = segments.findIndex((s) => s.startMs <= w.startMs && w.endMs <= s.endMs)
    if (s < 0) return void loose.push({ startMs: w.startMs, endMs: w.endMs, members: [i] })
    let g = groups.get(s)
    if (g === undefined) groups.set(s, (g = { startMs: segments[s]!.startMs, endMs: segments[s]!.endMs, members: [] }))
    g.members.push(i)
  })
  return [...groups.values(), ...loose]
}

/** `speaker_3` (the ElevenLabs speaker_id) → `SPEAKER_03` (the raw label of SPEC 2.7). */
export const rawLabel = (speakerId: string): string => `SPEAKER_${speakerId.replace(/^speaker_/, "").padStart(2, "0")}`

/** Per speaker: the normalised mean of its windows' non-silent embeddings, and its turns' length. */
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
        const windows = diarizationWindows(segments)
        if (windows.length === 0) return { words: words.map((w) => ({ ...w, speaker: "speaker_0" })), voiceprints: [] }
        // One task per speech segment with that segment's audio read back from the spill, so
        // memory stays one segment (≤ 20 s) per task whatever the recording's length. Each chunk
        // starts on the 10 ms analysis grid of the whole recording (HOP_SAMPLES), so the frames
        // are those one call over the whole PCM would analyse.
        const groups = groupBySegment(segments, windows)
        const embeddings = new Array<Float32Array>(windows.length)
        let model = ""
        yield* Effect.forEach(groups, (g) =>
          Effect.gen(function*() {
            const from = Math.floor(Math.floor((g.startMs * SAMPLE_RATE) / 1000) / HOP_SAMPLES) * HOP_SAMPLES
            const to = Math.min(audio.samples, Math.ceil((g.endMs * SAMPLE_RATE) / 1000))
            const pcm = yield* audio.read(from, to)
            const embedded = yield* embedder.embed({
              pcm,
              windows: g.members.map((i) => windows[i]!),
              offsetMs: (from * 1000) / SAMPLE_RATE
            })
            model = embedded.name
            g.members.forEach((i, k) => {
              embeddings[i] = embedded.embeddings[k]!
            })
          }), { concurrency: 2, discard: true })
        const result = diarize(
          windows.map((w, i) => ({ ...w, embedding: embeddings[i]! })),
          numSpeakers !== undefined ? { numSpeakers } : { threshold: embedder.profile.diarizationThreshold }
        )
        const speakers = assignWords(words, result.turns)
        return {
          words: words.map((w, i) => ({ ...w, speaker: speakers[i]! })),
          voiceprints: voiceprintsOf(result.labels, embeddings, result.turns, model)
        }
      })
    })
  })
)
