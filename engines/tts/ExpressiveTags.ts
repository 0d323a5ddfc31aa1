/**
 * Expressive tags in request text (SPEC 2.4): parsing, and the segments the expressive path
 * synthesizes one at a time. Pure: no engine imports, so the main thread uses it too.
 *
 * Tags (case-insensitive, whitespace inside the brackets tolerated: `[ Raev ]`, `[/RAEV]`):
 *   - emotion blocks `[raev]` … `[/raev]`: raev fury, aukartus wonder, rahulolu serenity,
 *     sihikindlus resolve, kurbus sorrow, ehmatus astonishment;
 *   - style blocks: huue holler, sosin whisper, laul singing;
 *   - inline effects (one marker, no closing tag): naer chuckle, ohe exhale.
 *
 * Rules chosen where the spec is silent:
 *   - Placement: the spec puts block tags on their own lines; a tag anywhere else (mid-line) opens
 *     or closes its block at that position all the same. Line breaks are ordinary whitespace.
 *   - Emotion and style are two independent slots, so a style block inside an emotion block (and
 *     the reverse) combines both. Opening an emotion while another is open replaces it; the same
 *     for styles. Blocks may close in any order.
 *   - A closing tag whose name is not the open block of its kind (`[/kurbus]` inside `[raev]`,
 *     or with nothing open) is dropped. A block left open closes at the end of the text.
 *   - `[/naer]`, `[/ohe]`: dropped (effects have no closing tag).
 *   - Unknown bracketed words (a single word of letters/digits/`_`/`-` starting with a letter,
 *     optionally with a leading slash: `[laughs]`, `[/shouting]`) are DROPPED in tagged text:
 *     they are almost always directions written for another tag set, and reading them aloud
 *     would put the direction into the speech. Brackets around anything else (`[1]`,
 *     `[see above]`) are ordinary text. Text with no known tag is not touched at all (it takes
 *     the standard path, where the engine reads whatever is there).
 *   - Speech parts with no letter or digit (only punctuation between two tags) are not voiced.
 *
 * Offsets are UTF-16 indices into the request text, end exclusive. A speech part's `text` has
 * exactly `charEnd - charStart` characters: dropped tags inside it are blanked with spaces, so an
 * offset into the part's text plus `charStart` is an offset into the request.
 */
import { segmentSentences } from "../text/Segmenter.ts"

export const EMOTIONS = ["raev", "aukartus", "rahulolu", "sihikindlus", "kurbus", "ehmatus"] as const
export const STYLES = ["huue", "sosin", "laul"] as const
export const EFFECTS = ["naer", "ohe"] as const

export type Emotion = (typeof EMOTIONS)[number]
export type Style = (typeof STYLES)[number]
export type Effect = (typeof EFFECTS)[number]

export interface SpeechPart {
  readonly kind: "speech"
  readonly text: string
  readonly charStart: number
  readonly charEnd: number
  readonly emotion?: Emotion
  readonly style?: Style
}

export interface EffectPart {
  readonly kind: "effect"
  readonly effect: Effect
  /** Span of the marker itself. */
  readonly charStart: number
  readonly charEnd: number
}

export type ExpressivePart = SpeechPart | EffectPart

export interface ParsedExpressive {
  /** True when the text holds at least one known tag (opening or closing). */
  readonly tagged: boolean
  readonly parts: ReadonlyArray<ExpressivePart>
}

const isEmotion = (s: string): s is Emotion => (EMOTIONS as ReadonlyArray<string>).includes(s)
const isStyle = (s: string): s is Style => (STYLES as ReadonlyArray<string>).includes(s)
const isEffect = (s: string): s is Effect => (EFFECTS as ReadonlyArray<string>).includes(s)
const isKnown = (s: string) => isEmotion(s) || isStyle(s) || isEffect(s)

/** `[word]` or `[/word]`; group 1 = slash, group 2 = the word. */
const BRACKETED_WORD = /\[\s*(\/?)\s*(\p{L}[\p{L}\p{M}\p{N}_-]*)\s*\]/gu
const SPEAKABLE = /[\p{L}\p{N}]/u

/**
 * The bracketed words of `text`, in order. Not `text.matchAll`: that clones the regexp, and in
 * the service the clone was compiled anew on every request (V8 compiles this `\p{L}` pattern to
 * native code at once for subjects over 1,000 characters): 0.75-1 ms of main thread in front of
 * the first audio of every long text, which has no tags at all. The one module-level regexp
 * keeps its code; `lastIndex` is set before each search, so iterations may interleave.
 */
