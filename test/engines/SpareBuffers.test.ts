/**
 * The worker's side of recycled output buffers (engines/SpareBuffers.ts): which spare an output
 * takes, the cap on what a thread holds, and outputs that never show a spare's old samples.
 * Module state is per thread; this file's process is its only user.
 */
import t from "tap"
import fc from "fast-check"
import { addSpares, int16Output, joinIntoOutput, SPARE_MIN_BYTES, SPARES_HELD_BYTES, sparesHeld } from "../../engines/SpareBuffers.ts"

/** Takes every spare: each output of the minimum size takes the smallest one left. */
const drain = () => {
  while (sparesHeld().count > 0) int16Output(SPARE_MIN_BYTES / 2)
}

t.test("an output takes the smallest spare that fits; small outputs and small spares stay out", (t) => {
  drain()
  const a = new ArrayBuffer(64 * 1024)
  const b = new ArrayBuffer(256 * 1024)
  const c = new ArrayBuffer(128 * 1024)
  addSpares([a, b, c, new ArrayBuffer(SPARE_MIN_BYTES - 2)])
  t.same(sparesHeld(), { count: 3, bytes: 448 * 1024 }, "the buffer below the minimum was dropped")
  t.equal(int16Output(100).buffer.byteLength, 200, "an output below the minimum is exact and takes no spare")
  t.equal(int16Output(40_000).buffer, c, "80 KB fits the 128 KiB spare best")
  t.equal(int16Output(20_000).buffer, a)
  t.equal(int16Output(200_000).buffer.byteLength, 512 * 1024, "nothing fits 400 KB: a new buffer, rounded up to a power of two")
  t.equal(int16Output(100_000).buffer, b)
  t.equal(sparesHeld().count, 0)
  t.end()
})

t.test("a thread holds at most SPARES_HELD_BYTES of spares", (t) => {
  drain()
  const size = 1024 * 1024
  addSpares(Array.from({ length: SPARES_HELD_BYTES / size + 3 }, () => new ArrayBuffer(size)))
  t.same(sparesHeld(), { count: SPARES_HELD_BYTES / size, bytes: SPARES_HELD_BYTES })
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
