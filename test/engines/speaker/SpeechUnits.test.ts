/**
 * Pause-bounded units and their statistics (engines/speaker/SpeechUnits.ts) on made-up audio
 * whose pauses are known: bursts of a voiced-like signal between silences, over a noise floor.
 */
import t from "tap"
import { mulberry32 } from "../../../engines/audio/Prng.ts"
import { speechUnits, STATS_WIDTH, UNIT_DIMENSION } from "../../../engines/speaker/SpeechUnits.ts"

const RATE = 16000

/** Harmonic bursts (150 Hz, 10 harmonics) at the given [start, end) seconds over −60 dBFS noise. */
const bursts = (seconds: number, spans: ReadonlyArray<readonly [number, number]>): Float32Array => {
  const random = mulberry32(9)
  const pcm = Float32Array.from({ length: Math.round(seconds * RATE) }, () => 0.001 * (random() - 0.5) * 3.4)
  for (const [a, b] of spans) {
    for (let i = Math.round(a * RATE); i < Math.round(b * RATE); i++) {
      let s = 0
      for (let h = 1; h <= 10; h++) s += Math.sin((2 * Math.PI * 150 * h * i) / RATE) / h
      pcm[i]! += 0.2 * s
    }
  }
  return pcm
}

const near = (ms: number, target: number, slack = 60) => Math.abs(ms - target) <= slack

t.test("pauses of 300 ms split a segment into its bursts", async (t) => {
  const pcm = bursts(4.5, [[0.5, 1.5], [1.8, 2.8], [3.1, 4.1]])
  const { units, stats } = speechUnits(pcm, [{ startMs: 300, endMs: 4300 }])
  t.equal(units.length, 3, JSON.stringify(units))
  const expected = [[500, 1500], [1800, 2800], [3100, 4100]]
  units.forEach((u, i) => t.ok(near(u.startMs, expected[i]![0]!) && near(u.endMs, expected[i]![1]!), `unit ${i} ${u.startMs}-${u.endMs}`))
  t.equal(stats.length, 3 * STATS_WIDTH)
  for (let u = 0; u < 3; u++) {
    const n = stats[u * STATS_WIDTH]!
    t.ok(n >= 90 && n <= 110, `unit ${u}: ${n} frames kept of about 100`)
    t.ok(Array.from(stats.subarray(u * STATS_WIDTH, (u + 1) * STATS_WIDTH)).every(Number.isFinite), "finite statistics")
  }
})

t.test("a 60 ms gap does not split; a long stretch is cut into parts of at most 3 s", async (t) => {
  const joined = speechUnits(bursts(3, [[0.5, 1.2], [1.26, 2]]), [{ startMs: 400, endMs: 2100 }]).units
  t.equal(joined.length, 1, "one unit across a 60 ms gap")
  const long = speechUnits(bursts(8, [[0.5, 7.5]]), [{ startMs: 400, endMs: 7600 }]).units
  t.equal(long.length, 3, JSON.stringify(long))
  t.ok(long.every((u) => u.endMs - u.startMs <= 3000), "each at most 3 s")
  t.ok(long.every((u, i) => i === 0 || u.startMs === long[i - 1]!.endMs), "parts abut")
})

t.test("several segments, a very short one, and silence", async (t) => {
  const pcm = bursts(6, [[0.5, 1.5], [3, 3.2], [4, 5]])
  const { units } = speechUnits(pcm, [{ startMs: 400, endMs: 1600 }, { startMs: 2950, endMs: 3250 }, { startMs: 3900, endMs: 5100 }])
  t.equal(units.length, 3, "one unit per segment here")
  t.ok(units[1]!.startMs >= 2950 && units[1]!.endMs <= 3250, "the short segment is its own unit, inside it")
  const silent = speechUnits(new Float32Array(RATE * 2), [{ startMs: 0, endMs: 2000 }])
  t.equal(silent.units.length, 1, "digital silence: the segment as one unit")
  t.equal(silent.stats[0], 0 + silent.stats[0]!, "with a count")
  t.same(speechUnits(pcm, []).units, [], "no segments, no units")
  t.equal(UNIT_DIMENSION, 16)
})
