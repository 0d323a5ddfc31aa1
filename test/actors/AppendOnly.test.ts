/**
 * The append-only joining of chunk translations (actors/AppendOnly.ts): pieces of any size give
 * the same text as the whole, spacing is single whatever the engines put around their answers,
 * and a caller that keeps appending gets every word once, in order, never an edit of what it
 * already showed.
 */
import fc from "fast-check"
import t from "tap"
import { appendOnce, makeAppender } from "../../actors/AppendOnly.ts"

const streamed = (previous: string, pieces: ReadonlyArray<string>) => {
  const a = makeAppender(previous)
  return pieces.map((p) => a.push(p)).join("") + a.end()
}

t.test("a space between chunks, none before closing punctuation or after whitespace", async (t) => {
  t.equal(appendOnce("", " Hola mundo\n"), "Hola mundo")
  t.equal(appendOnce("Hola", "mundo"), " mundo")
  t.equal(appendOnce("Hola ", "mundo"), "mundo")
  t.equal(appendOnce("Hola", ", mundo"), ", mundo")
  t.equal(appendOnce("Hola", "?"), "?")
  t.equal(appendOnce("Hola", "   "), "", "whitespace alone appends nothing")
  t.equal(appendOnce("Hola", "Uno.\n\nDos."), " Uno.\n\nDos.", "inner whitespace is the engine's and stays")
})

t.test("streamed pieces hold back trailing whitespace until more text follows", async (t) => {
  const a = makeAppender("previo")
  t.equal(a.push("  "), "", "leading whitespace is dropped")
  t.equal(a.push("Hola "), " Hola")
  t.equal(a.push(" "), "")
  t.equal(a.push("mundo"), "  mundo", "held whitespace comes back before the next text")
  t.equal(a.push("\n"), "")
  t.equal(a.end(), "", "trailing whitespace is dropped at the end")
})

/** Words of a fake translation, with the whitespace engines put around and between them. */
const word = fc.stringMatching(/^[A-Za-zÀ-ÿ0-9']{1,8}$/)
const space = fc.constantFrom(" ", "  ", "\n", " \n", "\t")
const translation = fc.tuple(fc.constantFrom("", " ", "\n"), fc.array(word, { minLength: 1, maxLength: 8 }), space, fc.constantFrom("", " ", "\n"))
  .map(([lead, words, gap, trail]) => ({ words, text: lead + words.join(gap) + trail }))

t.test("property: streaming any split of a translation equals appending it whole", async () => {
  fc.assert(
    fc.property(fc.string({ maxLength: 20 }), translation, fc.array(fc.nat({ max: 40 }), { maxLength: 6 }), (previous, tr, cuts) => {
      const points = [...new Set(cuts.map((c) => c % (tr.text.length + 1)))].sort((a, b) => a - b)
      const pieces: Array<string> = []
      let from = 0
      for (const p of points) {
        pieces.push(tr.text.slice(from, p))
        from = p
      }
      pieces.push(tr.text.slice(from))
      return streamed(previous, pieces) === appendOnce(previous, tr.text)
    })
  )
})

t.test("property: a caller appending chunk after chunk gets every word once, in order, single-spaced, never rewritten", async (t) => {
  fc.assert(
    fc.property(fc.array(translation, { minLength: 1, maxLength: 10 }), (chunks) => {
      let shown = ""
      for (const c of chunks) {
        const before = shown
        shown += appendOnce(shown.slice(-50), c.text)
        if (!shown.startsWith(before)) return false
      }
      const words = chunks.flatMap((c) => c.words)
      return shown.split(/\s+/).join(" ") === words.join(" ") && !/^\s|\s$/.test(shown)
    })
  )
  t.pass()
})
