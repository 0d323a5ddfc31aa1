import t from "tap"
import { alignPhonesToWords, type TimedPhone } from "../../../engines/tts/PhoneAlignment.ts"

const timed = (names: string): Array<TimedPhone> => names.split(" ").map((name, i) => ({ name, startMs: i * 100, endMs: (i + 1) * 100 }))

t.test("exact match splits at word boundaries", async (t) => {
  const spans = alignPhonesToWords(timed("hh ax l ow w er l d"), [["hh", "ax", "l", "ow"], ["w", "er", "l", "d"]])
  t.same(spans, [{ startMs: 0, endMs: 400 }, { startMs: 400, endMs: 800 }])
})

t.test("context differences (doctor vs drive) stay local", async (t) => {
  // "Dr. Smith": said alone, "Dr." is d r ay v; in context it is d aa k t er.
  const spans = alignPhonesToWords(timed("d aa k t er s m ih th"), [["d", "r", "ay", "v"], ["s", "m", "ih", "th"]])
  t.same(spans, [{ startMs: 0, endMs: 500 }, { startMs: 500, endMs: 900 }])
})

t.test("a word without phones gets a zero-length span, order is kept", async (t) => {
  const spans = alignPhonesToWords(timed("a b c d"), [["a", "b"], [], ["c", "d"]])
  t.same(spans, [{ startMs: 0, endMs: 200 }, { startMs: 200, endMs: 200 }, { startMs: 200, endMs: 400 }])
  t.same(alignPhonesToWords([], [["a"], ["b"]]), [{ startMs: 0, endMs: 0 }, { startMs: 0, endMs: 0 }])
})

t.test("long sequences align inside the band", async (t) => {
  const words = Array.from({ length: 2000 }, (_, i) => [`p${i % 7}`, `q${i % 5}`, `r${i % 3}`])
  // Every 50th word is pronounced with an extra phone in context.
  const names = words.flatMap((w, i) => (i % 50 === 0 ? [...w, "x"] : w))
  const spans = alignPhonesToWords(timed(names.join(" ")), words)
  t.equal(spans.length, 2000)
  let ok = true
  let phone = 0
  words.forEach((w, i) => {
    const expected = { startMs: phone * 100, endMs: (phone + w.length + (i % 50 === 0 ? 1 : 0)) * 100 }
    if (spans[i]!.startMs !== expected.startMs || spans[i]!.endMs !== expected.endMs) ok = false
    phone += w.length + (i % 50 === 0 ? 1 : 0)
  })
  t.ok(ok, "every word gets exactly its phones (insertions go to the preceding word)")
})

t.test("hopeless mismatch falls back to proportional spans, still monotonic", async (t) => {
  const spans = alignPhonesToWords(timed(Array.from({ length: 600 }, () => "z").join(" ")), [Array(100).fill("a"), Array(100).fill("b")])
  t.equal(spans.length, 2)
  t.ok(spans[0]!.endMs <= spans[1]!.startMs && spans[1]!.endMs === 60_000)
})
