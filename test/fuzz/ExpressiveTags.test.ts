/**
 * Property tests of the expressive-tag parser (engines/tts/ExpressiveTags.ts) on random text rich
 * in brackets, slashes, known and unknown tag names, whitespace and astral characters: it never
 * throws, parts come in text order without overlap and inside the text, a speech part's text is
 * its span of the request with only dropped tags blanked, and segments keep those offsets.
 */
import fc from "fast-check"
import t from "tap"
import { EFFECTS, EMOTIONS, expressiveSegments, hasExpressiveTags, parseExpressive, STYLES } from "../../engines/tts/ExpressiveTags.ts"

const names = [...EMOTIONS, ...STYLES, ...EFFECTS]
const tagArb = fc.tuple(
  fc.constantFrom("[", "[ ", "[\n"),
  fc.constantFrom("", "/", " / "),
  fc.oneof(fc.constantFrom(...names), fc.constantFrom(...names).map((n) => n.toUpperCase()), fc.constantFrom("laughs", "x1", "see above", "1", "", "é", "raev]", "[raev")),
  fc.constantFrom("]", " ]", "")
).map((p) => p.join(""))
const pieceArb = fc.oneof(
  { weight: 3, arbitrary: tagArb },
  { weight: 3, arbitrary: fc.string({ maxLength: 12 }) },
  { weight: 1, arbitrary: fc.constantFrom("[", "]", "/", " ", "\n", ".", "!", "?", "😀", "\u0301", "\ud800", "Tere. ", "Mr. ", "…") },
  { weight: 1, arbitrary: fc.string({ unit: "grapheme", maxLength: 6 }) }
)
const textArb = fc.array(pieceArb, { maxLength: 30 }).map((a) => a.join(""))

t.test("parseExpressive: never throws; parts are ordered, disjoint and inside the text", async (t) => {
  fc.assert(fc.property(textArb, (text) => {
    const { tagged, parts } = parseExpressive(text)
    if (tagged !== hasExpressiveTags(text)) throw new Error("tagged disagrees with hasExpressiveTags")
    let last = 0
    for (const p of parts) {
      if (!(Number.isInteger(p.charStart) && Number.isInteger(p.charEnd))) throw new Error("non-integer offset")
      if (p.charStart < last || p.charEnd < p.charStart || p.charEnd > text.length) throw new Error(`part out of order or bounds: ${JSON.stringify(p)}`)
      last = p.charEnd
      if (p.kind === "speech") {
        if (p.text.length !== p.charEnd - p.charStart) throw new Error("speech text length differs from its span")
        const span = text.slice(p.charStart, p.charEnd)
        // Same characters except where a dropped bracketed word was blanked with spaces.
        for (let i = 0; i < span.length; i++) {
          if (p.text[i] !== span[i] && p.text[i] !== " ") throw new Error(`speech text is not its span: ${JSON.stringify([p.text, span])}`)
        }
        if (!/[\p{L}\p{N}]/u.test(p.text)) throw new Error("an unspeakable part was voiced")
        if (/^\s|\s$/u.test(p.text)) throw new Error("speech part not trimmed")
      } else {
        if (!/^\[\s*[\p{L}]/u.test(text.slice(p.charStart, p.charEnd))) throw new Error("effect span is not a tag")
      }
    }
    if (!tagged && parts.some((p) => p.kind === "effect" || p.emotion !== undefined || p.style !== undefined)) throw new Error("untagged text with expressive parts")
  }), { seed: 0xe1, numRuns: 1000 })
  t.pass("1000 texts")
})

t.test("parseExpressive: every letter or digit outside a bracketed word is spoken, in order", async (t) => {
  fc.assert(fc.property(textArb, (text) => {
    const { parts } = parseExpressive(text)
    // Blank every bracketed word (known or unknown): what remains with letters must be covered.
    const outside = text.replace(/\[\s*\/?\s*\p{L}[\p{L}\p{M}\p{N}_-]*\s*\]/gu, (m) => " ".repeat(m.length))
    const covered = new Array<boolean>(text.length).fill(false)
    for (const p of parts) if (p.kind === "speech") for (let i = p.charStart; i < p.charEnd; i++) covered[i] = true
    for (let i = 0; i < outside.length; i++) {
      if (/[\p{L}\p{N}]/u.test(outside[i]!) && !covered[i]) throw new Error(`character ${i} (${JSON.stringify(outside[i])}) is not spoken`)
    }
  }), { seed: 0xe2, numRuns: 1000 })
  t.pass("1000 texts")
})

t.test("expressiveSegments: never throws; segments are ordered spans whose parts stay inside them", async (t) => {
  fc.assert(fc.property(textArb, fc.constantFrom("et", "en", "de", "xx"), (text, locale) => {
    const { parts } = parseExpressive(text)
    const segments = expressiveSegments(text, parts, locale)
    let last = 0
    let speechChars = 0
    for (const s of segments) {
      if (s.charStart < last || s.charEnd < s.charStart || s.charEnd > text.length) throw new Error(`segment out of order or bounds: ${JSON.stringify(s)}`)
      last = s.charEnd
      if (s.text !== text.slice(s.charStart, s.charEnd)) throw new Error("segment text is not its span")
      if (s.parts.length === 0) throw new Error("empty segment")
      for (const p of s.parts) {
        if (p.charStart < 0 || p.charEnd > s.charEnd - s.charStart || p.charEnd < p.charStart) throw new Error(`part outside its segment: ${JSON.stringify(p)}`)
        if (p.kind === "speech") {
          speechChars += p.text.replace(/[^\p{L}\p{N}]/gu, "").length
          if (p.text.length !== p.charEnd - p.charStart) throw new Error("segment speech part length differs from its span")
        }
      }
    }
    const parsedSpeech = parts.reduce((n, p) => n + (p.kind === "speech" ? p.text.replace(/[^\p{L}\p{N}]/gu, "").length : 0), 0)
    if (speechChars !== parsedSpeech) throw new Error(`segments lost speech: ${speechChars} of ${parsedSpeech} letters`)
    const effects = segments.flatMap((s) => s.parts.filter((p) => p.kind === "effect")).length
    if (effects !== parts.filter((p) => p.kind === "effect").length) throw new Error("segments lost an effect")
  }), { seed: 0xe3, numRuns: 500 })
  t.pass("500 texts")
})
