/**
 * When buffered WebSocket text becomes a synthesis (SPEC 4.2, 8): at a sentence boundary once the
 * sentence holds at least 40 characters, or unconditionally at 240 characters, cut at the last
 * whitespace before 240 (mid-word only when there is none).
 *
 * Lengths are UTF-16 code units (JavaScript string length). "At least 40" counts the text before
 * the sentence's final punctuation, so 39 characters and a "." do not trigger, 40 do.
 *
 * A boundary is a terminator (. ! ? … and the Arabic, Devanagari, Ethiopic ones) followed by
 * optional closing quotes/brackets and then whitespace or the end of the buffer; CJK full stops
 * need no whitespace. Hazard: text arrives in token-sized pieces, so "3." at the end of the
 * buffer may become "3.5"; a "." after a digit at the very end waits for the next piece.
 * Abbreviations ("Dr.") are boundaries: with 40 characters before them that costs a pause, no more.
 *
 * Chunks keep their surrounding whitespace in `raw`, so the alignment of all chunks spells the
 * input exactly; `text` is what is synthesized.
 */

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
const TRAILING_PUNCTUATION = /[.!?…؟।॥።。！？｡"'”’»)\]」』]+$/u

/** A chunk of `raw`, or undefined when it is blank. */
export const toChunk = (raw: string): Chunk | undefined => {
  const lead = raw.length - raw.trimStart().length
  const text = raw.trim()
  return text.length === 0 ? undefined : { raw, text, lead }
}

/** End index of the first boundary that closes a long enough sentence, if it lies within `limit`. */
const qualifyingBoundary = (buffer: string, limit: number): number | undefined => {
  BOUNDARY.lastIndex = 0
  for (let m = BOUNDARY.exec(buffer); m !== null; m = BOUNDARY.exec(buffer)) {
    const end = m.index + m[0].length
    if (end > limit) return undefined
    if (end === buffer.length && m[0].startsWith(".") && /\d/u.test(buffer[m.index - 1] ?? "")) continue
    const sentence = buffer.slice(0, end).trim().replace(TRAILING_PUNCTUATION, "").trimEnd()
    if (sentence.length >= MIN_CHUNK_CHARS) return end
  }
  return undefined
}

/** Where to force a cut in a buffer of at least MAX_CHUNK_CHARS. */
const forcedCut = (buffer: string): number => {
  const window = buffer.slice(0, MAX_CHUNK_CHARS)
  let cut = -1
  for (let i = window.length - 1; i > 0; i--) {
    if (/\s/u.test(window[i]!)) {
      cut = i
      break
    }
  }
  if (cut > 0) return cut
  // No whitespace at all: cut mid-word, never inside a surrogate pair.
  return /[\uDC00-\uDFFF]/u.test(buffer[MAX_CHUNK_CHARS] ?? "") ? MAX_CHUNK_CHARS - 1 : MAX_CHUNK_CHARS
}

/** Cuts every chunk the rules allow off the front of `buffer`. */
export const takeChunks = (buffer: string): { readonly chunks: Array<Chunk>; readonly rest: string } => {
  const chunks: Array<Chunk> = []
  let rest = buffer
  for (;;) {
    let cut = qualifyingBoundary(rest, MAX_CHUNK_CHARS)
    if (cut === undefined && rest.length >= MAX_CHUNK_CHARS) cut = forcedCut(rest)
    if (cut === undefined) break
    const chunk = toChunk(rest.slice(0, cut))
    if (chunk !== undefined) chunks.push(chunk)
    rest = rest.slice(cut)
  }
  return { chunks, rest }
}
