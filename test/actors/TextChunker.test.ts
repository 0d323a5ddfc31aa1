/**
 * When WebSocket text becomes a synthesis (SPEC 4.2 thresholds), as a pure function.
 */
import t from "tap"
import { MAX_CHUNK_CHARS, takeChunks, toChunk } from "../../actors/TextChunker.ts"

const words = (n: number) => "word ".repeat(Math.ceil(n / 5)).slice(0, n)
const exactly = (n: number) => "a".repeat(n - 1) + "b"

t.test("a sentence of 39 characters before its '.' waits; 40 is cut at the boundary", async (t) => {
  t.same(takeChunks(`${exactly(39)}. More`).chunks, [])
  const { chunks, rest } = takeChunks(`${exactly(40)}. More`)
  t.same(chunks.map((c) => c.text), [`${exactly(40)}.`])
  t.equal(rest, " More")
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
  t.equal(rest, " Tail")
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

t.test("without any space the forced cut is mid-word at 240, never inside a surrogate pair", async (t) => {
  t.equal(takeChunks("x".repeat(300)).chunks[0]!.raw.length, 240)
  const emoji = "x".repeat(239) + "😀".repeat(5)
  const raw = takeChunks(emoji).chunks[0]!.raw
  t.equal(raw.length, 239)
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
