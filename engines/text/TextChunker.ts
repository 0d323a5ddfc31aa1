/**
 * When buffered WebSocket text becomes a synthesis (SPEC 4.2, 8): at a sentence boundary once the
 * buffer holds at least 40 characters, or unconditionally at 240 characters, cut at the last
 * whitespace before the 240th character (mid-word only when there is none).
 *
 * Characters are code points (TextLength.ts), as users and the credit count them: an emoji is one.
 * "Holds at least 40" counts what would be synthesized: the text up to and including the
 * boundary's punctuation (and closing quotes), without the whitespace around it. So 39 letters
 * and a "." make 40 and trigger; 38 and a "." wait.
 *
 * A boundary is a terminator (. ! ? … and the Arabic, Devanagari, Ethiopic ones) followed by
 * optional closing quotes/brackets and then whitespace or the end of the buffer; CJK full stops
 * need no whitespace. Hazard: text arrives in token-sized pieces, so "3." at the end of the
 * buffer may become "3.5"; a "." after a digit at the very end waits for the next piece.
 * Abbreviations ("Dr.") are boundaries: with 40 characters before them that costs a pause, no more.
 *
 * Chunks keep their surrounding whitespace in `raw` (a sentence takes the whitespace after it), so
 * the alignment of all chunks spells the input exactly; `text` is what is synthesized. Its sibling Segmenter.ts cuts a whole text into
 * sentences (streamed HTTP synthesis, the engines); this module decides when buffered text is
 * ready at all.
 */

import { countCharacters } from "./TextLength.ts"

export const MIN_CHUNK_CHARS = 40
export const MAX_CHUNK_CHARS = 240

export interface Chunk {
  /** The buffer slice, whitespace included. */
  readonly raw: string
  /** `raw` trimmed; never empty. */
  readonly text: string
  /** Index of `text` in `raw`. */
  readonly lead: number
}

const BOUNDARY = /[.!?…؟।॥።]+["'”’»)\]」』]*(?=\s|$)|[。！？｡]+["'”’»)\]」』]*/gu

/** UTF-16 index just after the first `n` code points of `s` (s.length when it holds fewer). */
const indexAfter = (s: string, n: number): number => {
  let i = 0
  for (let k = 0; k < n && i < s.length; k++) {
    const c = s.charCodeAt(i)
    const d = s.charCodeAt(i + 1)
    i += c >= 0xd800 && c <= 0xdbff && d >= 0xdc00 && d <= 0xdfff ? 2 : 1
  }
  return i
}

/** A chunk of `raw`, or undefined when it is blank. */
export const toChunk = (raw: string): Chunk | undefined => {
  const lead = raw.length - raw.trimStart().length
  const text = raw.trim()
  return text.length === 0 ? undefined : { raw, text, lead }
}

/**
 * End index of the first boundary that closes a long enough sentence, if it lies within `limit`
 * (a UTF-16 index).
 */
const qualifyingBoundary = (buffer: string, limit: number): number | undefined => {
  BOUNDARY.lastIndex = 0
  for (let m = BOUNDARY.exec(buffer); m !== null; m = BOUNDARY.exec(buffer)) {
    const end = m.index + m[0].length
    if (end > limit) return undefined
    if (end === buffer.length && m[0].startsWith(".") && /\d/u.test(buffer[m.index - 1] ?? "")) continue
    if (countCharacters(buffer.slice(0, end).trim()) >= MIN_CHUNK_CHARS) return end
  }
  return undefined
}

/**
 * Where to force a cut in a buffer of at least MAX_CHUNK_CHARS code points, `window` being the
 * UTF-16 index after the 240th: at the last whitespace inside the window, else at its end, which
 * lies between code points.
 */
const forcedCut = (buffer: string, window: number): number => {
  for (let i = window - 1; i > 0; i--) {
    if (/\s/u.test(buffer[i]!)) return i
  }
  return window
}

/** Cuts every chunk the rules allow off the front of `buffer`. */
export const takeChunks = (buffer: string): { readonly chunks: Array<Chunk>; readonly rest: string } => {
  const chunks: Array<Chunk> = []
  let rest = buffer
  for (;;) {
    const window = indexAfter(rest, MAX_CHUNK_CHARS)
    let cut = qualifyingBoundary(rest, window)
    // The whitespace after a sentence goes with it: left as the rest, a flush would find a blank
    // buffer and its characters would be missing from the alignment (which must spell the input).
    if (cut !== undefined) while (cut < window && /\s/u.test(rest[cut]!)) cut++
    // `window` < length: more than 240 code points; = length: exactly 240 or fewer.
    if (cut === undefined && (window < rest.length || countCharacters(rest) >= MAX_CHUNK_CHARS)) cut = forcedCut(rest, window)
    if (cut === undefined) break
    const chunk = toChunk(rest.slice(0, cut))
    if (chunk !== undefined) chunks.push(chunk)
    rest = rest.slice(cut)
  }
  return { chunks, rest }
}
