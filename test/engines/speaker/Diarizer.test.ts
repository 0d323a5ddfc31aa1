import t, { type Test } from "tap"
import { bicCluster } from "../../../engines/speaker/BicClustering.ts"
import {
  assignWords,
  averageLinkage,
  diarize,
  type EmbeddedWindow,
  type SpeakerTurn,
  unitTurns
} from "../../../engines/speaker/Diarizer.ts"
import { speechUnits, UNIT_DIMENSION } from "../../../engines/speaker/SpeechUnits.ts"
import { cosine, l2Normalise } from "../../../engines/speaker/SpeakerEmbedding.ts"
import { energySegments, frameAccuracy, labelAccuracy } from "./scoring.ts"
import { dialogue, disposeSpeakers, type VoiceName } from "./speakers.ts"

t.teardown(disposeSpeakers)

/** Reproducible pseudo-random numbers in [0, 1). */
const random = (seed: number) => () => {
  seed = (Math.imul(seed, 1103515245) + 12345) >>> 0
  return seed / 2 ** 32
}

/** A unit vector near `direction` (one-hot index) with some noise. */
const near = (rand: () => number, direction: number, noise = 0.3, dimension = 8) =>
  l2Normalise(Float32Array.from({ length: dimension }, (_, d) => (d === direction ? 1 : 0) + noise * (rand() - 0.5)))

t.test("average linkage by nearest-neighbour chain equals the naive algorithm", async (t) => {
  const rand = random(7)
  const vectors = Array.from({ length: 40 }, (_, i) => near(rand, i % 4, 1.2))
  const fast = averageLinkage(vectors).map((m) => m[2])
  // Naive: repeatedly merge the closest pair of clusters by mean pairwise distance.
  let clusters = vectors.map((_, i) => [i])
  const naive: Array<number> = []
  while (clusters.length > 1) {
    let best = [0, 1, Infinity] as [number, number, number]
    for (let a = 0; a < clusters.length; a++) {
      for (let b = a + 1; b < clusters.length; b++) {
        let sum = 0
        for (const i of clusters[a]!) for (const j of clusters[b]!) sum += 1 - cosine(vectors[i]!, vectors[j]!)
        const d = sum / (clusters[a]!.length * clusters[b]!.length)
        if (d < best[2]) best = [a, b, d]
      }
    }
    naive.push(best[2])
    const merged = [...clusters[best[0]]!, ...clusters[best[1]]!]
    clusters = clusters.filter((_, k) => k !== best[0] && k !== best[1]).concat([merged])
  }
  t.equal(fast.length, 39)
  t.ok(fast.every((d, i) => Math.abs(d - naive[i]!) < 1e-5), "same merge heights")
})

const windowsOf = (labels: ReadonlyArray<number>, rand: () => number, noise = 0.3): Array<EmbeddedWindow> =>
  labels.map((l, i) => ({ startMs: i * 750, endMs: i * 750 + 1500, embedding: near(rand, l, noise) }))

t.test("clusters made-up embeddings", async (t) => {
  const truth = [2, 2, 2, 2, 5, 5, 5, 5, 5, 2, 2, 2, 7, 7, 7, 7]
  const windows = windowsOf(truth, random(1))
  const free = diarize(windows)
  t.equal(free.speakerCount, 3, "threshold finds three")
  t.same(free.labels.slice(0, 5), ["speaker_0", "speaker_0", "speaker_0", "speaker_0", "speaker_1"], "named in order of first appearance")
  t.equal(labelAccuracy(truth.map(String), free.labels), 1)
  t.equal(diarize(windows, { numSpeakers: 2 }).speakerCount, 2, "numSpeakers overrides the threshold")
  t.equal(diarize(windows, { numSpeakers: 1 }).speakerCount, 1)
  t.same(
    free.turns.map((x) => [x.startMs, x.endMs, x.speaker]),
    [
      [0, 3375, "speaker_0"],
      [3375, 7125, "speaker_1"],
      [7125, 9375, "speaker_0"],
      [9375, 12750, "speaker_2"]
    ],
    "turns meet in the middle of the overlap"
  )
  const shuffled = [...windows].reverse()
  t.same(diarize(shuffled).labels, [...free.labels].reverse(), "labels follow input order; names follow time")
  t.throws(() => diarize(windows, { numSpeakers: 0 }), RangeError)
  t.same(diarize([]), { turns: [], labels: [], speakerCount: 0 })
})

