/**
 * Word error rate for speech round trips: word-level Levenshtein distance (substitutions,
 * insertions, deletions, each 1) between a reference and a hypothesis after normalisation
 * (lower case, apostrophes kept inside words, other punctuation dropped).
 */

/** Lower-cased words; "It's" stays one word, "well." loses its full stop. */
export const normalizeWords = (text: string): Array<string> =>
  text
    .toLowerCase()
    .replace(/[’‘]/g, "'")
    .replace(/[^a-z0-9' ]+/g, " ")
    .split(/\s+/)
    .map((w) => w.replace(/^'+|'+$/g, ""))
    .filter((w) => w.length > 0)

/** Minimum number of word edits turning `reference` into `hypothesis`. */
export const wordEditDistance = (reference: ReadonlyArray<string>, hypothesis: ReadonlyArray<string>): number => {
  let previous = Array.from({ length: hypothesis.length + 1 }, (_, j) => j)
  for (let i = 1; i <= reference.length; i++) {
    const current = [i]
    for (let j = 1; j <= hypothesis.length; j++) {
      const substitution = previous[j - 1]! + (reference[i - 1] === hypothesis[j - 1] ? 0 : 1)
      current[j] = Math.min(substitution, previous[j]! + 1, current[j - 1]! + 1)
    }
    previous = current
  }
  return previous[hypothesis.length]!
}

export interface WerTally {
  readonly errors: number
  readonly words: number
}

/** Errors and reference words of one utterance; sum tallies before dividing (corpus WER). */
export const tally = (reference: string, hypothesis: string): WerTally => {
  const ref = normalizeWords(reference)
  return { errors: wordEditDistance(ref, normalizeWords(hypothesis)), words: ref.length }
}

export const wer = (tallies: ReadonlyArray<WerTally>): number => {
  const words = tallies.reduce((n, t) => n + t.words, 0)
  return words === 0 ? 0 : tallies.reduce((n, t) => n + t.errors, 0) / words
}