function* bracketedWords(text: string): Generator<RegExpExecArray> {
  if (!text.includes("[")) return
  let at = 0
  for (;;) {
    BRACKETED_WORD.lastIndex = at
    const m = BRACKETED_WORD.exec(text)
    if (m === null) return
    at = BRACKETED_WORD.lastIndex // past a match, which is never empty
    yield m
  }
}

/** Whether the text goes through the expressive path (any known tag, opening or closing). */
export const hasExpressiveTags = (text: string): boolean => {
  for (const m of bracketedWords(text)) if (isKnown(m[2]!.toLowerCase())) return true
  return false
}

export const parseExpressive = (text: string): ParsedExpressive => {
  const parts: Array<ExpressivePart> = []
  let emotion: Emotion | undefined
  let style: Style | undefined
  let tagged = false
  // The current run of speech text: [runStart, cursor) with dropped tags blanked.
  let runStart = 0
  let run = ""
  const flush = (end: number) => {
    let s = 0
    let e = run.length
    while (s < e && /\s/u.test(run[s]!)) s++
    while (e > s && /\s/u.test(run[e - 1]!)) e--
    const body = run.slice(s, e)
    if (SPEAKABLE.test(body)) {
      parts.push({
        kind: "speech",
        text: body,
        charStart: runStart + s,
        charEnd: runStart + e,
        ...(emotion !== undefined ? { emotion } : {}),
        ...(style !== undefined ? { style } : {})
      })
    }
    run = ""
    runStart = end
  }
  let cursor = 0
  for (const m of bracketedWords(text)) {
    const start = m.index
    const end = start + m[0].length
    const closing = m[1] === "/"
    const name = m[2]!.toLowerCase()
    run += text.slice(cursor, start)
    cursor = end
    if (!isKnown(name)) {
      run += " ".repeat(end - start) // unknown word: dropped, offsets kept
      continue
    }
    tagged = true
    // Every known tag ends the current speech run (in the state it was spoken in).
    flush(end)
    if (isEffect(name)) {
      if (!closing) parts.push({ kind: "effect", effect: name, charStart: start, charEnd: end })
    } else if (isEmotion(name)) {
      if (!closing) emotion = name
      else if (emotion === name) emotion = undefined
    } else if (isStyle(name)) {
      if (!closing) style = name
      else if (style === name) style = undefined
    }
  }
  run += text.slice(cursor)
  flush(text.length)
  return { tagged, parts }
}

/** One unit of synthesis on the expressive path: a span of the request and the parts in it. */
export interface ExpressiveSegment {
  readonly text: string
  /** UTF-16 span in the request; end exclusive. */
  readonly charStart: number
  readonly charEnd: number
  /** Offsets relative to `charStart` (so word timings come back relative to the segment). */
  readonly parts: ReadonlyArray<ExpressivePart>
}

/**
 * Splits parsed parts into segments for ordered (streamed) synthesis: each speech part is cut
 * into sentences (Segmenter rules, same limits as the standard path), every sentence starts a
 * segment, and effects ride with the sentence before them (the first sentence, when the text
 * starts with effects) so a chuckle right after its line is crossfaded onto it.
 */
export const expressiveSegments = (text: string, parts: ReadonlyArray<ExpressivePart>, locale: string): Array<ExpressiveSegment> => {
  const groups: Array<Array<ExpressivePart>> = []
  let leading: Array<ExpressivePart> = []
  for (const part of parts) {
    if (part.kind === "effect") {
      const last = groups[groups.length - 1]
      if (last === undefined) leading.push(part)
      else last.push(part)
      continue
    }
    for (const sentence of segmentSentences(part.text, { locale })) {
      const piece: SpeechPart = { ...part, text: sentence.text, charStart: part.charStart + sentence.charStart, charEnd: part.charStart + sentence.charEnd }
      if (!SPEAKABLE.test(piece.text)) continue
      groups.push([...leading, piece])
      leading = []
    }
  }
  if (leading.length > 0) groups.push(leading)
  return groups.map((group) => {
    const charStart = group[0]!.charStart
    const charEnd = group[group.length - 1]!.charEnd
    return {
      text: text.slice(charStart, charEnd),
      charStart,
      charEnd,
      parts: group.map((p) => ({ ...p, charStart: p.charStart - charStart, charEnd: p.charEnd - charStart }))
    }
  })
}