t.test("smoothing, outliers, windows without speech", async (t) => {
  const rand = random(3)
  // One stray window of direction 4 inside a run of direction 0.
  const flip = windowsOf([0, 0, 0, 0, 4, 0, 0, 0, 1, 1, 1, 1, 1], rand, 0.1)
  const smoothed = diarize(flip, { numSpeakers: 2 })
  t.equal(new Set(smoothed.labels.slice(0, 8)).size, 1, "the stray window neither takes a speaker slot nor survives")
  t.equal(smoothed.labels[8], "speaker_1")

  // Single-window segments of another speaker between pauses survive smoothing.
  const rand2 = random(4)
  const separate: Array<EmbeddedWindow> = [
    ...[0, 1, 2].map((i) => ({ startMs: i * 750, endMs: i * 750 + 1500, embedding: near(rand2, 0, 0.1) })),
    { startMs: 5000, endMs: 6200, embedding: near(rand2, 1, 0.1) },
    { startMs: 6800, endMs: 8000, embedding: near(rand2, 1, 0.1) },
    ...[0, 1, 2].map((i) => ({ startMs: 9000 + i * 750, endMs: 10500 + i * 750, embedding: near(rand2, 0, 0.1) }))
  ]
  const d = diarize(separate)
  t.same(d.labels, ["speaker_0", "speaker_0", "speaker_0", "speaker_1", "speaker_1", "speaker_0", "speaker_0", "speaker_0"])

  const withGaps: Array<EmbeddedWindow> = [
    ...windowsOf([0, 0, 0], rand),
    { startMs: 2250, endMs: 3750, embedding: new Float32Array(8) }, // no speech
    { startMs: 3000, endMs: 3200, embedding: near(rand, 3) } // too short to cluster
  ]
  const g = diarize(withGaps, { threshold: 0.1 })
  t.same(g.labels, ["speaker_0", "speaker_0", "speaker_0", "speaker_0", "speaker_0"], "take the label of the nearest clustered window")
})

t.test("words get the speaker of the turn they overlap most, else the nearest", async (t) => {
  const turns: Array<SpeakerTurn> = [
    { startMs: 0, endMs: 1000, speaker: "speaker_0" },
    { startMs: 1000, endMs: 2000, speaker: "speaker_1" },
    { startMs: 3000, endMs: 4000, speaker: "speaker_0" }
  ]
  const words = [
    { startMs: 100, endMs: 300 },
    { startMs: 900, endMs: 1300 }, // 100 ms in turn 0, 300 in turn 1
    { startMs: 2100, endMs: 2300 }, // gap: nearer turn 1
    { startMs: 2700, endMs: 2900 }, // gap: nearer turn 2
    { startMs: 5000, endMs: 5100 }, // after everything
    { startMs: 4000, endMs: 4000 } // zero length at a turn end
  ]
  t.same(assignWords(words, turns), ["speaker_0", "speaker_1", "speaker_1", "speaker_0", "speaker_0", "speaker_0"])
  t.same(assignWords(words.slice(0, 2), []), ["speaker_0", "speaker_0"], "no turns: one speaker")
})

const LINES = [
  "Good morning. Did you manage to finish the quarterly report last night?",
  "Almost. I still need the sales figures from the northern region.",
  "I can send those over after lunch, they are on the shared drive.",
  "Great, that would help a lot. Is the meeting still at three?",
  "Yes, but it moved to the small conference room on the second floor.",
  "Fine. I will bring the printed copies and the projector cable.",
  "Thanks. Let us also review the budget before the client arrives.",
  "Sure, I will book an extra half hour for that."
]

const pct = (x: number) => `${(100 * x).toFixed(1)} %`

/**
 * Synthesizes the dialogue, segments it by energy and diarizes it both ways on the service's
 * classical path: pause-bounded units, BIC clustering (actors/Diarization.ts).
 */
