/**
 * Sentence segmentation for streamed synthesis (one engine call per segment).
 *
 * Uses `Intl.Segmenter` (ICU sentence rules, multilingual: "。", "؟", "।" end sentences too).
 * ICU does not know abbreviations, so "Dr. Smith" splits after "Dr."; pieces shorter than
 * `minChars` are therefore merged into the following one (the last into the previous), which
 * also avoids synthesizing "Yes." on its own with a full sentence-final pause. Pieces longer
 * than `maxChars` are cut at the last clause punctuation, else the last space, before the limit,
 * to bound time-to-first-audio. Offsets are UTF-16 indices into the input; segments are trimmed
 * of surrounding whitespace and never empty.
 *
 * Its sibling TextChunker.ts answers a different question: when text arriving piecewise over a
 * WebSocket is ready to become a synthesis at all. Plain functions, no `effect`: the worker
 * threads (PiperTts, ExpressiveTags) load this module.
 */

export interface Segment {
  readonly text: string
  /** UTF-16 offsets into the input; end exclusive. */
  readonly charStart: number
  readonly charEnd: number
}

export interface SegmentOptions {
  /** BCP 47 locale for the ICU rules; default "und" (root rules). */
  readonly locale?: string
  /** Pieces with fewer characters (after trimming) are merged with a neighbour. Default 20. */
  readonly minChars?: number
  /** Longer pieces are split. Default 400. */
  readonly maxChars?: number
}

const segmenters = new Map<string, Intl.Segmenter>()

const sentenceSegmenter = (locale: string): Intl.Segmenter => {
  let s = segmenters.get(locale)
  if (s === undefined) {
    s = new Intl.Segmenter(locale, { granularity: "sentence" })
    segmenters.set(locale, s)
  }
  return s
}

/** Trims whitespace off [start, end) and returns the inner span (empty when all whitespace). */
const trimSpan = (text: string, start: number, end: number): [number, number] => {
  while (start < end && /\s/u.test(text[start]!)) start++
  while (end > start && /\s/u.test(text[end - 1]!)) end--
  return [start, end]
}

export const segmentSentences = (text: string, options: SegmentOptions = {}): Array<Segment> => {
  const minChars = options.minChars ?? 20
  const maxChars = Math.max(options.maxChars ?? 400, 2)
  const raw: Array<[number, number]> = []
  for (const piece of sentenceSegmenter(options.locale ?? "und").segment(text)) {
    const span = trimSpan(text, piece.index, piece.index + piece.segment.length)
    if (span[1] > span[0]) raw.push(span)
  }
  const merged: Array<[number, number]> = []
  let pending: [number, number] | undefined
  for (const span of raw) {
    pending = pending === undefined ? span : [pending[0], span[1]]
    if (pending[1] - pending[0] >= minChars) {
      merged.push(pending)
      pending = undefined
    }
  }
  if (pending !== undefined) {
    const last = merged.pop()
    merged.push(last === undefined ? pending : [last[0], pending[1]])
  }
  const out: Array<Segment> = []
  for (const [s, e] of merged) for (const [a, b] of splitLong(text, s, e, maxChars)) out.push({ text: text.slice(a, b), charStart: a, charEnd: b })
  return out
}

const splitLong = (text: string, start: number, end: number, maxChars: number): Array<[number, number]> => {
  const parts: Array<[number, number]> = []
  while (end - start > maxChars) {
    const window = text.slice(start, start + maxChars)
    let cut = -1
    for (const m of window.matchAll(/[,;:—–)\]](?=\s)/gu)) cut = m.index + 1
    if (cut <= 0) cut = window.search(/\s\S*$/u)
    if (cut <= 0) {
      cut = maxChars
      if (/[\uDC00-\uDFFF]/.test(text[start + cut]!)) cut-- // never split a surrogate pair
    }
    const [a, b] = trimSpan(text, start, start + cut)
    if (b > a) parts.push([a, b])
    start = trimSpan(text, start + cut, end)[0]
  }
  if (end > start) parts.push([start, end])
  return parts
}
