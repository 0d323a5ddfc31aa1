/**
 * Sentence units of a transcript without punctuation. The recogniser writes lower-case words and
 * no full stops, so a "sentence" here is a run of words between pauses: a new unit starts where
 * the silence between two words is at least `pauseS`, where the speaker changes, and a unit that
 * grows past `maxWords` is cut at its longest internal pause. Transcripts without times (granularity
 * `none`) are cut every `fallbackWords` words. A unit's text is its words joined by single spaces,
 * exactly as they appear in the transcript's `text`.
 */
import type { SummaryWord } from "./Summarizer.ts"

export interface SentenceUnit {
  /** Index in spoken order. */
  readonly index: number
  readonly words: ReadonlyArray<SummaryWord>
  readonly text: string
  readonly speaker: string | undefined
  /** Seconds, when the words carry times. */
  readonly start: number | undefined
  readonly end: number | undefined
}

export interface SentenceOptions {
  /** Silence that ends a unit, s. 0.45 s: longer than the gaps inside a phrase in read and conversational speech. */
  readonly pauseS: number
  readonly maxWords: number
  readonly fallbackWords: number
}

export const DEFAULT_SENTENCE_OPTIONS: SentenceOptions = { pauseS: 0.45, maxWords: 40, fallbackWords: 20 }

const gapAfter = (words: ReadonlyArray<SummaryWord>, i: number): number => {
  const a = words[i]?.end
  const b = words[i + 1]?.start
  return a === undefined || b === undefined ? 0 : b - a
}

/**
 * Cuts `words` (one unit's worth) at the longest pause until every piece has at most `max` words.
 * The cut is looked for in the middle half only (ties: nearest the middle), so each cut at least
 * quarters the run: a run of n words costs O(n log n) and never recurses deeper than log n, even
 * when an aligner leaves no pause at all between thousands of words.
 */
const cutLong = (words: ReadonlyArray<SummaryWord>, max: number, timed: boolean): Array<ReadonlyArray<SummaryWord>> => {
  const out: Array<ReadonlyArray<SummaryWord>> = []
  const pending: Array<ReadonlyArray<SummaryWord>> = [words]
  while (pending.length > 0) {
    const run = pending.pop()!
    if (run.length <= max) {
      out.push(run)
      continue
    }
    const middle = Math.floor(run.length / 2) - 1
    let at = middle
    if (timed) {
      let best = -Infinity
      for (let i = Math.floor(run.length / 4); i < Math.ceil((3 * run.length) / 4) - 1; i++) {
        const g = gapAfter(run, i)
        if (g > best || (g === best && Math.abs(i - middle) < Math.abs(at - middle))) (best = g), (at = i)
      }
    }
    // Right half first onto the stack, so pieces come off in spoken order.
    pending.push(run.slice(at + 1), run.slice(0, at + 1))
  }
  return out
}

export const sentenceUnits = (words: ReadonlyArray<SummaryWord>, options: SentenceOptions = DEFAULT_SENTENCE_OPTIONS): Array<SentenceUnit> => {
  const spoken = words.filter((w) => w.text.trim() !== "")
  const timed = spoken.length > 0 && spoken.every((w) => w.start !== undefined && w.end !== undefined)
  const runs: Array<Array<SummaryWord>> = []
  let run: Array<SummaryWord> = []
  spoken.forEach((w, i) => {
    if (run.length > 0) {
      const breaks = timed
        ? gapAfter(spoken, i - 1) >= options.pauseS || w.speaker !== spoken[i - 1]!.speaker
        : run.length >= options.fallbackWords || w.speaker !== spoken[i - 1]!.speaker
      if (breaks) runs.push(run), (run = [])
    }
    run.push(w)
  })
  if (run.length > 0) runs.push(run)
  return runs.flatMap((r) => cutLong(r, options.maxWords, timed)).map((unitWords, index) => ({
    index,
    words: unitWords,
    text: unitWords.map((w) => w.text.trim()).join(" "),
    speaker: unitWords[0]!.speaker,
    start: unitWords[0]!.start,
    end: unitWords[unitWords.length - 1]!.end
  }))
}
