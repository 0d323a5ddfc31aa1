/**
 * When WebSocket text becomes a synthesis (SPEC 4.2 thresholds), as a pure function. Lengths are
 * code points of what the buffer holds (the sentence with its punctuation, without the
 * whitespace around it).
 */
import fc from "fast-check"
import t from "tap"
import { MAX_CHUNK_CHARS, MIN_CHUNK_CHARS, takeChunks, toChunk } from "../../../engines/text/TextChunker.ts"
import { countCharacters } from "../../../engines/text/TextLength.ts"

const words = (n: number) => "word ".repeat(Math.ceil(n / 5)).slice(0, n)
const exactly = (n: number) => "a".repeat(n - 1) + "b"

t.test("a sentence of 39 characters counting its '.' waits; 40 counting it is cut at the boundary", async (t) => {
  t.same(takeChunks(`${exactly(38)}. More`).chunks, [])
  const { chunks, rest } = takeChunks(`${exactly(39)}. More`)
  t.same(chunks.map((c) => c.text), [`${exactly(39)}.`])
  t.equal(chunks[0]!.raw, `${exactly(39)}. `, "the space after the sentence goes with it")
  t.equal(rest, "More")
  t.equal(takeChunks(`   ${exactly(38)}. More`).chunks.length, 0, "whitespace before the sentence is not counted")
})

t.test("a boundary at the very end of the buffer counts, except a '.' after a digit", async (t) => {
  t.equal(takeChunks(`${exactly(40)}!`).chunks.length, 1)
  t.equal(takeChunks(`${exactly(40)} 3.`).chunks.length, 0, "may become 3.5")
  t.equal(takeChunks(`${exactly(40)} 3. `).chunks.length, 1)
  t.equal(takeChunks(`${exactly(40)} 3.5 more`).chunks.length, 0)
})

t.test("short sentences accumulate until one closes 40 characters", async (t) => {
  const text = "Hi. Yes. This sentence makes the buffer long enough now. Tail"
  const { chunks, rest } = takeChunks(text)
  t.same(chunks.map((c) => c.text), ["Hi. Yes. This sentence makes the buffer long enough now."])
  t.equal(rest, "Tail")
  t.same(takeChunks(`${text.slice(0, -4)}`).rest, "", "a sentence and the whitespace after it leave nothing blank behind for a flush")
})

t.test("at 240 characters the buffer is cut at the last space before 240", async (t) => {
  const text = words(250)
  const { chunks, rest } = takeChunks(text)
  t.equal(chunks.length, 1)
  const cut = text.lastIndexOf(" ", MAX_CHUNK_CHARS - 1)
  t.equal(chunks[0]!.raw, text.slice(0, cut))
  t.equal(rest, text.slice(cut))
  t.ok(chunks[0]!.raw.length < MAX_CHUNK_CHARS)
  t.same(takeChunks(words(239)).chunks, [], "239 characters wait")
})

t.test("without any space the forced cut is mid-word at 240 code points, never inside a surrogate pair", async (t) => {
  t.equal(takeChunks("x".repeat(300)).chunks[0]!.raw.length, 240)
  const emoji = "x".repeat(239) + "😀".repeat(5)
  const raw = takeChunks(emoji).chunks[0]!.raw
  t.equal(raw, "x".repeat(239) + "😀", "240 code points, 241 UTF-16 units")
  t.same(takeChunks("😀".repeat(239)).chunks, [], "239 emoji (478 UTF-16 units) wait")
  t.equal(takeChunks("😀".repeat(240)).chunks[0]!.raw, "😀".repeat(240))
})

t.test("chunks keep their whitespace in raw, so all raws spell the input", async (t) => {
  const text = `  ${exactly(45)}.  ${exactly(50)}? ${words(260)}`
  const { chunks, rest } = takeChunks(text)
  t.equal(chunks.map((c) => c.raw).join("") + rest, text)
  for (const c of chunks) t.equal(c.raw.slice(c.lead, c.lead + c.text.length), c.text)
})

