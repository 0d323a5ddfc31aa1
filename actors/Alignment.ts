/**
 * ElevenLabs-style character alignment from engine word timings: every character of the text
 * gets a start and end time. Characters inside a word share the word's span in proportion to
 * their position; characters between words (spaces, punctuation) share the gap between them.
 * Times are seconds from `offsetMs` (the start of the whole response).
 */
import type { WordTiming } from "../engines/tts/TtsEngine.ts"

export interface CharacterAlignment {
  readonly characters: Array<string>
  readonly character_start_times_seconds: Array<number>
  readonly character_end_times_seconds: Array<number>
}

export const characterAlignment = (
  text: string,
  words: ReadonlyArray<WordTiming>,
  durationMs: number,
  offsetMs = 0
): CharacterAlignment => {
  // Spans cover the whole text in order: gap, word, gap, word, ..., gap.
  const spans: Array<{ from: number; to: number; startMs: number; endMs: number }> = []
  let cursor = 0
  let lastEnd = 0
  for (const w of words) {
    if (w.charStart < cursor || w.charEnd <= w.charStart) continue
    if (w.charStart > cursor) spans.push({ from: cursor, to: w.charStart, startMs: lastEnd, endMs: Math.max(lastEnd, w.startMs) })
    spans.push({ from: w.charStart, to: w.charEnd, startMs: Math.max(lastEnd, w.startMs), endMs: Math.max(lastEnd, w.endMs) })
    cursor = w.charEnd
    lastEnd = Math.max(lastEnd, w.endMs)
  }
  if (cursor < text.length) spans.push({ from: cursor, to: text.length, startMs: lastEnd, endMs: Math.max(lastEnd, durationMs) })
  const out: CharacterAlignment = { characters: [], character_start_times_seconds: [], character_end_times_seconds: [] }
  for (const s of spans) {
    const n = s.to - s.from
    const step = (s.endMs - s.startMs) / n
    for (let i = 0; i < n; i++) {
      out.characters.push(text[s.from + i]!)
      out.character_start_times_seconds.push(round((offsetMs + s.startMs + i * step) / 1000))
      out.character_end_times_seconds.push(round((offsetMs + s.startMs + (i + 1) * step) / 1000))
    }
  }
  return out
}

const round = (s: number) => Math.round(s * 1000) / 1000
