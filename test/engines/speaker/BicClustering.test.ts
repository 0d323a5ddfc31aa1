/**
 * BIC clustering (engines/speaker/BicClustering.ts) on statistics of synthetic Gaussian frames,
 * where the truth is known: two sources are two clusters, one source cut into many units is one,
 * a given count is honoured, short units are set aside, and any input gives well-formed labels.
 */
import fc from "fast-check"
import t from "tap"
import { mulberry32 } from "../../../engines/audio/Prng.ts"
import { bicCluster } from "../../../engines/speaker/BicClustering.ts"
import { unitTurns } from "../../../engines/speaker/Diarizer.ts"

const D = 4
const WIDTH = 1 + D + (D * (D + 1)) / 2

/** Statistics of `frames` Gaussian frames around `mean` (unit variance, some correlation). */
const unitStats = (random: () => number, mean: ReadonlyArray<number>, frames: number): Float64Array => {
  const row = new Float64Array(WIDTH)
  const gauss = () => Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random())
  for (let f = 0; f < frames; f++) {
    const z = Array.from({ length: D }, gauss)
    const x = z.map((v, i) => mean[i]! + v + (i > 0 ? 0.5 * z[i - 1]! : 0))
    row[0]! += 1
    let k = 1 + D
    for (let p = 0; p < D; p++) {
      row[1 + p]! += x[p]!
      for (let q = p; q < D; q++) row[k++]! += x[p]! * x[q]!
    }
  }
  return row
}

const concat = (rows: ReadonlyArray<Float64Array>) => {
  const out = new Float64Array(rows.length * WIDTH)
  rows.forEach((r, i) => out.set(r, i * WIDTH))
  return out
}

const A = [0, 0, 0, 0]
const B = [2.5, -2, 1.5, 0]
const C = [-2, 2, -2, 2]

t.test("two sources in alternating units are two clusters, named in order of appearance", async (t) => {
  const random = mulberry32(1)
  const sources = [A, B, A, A, B, A, B, B, A, B]
  const labels = bicCluster(concat(sources.map((m) => unitStats(random, m, 150))), sources.length, D)
  t.same(Array.from(labels), sources.map((m) => (m === A ? 0 : 1)))
})

t.test("one source cut into twelve units stays one cluster", async (t) => {
  const random = mulberry32(2)
  const labels = bicCluster(concat(Array.from({ length: 12 }, () => unitStats(random, A, 120))), 12, D)
  t.same(new Set(labels), new Set([0]))
})

t.test("a given count is honoured both ways", async (t) => {
  const random = mulberry32(3)
  const sources = [A, B, C, A, B, C, A, B, C]
  const stats = concat(sources.map((m) => unitStats(random, m, 150)))
  t.same(Array.from(bicCluster(stats, 9, D)), [0, 1, 2, 0, 1, 2, 0, 1, 2], "three found by the criterion")
  t.equal(new Set(bicCluster(stats, 9, D, { numSpeakers: 2 })).size, 2, "merged down to two")
  const one = concat(Array.from({ length: 6 }, () => unitStats(random, A, 150)))
  t.equal(new Set(bicCluster(one, 6, D, { numSpeakers: 3 })).size, 3, "split up to three")
})

t.test("units with too few frames are set aside; too many units merge neighbours first", async (t) => {
  const random = mulberry32(4)
  const rows = [unitStats(random, A, 150), unitStats(random, B, 10), unitStats(random, B, 150), unitStats(random, A, 3)]
  t.same(Array.from(bicCluster(concat(rows), 4, D)), [0, -1, 1, -1])
  const sources = [A, A, A, B, B, B, A, A, A, B, B, B]
  const capped = bicCluster(concat(sources.map((m) => unitStats(random, m, 150))), sources.length, D, { maxClusters: 4 })
  t.same(Array.from(capped), sources.map((m) => (m === A ? 0 : 1)), "with a matrix of 4 the runs still come out right")
})

t.test("bad input is a RangeError", async (t) => {
  t.throws(() => bicCluster(new Float64Array(5), 1, D), RangeError)
  t.throws(() => bicCluster(new Float64Array(WIDTH), 1, D, { numSpeakers: 0 }), RangeError)
})

t.test("property: any statistics give one label per unit, 0…k−1 in order of appearance", async () => {
  fc.assert(
    fc.property(
      fc.array(fc.record({ source: fc.integer({ min: 0, max: 2 }), frames: fc.integer({ min: 0, max: 200 }) }), { maxLength: 25 }),
      fc.option(fc.integer({ min: 1, max: 4 }), { nil: undefined }),
      fc.integer(),
      (units, numSpeakers, seed) => {
        const random = mulberry32(seed)
        const stats = concat(units.map((u) => unitStats(random, [A, B, C][u.source]!, u.frames)))
        const labels = Array.from(bicCluster(stats, units.length, D, numSpeakers !== undefined ? { numSpeakers } : {}))
        if (labels.length !== units.length) return false
        const seen = labels.filter((l) => l >= 0)
        const firsts = seen.filter((l, i) => seen.indexOf(l) === i)
        if (!firsts.every((l, i) => l === i)) return false
        const clusterable = units.filter((u) => u.frames >= 40).length
        if (numSpeakers !== undefined && firsts.length !== Math.min(numSpeakers, clusterable)) return false
        return labels.every((l, i) => (units[i]!.frames >= 40) === (l >= 0))
      }
    ),
    { numRuns: 200 }
  )
})

t.test("unitTurns: set-aside units take the nearest label, touching units join, names by appearance", async (t) => {
  const units = [
    { startMs: 0, endMs: 1000 },
    { startMs: 1000, endMs: 1500 },
    { startMs: 1700, endMs: 2500 },
    { startMs: 2500, endMs: 3000 },
    { startMs: 4000, endMs: 4200 }
  ]
  const { turns, speakers } = unitTurns(units, [1, 1, 0, -1, -1])
  t.same(speakers, ["speaker_0", "speaker_0", "speaker_1", "speaker_1", "speaker_1"])
  t.same(turns, [
    { startMs: 0, endMs: 1500, speaker: "speaker_0" },
    { startMs: 1700, endMs: 3000, speaker: "speaker_1" },
    { startMs: 4000, endMs: 4200, speaker: "speaker_1" }
  ])
  t.same(unitTurns(units, [-1, -1, -1, -1, -1]).speakers, Array(5).fill("speaker_0"), "nothing clusterable: one speaker")
})
