/**
 * Probabilities → segments without the model: hysteresis, minimum speech and silence, padding
 * that meets in the middle, and the length cap cutting at the least speech-like frame.
 * Frames of 32 ms as Silero's; `p(...)` builds a probability track from runs.
 */
import t from "tap"
import { speechSegments, vadOptions, VAD_DEFAULTS } from "../../../engines/vad/SpeechSegments.ts"

const FRAME = 32
/** Runs of [frames, probability]. */
const p = (...runs: Array<[number, number]>) => Float32Array.from(runs.flatMap(([n, v]) => new Array<number>(n).fill(v)))
const ms = (frames: number) => frames * FRAME
const noPad = { padMs: 0 }

t.test("one island, exact frame edges", async (t) => {
  const probs = p([10, 0.05], [20, 0.9], [30, 0.05])
  t.same(speechSegments(probs, FRAME, ms(60), noPad), [{ startMs: ms(10), endMs: ms(30) }])
  t.same(speechSegments(probs, FRAME, ms(60)), [{ startMs: ms(10) - VAD_DEFAULTS.padMs, endMs: ms(30) + VAD_DEFAULTS.padMs }], `padded ${VAD_DEFAULTS.padMs} ms each side`)
})

t.test("hysteresis: a dip between the thresholds does not end speech", async (t) => {
  const probs = p([5, 0], [10, 0.9], [20, 0.4], [10, 0.9], [20, 0])
  t.same(speechSegments(probs, FRAME, ms(65), noPad), [{ startMs: ms(5), endMs: ms(45) }])
  t.same(speechSegments(p([5, 0], [20, 0.45], [20, 0]), FRAME, ms(45), noPad), [], "never above the start threshold: no speech")
})

t.test("short silences stay inside; long ones split", async (t) => {
  // 9 frames = 288 ms < 300 ms of silence: one segment. 10 frames = 320 ms: two.
  t.equal(speechSegments(p([3, 0], [10, 0.9], [9, 0.1], [10, 0.9], [3, 0]), FRAME, ms(35), noPad).length, 1)
  t.same(speechSegments(p([3, 0], [10, 0.9], [10, 0.1], [10, 0.9], [3, 0]), FRAME, ms(36), noPad), [
    { startMs: ms(3), endMs: ms(13) },
    { startMs: ms(23), endMs: ms(33) }
  ])
})

t.test("a silence that turns back into speech before min silence keeps counting from its start", async (t) => {
  // Below neg for 5 frames, then 0.4 (between thresholds) for 6: still silence since frame 13.
  const probs = p([3, 0], [10, 0.9], [5, 0.1], [6, 0.4], [10, 0.9], [3, 0])
  t.same(speechSegments(probs, FRAME, ms(37), noPad), [{ startMs: ms(3), endMs: ms(13) }, { startMs: ms(24), endMs: ms(34) }])
})

t.test("segments shorter than min speech are dropped", async (t) => {
  t.same(speechSegments(p([10, 0], [7, 0.9], [20, 0]), FRAME, ms(37), noPad), [], "224 ms < 250 ms")
  t.equal(speechSegments(p([10, 0], [8, 0.9], [20, 0]), FRAME, ms(38), noPad).length, 1, "256 ms ≥ 250 ms")
})

t.test("padding is clamped to the audio and meets in the middle of a short gap", async (t) => {
  const probs = p([1, 0], [10, 0.9], [11, 0], [10, 0.9])
  const [a, b] = speechSegments(probs, FRAME, ms(31) + 10, { padMs: 200 })
  t.same(a, { startMs: 0, endMs: Math.round((ms(11) + ms(22)) / 2) })
  t.same(b, { startMs: Math.round((ms(11) + ms(22)) / 2), endMs: ms(31) + 10 }, "speech to the end: clamped to the duration")
})

t.test("long segments are cut at the least speech-like frame, each at most the cap", async (t) => {
  // 40 s of speech with a 0.6 trough near 13 s and another near 27 s.
  const frames = Math.round(40_000 / FRAME)
  const probs = new Float32Array(frames).fill(0.95)
  const troughA = Math.round(13_000 / FRAME)
  const troughB = Math.round(27_000 / FRAME)
  probs[troughA] = 0.6
  probs[troughB] = 0.55
  const segments = speechSegments(probs, FRAME, ms(frames), noPad)
  t.equal(segments.length, 3)
  t.same(segments.map((s) => s.endMs).slice(0, 2), [(troughA + 0.5) * FRAME, (troughB + 0.5) * FRAME], "cut at the troughs' centres")
  t.ok(segments.every((s) => s.endMs - s.startMs <= VAD_DEFAULTS.maxSegmentMs), "every piece fits the cap")
  t.ok(segments.every((s, i) => i === 0 || s.startMs === segments[i - 1]!.endMs), "pieces abut")
  t.equal(segments[0]!.startMs, 0)
  t.equal(segments.at(-1)!.endMs, ms(frames))

  const flat = speechSegments(new Float32Array(Math.round(65_000 / FRAME)).fill(0.9), FRAME, 65_000, noPad)
  t.equal(flat.length, 4, "65 s with no trough: the fewest pieces (4) that fit")
  t.ok(flat.every((s) => s.endMs - s.startMs <= 20_000))
  const barely = speechSegments(new Float32Array(Math.round(20_500 / FRAME)).fill(0.9), FRAME, 20_500, noPad)
  t.equal(barely.length, 2)
  t.ok(barely.every((s) => s.endMs - s.startMs >= 5_000), `no sliver at the end: ${JSON.stringify(barely)}`)
})

t.test("options are checked; negThreshold follows threshold", async (t) => {
  t.equal(vadOptions({ threshold: 0.7 }).negThreshold, 0.7 - 0.15)
  t.equal(vadOptions({ threshold: 0.1 }).negThreshold, 0.01)
  t.throws(() => vadOptions({ threshold: 0.3, negThreshold: 0.5 }), RangeError)
  t.throws(() => vadOptions({ maxSegmentMs: 10 }), RangeError)
})