t.test("CJK full stops need no following space; blank text is no chunk", async (t) => {
  const zh = "这".repeat(40) + "。" + "那"
  t.same(takeChunks(zh).chunks.map((c) => c.text), ["这".repeat(40) + "。"])
  t.equal(toChunk("   "), undefined)
})

// ---- properties -------------------------------------------------------------------------------

/** Pieces of text that exercise the rules: letters, emoji (two UTF-16 units), spaces, terminators. */
const piece = fc.constantFrom("a", "ö", "word", "😀", "𝐱", " ", "  ", "\n", ". ", "! ", "?", "…", "。", "3.", ".5", "\"", "”", "x".repeat(30))
const text = fc.array(piece, { maxLength: 200, size: "max" }).map((p) => p.join(""))
/** Sentence material of exactly `n` ≥ 2 code points: no terminator, no whitespace at either end. */
const letters = (n: number) =>
  fc.array(fc.constantFrom("a", "ö", "😀", "𝐱", " "), { minLength: n - 2, maxLength: n - 2 }).map((p) => `a${p.join("")}b`)
/** Lengths around both thresholds, and anywhere below 260. */
const length = fc.oneof(fc.integer({ min: 36, max: 44 }), fc.integer({ min: 236, max: 244 }), fc.integer({ min: 2, max: 260 }))
const NO_TERMINATOR = length.chain(letters)

const isSurrogateSplit = (s: string, i: number) => {
  const c = s.charCodeAt(i)
  return c >= 0xdc00 && c <= 0xdfff && i > 0 && s.charCodeAt(i - 1) >= 0xd800 && s.charCodeAt(i - 1) <= 0xdbff
}

t.test("property: a sentence is cut at its boundary exactly when it holds 40 code points counting its punctuation", async (t) => {
  fc.assert(
    fc.property(NO_TERMINATOR, fc.constantFrom(".", "!", "?", "…", "?!"), fc.constantFrom(" tail", "", " "), (body, stop, tail) => {
      const sentence = body + stop
      const n = countCharacters(sentence)
      fc.pre(n < MAX_CHUNK_CHARS)
      const { chunks } = takeChunks(sentence + tail)
      if (n >= MIN_CHUNK_CHARS) return chunks.length === 1 && chunks[0]!.text === sentence
      return chunks.length === 0
    }),
    { numRuns: 400 }
  )
  t.pass()
})

t.test("property: any text splits into chunks that spell it, each 1 to 240 code points, whole code points, and a rest that waits", async (t) => {
  fc.assert(
    fc.property(text, (input) => {
      const { chunks, rest } = takeChunks(input)
      if (chunks.map((c) => c.raw).join("") + rest !== input) return false
      let at = 0
      for (const c of chunks) {
        const n = countCharacters(c.text)
        if (n < 1 || n > MAX_CHUNK_CHARS || c.text !== c.text.trim()) return false
        at += c.raw.length
        if (isSurrogateSplit(input, at)) return false
      }
      // What is left holds under 240 code points and no qualifying boundary: taking again cuts nothing.
      return countCharacters(rest) < MAX_CHUNK_CHARS && takeChunks(rest).chunks.length === 0
    }),
    { numRuns: 400 }
  )
  t.pass()
})

t.test("property: without a boundary, 240 code points force a cut at the last whitespace before the 240th", async (t) => {
  fc.assert(
    fc.property(NO_TERMINATOR, NO_TERMINATOR, (a, b) => {
      const input = `${a} ${b}`
      const cps = Array.from(input)
      const first = takeChunks(input).chunks[0]
      if (cps.length < MAX_CHUNK_CHARS) return first === undefined
      const window = cps.slice(0, MAX_CHUNK_CHARS)
      let cut = -1
      for (let i = window.length - 1; i > 0; i--) if (/\s/u.test(window[i]!)) { cut = i; break }
      const expected = cut > 0 ? window.slice(0, cut).join("") : window.join("")
      return first !== undefined && first.raw === expected
    }),
    { numRuns: 300 }
  )
  t.pass()
})
