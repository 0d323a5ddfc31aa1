/**
 * The worker's side of recycled output buffers (engines/SpareBuffers.ts): which spare an output
 * takes, the cap on what a thread holds, and outputs that never show a spare's old samples.
 * Module state is per thread; this file's process is its only user.
 */
import t from "tap"
import fc from "fast-check"
import { addSpares, int16Output, joinIntoOutput, SPARE_MAX_BYTES, SPARE_MIN_BYTES, SPARES_HELD_BYTES, sparesHeld } from "../../engines/SpareBuffers.ts"

/** Takes every spare: an output of exactly a spare's size takes it. */
const drain = () => {
  for (const size of sparesHeld().sizes) int16Output(size / 2)
}

t.test("an output takes the smallest spare that fits; small outputs and small spares stay out", (t) => {
  drain()
  const a = new ArrayBuffer(64 * 1024)
  const b = new ArrayBuffer(256 * 1024)
  const c = new ArrayBuffer(128 * 1024)
  addSpares([a, b, c, new ArrayBuffer(SPARE_MIN_BYTES - 2)])
  t.match(sparesHeld(), { count: 3, bytes: 448 * 1024 }, "the buffer below the minimum was dropped")
  t.equal(int16Output(100).buffer.byteLength, 200, "an output below the minimum is exact and takes no spare")
  t.equal(int16Output(40_000).buffer, c, "80 KB fits the 128 KiB spare best")
  t.equal(int16Output(20_000).buffer, a)
  t.equal(int16Output(200_000).buffer.byteLength, 512 * 1024, "nothing fits 400 KB: a new buffer, rounded up to a power of two")
  t.equal(int16Output(100_000).buffer, b)
  t.equal(sparesHeld().count, 0)
  t.end()
})

t.test("a spare is taken only by an output that needs more than half of it; long outputs are exact and never held", (t) => {
  drain()
  const big = new ArrayBuffer(512 * 1024)
  addSpares([big])
  const piece = int16Output(11_025) // 0.5 s at 22050 Hz: 22 KB
  t.not(piece.buffer, big, "a streamed piece does not take a sentence's spare")
  t.equal(piece.buffer.byteLength, 32 * 1024)
  t.equal(int16Output(200_000).buffer, big, "a 400 KB sentence does")
  const long = int16Output(SPARE_MAX_BYTES) // twice the largest spare
  t.equal(long.buffer.byteLength, 2 * SPARE_MAX_BYTES, "exact, not rounded up")
  addSpares([long.buffer as ArrayBuffer])
  t.equal(sparesHeld().count, 0, "and not kept as a spare")
  t.end()
})

t.test("a thread holds at most SPARES_HELD_BYTES of spares", (t) => {
  drain()
  const size = 1024 * 1024
  addSpares(Array.from({ length: SPARES_HELD_BYTES / size + 3 }, () => new ArrayBuffer(size)))
  t.match(sparesHeld(), { count: SPARES_HELD_BYTES / size, bytes: SPARES_HELD_BYTES })
  drain()
  t.end()
})

t.test("joined outputs hold exactly their blocks, whatever a reused spare held before (property)", (t) => {
  fc.assert(fc.property(
    fc.array(fc.array(fc.integer({ min: -32768, max: 32767 }), { maxLength: 9000 }), { maxLength: 6 }),
    fc.integer({ min: 0, max: 4 }),
    (blocks, spares) => {
      // Spares full of a marker value: any of it showing through would be stale audio.
      addSpares(Array.from({ length: spares }, (_, i) => new Int16Array((i + 1) * 16 * 1024).fill(12345).buffer))
      const parts = blocks.map((b) => Int16Array.from(b))
      const out = joinIntoOutput(parts)
      const expected = parts.flatMap((p) => Array.from(p))
      drain()
      return out.length === expected.length && out.every((v, i) => v === expected[i]) && out.byteOffset === 0
    }
  ), { numRuns: 200 })
  t.pass("200 runs")
  t.end()
})