const runDialogue = async (t: Test, voices: ReadonlyArray<VoiceName>, gapsMs: ReadonlyArray<number>) => {
  const { pcm, turns, words } = await dialogue(
    LINES.map((text, i) => ({ voice: voices[i % voices.length]!, text })),
    gapsMs
  )
  const started = performance.now()
  const { units, stats } = speechUnits(pcm, energySegments(pcm))
  const analysed = performance.now()
  const diarized = (labels: Int32Array) => {
    const { turns } = unitTurns(units, labels)
    return { turns, speakerCount: new Set(turns.map((x) => x.speaker)).size }
  }
  const free = diarized(bicCluster(stats.slice(), units.length, UNIT_DIMENSION))
  const clustered = performance.now()
  const fixed = diarized(bicCluster(stats.slice(), units.length, UNIT_DIMENSION, { numSpeakers: voices.length }))
  const seconds = pcm.length / 16000
  const one = (xs: ReadonlyArray<SpeakerTurn>) => xs.map((x) => ({ ...x, speaker: "any" }))
  const covered = frameAccuracy(one(turns), one(free.turns))
  t.comment(
    `${voices.join(" / ")}: ${seconds.toFixed(1)} s, ${turns.length} turns, ${units.length} units; ` +
      `units ${((analysed - started) / seconds).toFixed(1)} ms per s of audio, clustering ${(clustered - analysed).toFixed(1)} ms; ` +
      `turns cover ${pct(covered)} of the true turns (the rest is the engines' own leading and trailing silence)`
  )
  const score = (d: { turns: Array<SpeakerTurn>; speakerCount: number }) => ({
    time: frameAccuracy(turns, d.turns),
    words: labelAccuracy(
      words.map((w) => w.speaker),
      assignWords(words, d.turns)
    ),
    speakers: d.speakerCount
  })
  return { free: score(free), fixed: score(fixed) }
}

t.test("two-voice dialogue (Flite slt / rms), with and without numSpeakers", async (t) => {
  for (const gaps of [[450, 600, 350, 700], [250, 300]]) {
    const { free, fixed } = await runDialogue(t, ["flite:slt", "flite:rms"], gaps)
    t.comment(`gaps ${gaps.join("/")} ms: threshold: ${free.speakers} speakers, ${pct(free.time)} of time, ${pct(free.words)} of words; numSpeakers=2: ${pct(fixed.time)} of time, ${pct(fixed.words)} of words`)
    t.equal(free.speakers, 2, "threshold finds two speakers")
    t.ok(free.time >= 0.85, `threshold: ${pct(free.time)} of speech time right`)
    t.ok(fixed.time >= 0.85, `numSpeakers=2: ${pct(fixed.time)} of speech time right`)
    t.ok(free.words >= 0.85 && fixed.words >= 0.85, "and ≥ 85 % of words")
  }
})

t.test("three-voice dialogue (Flite slt / rms / awb) with numSpeakers=3", async (t) => {
  const { free, fixed } = await runDialogue(t, ["flite:slt", "flite:rms", "flite:awb"], [400, 550, 300])
  t.comment(`numSpeakers=3: ${pct(fixed.time)} of time, ${pct(fixed.words)} of words; threshold alone: ${free.speakers} speakers, ${pct(free.time)}`)
  t.equal(fixed.speakers, 3)
  t.ok(fixed.time >= 0.85, `${pct(fixed.time)} of speech time right`)
  t.ok(fixed.words >= 0.85, `${pct(fixed.words)} of words right`)
})

t.test("three voices from two engines (slt / rms / espeak en+m3), with and without numSpeakers", async (t) => {
  const { free, fixed } = await runDialogue(t, ["flite:slt", "flite:rms", "espeak:en+m3"], [400, 550, 300])
  t.comment(`threshold: ${free.speakers} speakers, ${pct(free.time)}; numSpeakers=3: ${pct(fixed.time)} of time, ${pct(fixed.words)} of words`)
  t.equal(free.speakers, 3)
  t.ok(free.time >= 0.85 && fixed.time >= 0.85)
})
