/**
 * Test helpers for diarization: an energy-based stand-in for the VAD (so these tests do not
 * depend on the Silero model) and frame-level accuracy against ground-truth turns under the best
 * one-to-one mapping of hypothesis labels to true speakers.
 */
import type { SpeakerTurn, TimeSpan } from "../../../engines/speaker/Diarizer.ts"

/**
 * Speech segments of 16 kHz audio: 10 ms frames louder than −55 dBFS and within 40 dB of the
 * loudest; pauses shorter than `minSilenceMs` are bridged (Silero's default is 300 ms), then
 * each side is padded by 100 ms.
 */
export const energySegments = (pcm: Float32Array, minSilenceMs = 300): Array<TimeSpan> => {
  const frames = Math.floor(pcm.length / 160)
  const db = new Float32Array(frames)
  for (let i = 0; i < frames; i++) {
    let s = 0
    for (let n = 0; n < 160; n++) s += pcm[i * 160 + n]! ** 2
    db[i] = 10 * Math.log10(s / 160 + 1e-12)
  }
  const loudest = Math.max(...db)
  const speech = (i: number) => db[i]! > -55 && db[i]! > loudest - 40
  const raw: Array<{ startMs: number; endMs: number }> = []
  for (let i = 0; i < frames; i++) {
    if (!speech(i)) continue
    const last = raw[raw.length - 1]
    if (last !== undefined && i * 10 - last.endMs < minSilenceMs) last.endMs = (i + 1) * 10
    else raw.push({ startMs: i * 10, endMs: (i + 1) * 10 })
  }
  const durationMs = (pcm.length * 1000) / 16000
  return raw.filter((s) => s.endMs - s.startMs >= 100).map((s) => ({ startMs: Math.max(0, s.startMs - 100), endMs: Math.min(durationMs, s.endMs + 100) }))
}

const permutations = <A>(xs: ReadonlyArray<A>): Array<Array<A>> =>
  xs.length <= 1 ? [[...xs]] : xs.flatMap((x, i) => permutations([...xs.slice(0, i), ...xs.slice(i + 1)]).map((p) => [x, ...p]))

/** Share of items labelled right under the best one-to-one mapping of labels onto true ones. */
export const labelAccuracy = (truth: ReadonlyArray<string>, hypothesis: ReadonlyArray<string>): number => {
  const spans = (labels: ReadonlyArray<string>): Array<SpeakerTurn> => labels.map((speaker, i) => ({ startMs: i * 10, endMs: i * 10 + 10, speaker }))
  return frameAccuracy(spans(truth), spans(hypothesis))
}

/**
 * Share of the true speech time (10 ms frames inside truth turns) labelled with the right
 * speaker, under the best one-to-one mapping of hypothesis speakers onto true ones; frames with
 * no hypothesis turn count as wrong.
 */
export const frameAccuracy = (truth: ReadonlyArray<SpeakerTurn>, hypothesis: ReadonlyArray<SpeakerTurn>): number => {
  const at = (turns: ReadonlyArray<SpeakerTurn>, ms: number) => turns.find((t) => t.startMs <= ms && ms < t.endMs)?.speaker
  const trueNames = [...new Set(truth.map((t) => t.speaker))]
  const hypNames = [...new Set(hypothesis.map((t) => t.speaker))]
  const counts = new Map<string, number>()
  let total = 0
  for (const t of truth) {
    for (let ms = Math.ceil(t.startMs / 10) * 10 + 5; ms < t.endMs; ms += 10) {
      total++
      const h = at(hypothesis, ms)
      if (h !== undefined) counts.set(`${h}\u0000${t.speaker}`, (counts.get(`${h}\u0000${t.speaker}`) ?? 0) + 1)
    }
  }
  // Pad the shorter side with placeholders so every injective mapping is a permutation.
  const size = Math.max(trueNames.length, hypNames.length)
  const hyps = [...hypNames, ...Array.from({ length: size - hypNames.length }, (_, i) => `\u0001${i}`)]
  const trues = [...trueNames, ...Array.from({ length: size - trueNames.length }, (_, i) => `\u0002${i}`)]
  let best = 0
  for (const p of permutations(trues)) {
    let correct = 0
    hyps.forEach((h, i) => (correct += counts.get(`${h}\u0000${p[i]}`) ?? 0))
    best = Math.max(best, correct)
  }
  return total === 0 ? 1 : best / total
}
