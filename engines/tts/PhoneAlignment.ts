/**
 * Groups a synthesizer's timed phones into words when the synthesizer does not say which phone
 * belongs to which word (Flite's `-psdur`).
 *
 * Input: the timed phone sequence of the whole utterance, and per word the phones that word gets
 * when said alone. The two rarely differ (context-dependent normalisation: "Dr." alone is
 * "drive", in "Dr. Smith" it is "doctor"), so they are aligned by edit distance (match 0,
 * substitution/insertion/deletion 1) inside a diagonal band of ±(|m−n| + 128) phones, which
 * keeps memory at O((m+n)·band) bytes for 8000-character texts. Phones the alignment inserts go
 * to the word of the previous aligned phone. A word left without phones gets a zero-length span
 * at the end of the previous word, so timings stay monotonic and every word is present.
 */

export interface TimedPhone {
  readonly name: string
  /** ms */
  readonly startMs: number
  readonly endMs: number
}

export interface WordSpan {
  /** ms */
  readonly startMs: number
  readonly endMs: number
}

const BAND_MARGIN = 128
const DIAG = 0
const UP = 1 // consume a timed phone only (insertion)
const LEFT = 2 // consume an expected phone only (deletion)

/** Returns one span per entry of `expected`, in order. */
export const alignPhonesToWords = (timed: ReadonlyArray<TimedPhone>, expected: ReadonlyArray<ReadonlyArray<string>>): Array<WordSpan> => {
  const ref: Array<string> = []
  const owner: Array<number> = []
  expected.forEach((phones, w) => {
    for (const p of phones) {
      ref.push(p)
      owner.push(w)
    }
  })
  const m = timed.length
  const n = ref.length
  const assigned = new Int32Array(m).fill(-1)
  if (m > 0 && n > 0 && !alignBanded(timed, ref, owner, assigned)) {
    // Outside the band: spread phones over words in proportion to their expected phone counts.
    for (let i = 0; i < m; i++) assigned[i] = owner[Math.min(n - 1, Math.floor((i * n) / m))]!
  }
  // Insertions inherit the word of the previous aligned phone (or the next one at the start).
  let lastOwner = -1
  for (let i = 0; i < m; i++) {
    if (assigned[i]! >= 0) lastOwner = assigned[i]!
    else assigned[i] = lastOwner
  }
  let nextOwner = -1
  for (let i = m - 1; i >= 0; i--) {
    if (assigned[i]! >= 0) nextOwner = assigned[i]!
    else assigned[i] = nextOwner
  }
  const starts = new Array<number>(expected.length).fill(Infinity)
  const ends = new Array<number>(expected.length).fill(-Infinity)
  for (let i = 0; i < m; i++) {
    const w = assigned[i]!
    if (w < 0) continue
    starts[w] = Math.min(starts[w]!, timed[i]!.startMs)
    ends[w] = Math.max(ends[w]!, timed[i]!.endMs)
  }
  let previousEnd = 0
  return expected.map((_, w) => {
    if (starts[w] === Infinity) return { startMs: previousEnd, endMs: previousEnd }
    const startMs = Math.max(starts[w]!, previousEnd)
    const endMs = Math.max(ends[w]!, startMs)
    previousEnd = endMs
    return { startMs, endMs }
  })
}

/** Banded edit-distance alignment; writes the word index of each matched/substituted phone. */
const alignBanded = (timed: ReadonlyArray<TimedPhone>, ref: ReadonlyArray<string>, owner: ReadonlyArray<number>, out: Int32Array): boolean => {
  const m = timed.length
  const n = ref.length
  const band = Math.abs(m - n) + BAND_MARGIN
  const width = 2 * band + 1
  // Column j of row i is stored at (j - lo(i)); lo(i) follows the diagonal j ≈ i·n/m.
  const lo = (i: number) => Math.round((i * n) / m) - band
  const cost = new Float64Array((m + 1) * width).fill(Infinity)
  const move = new Uint8Array((m + 1) * width)
  const at = (i: number, j: number) => {
    const k = j - lo(i)
    return k >= 0 && k < width ? i * width + k : -1
  }
  for (let j = 0; j <= n; j++) {
    const c = at(0, j)
    if (c >= 0) {
      cost[c] = j
      move[c] = LEFT
    }
  }
  for (let i = 1; i <= m; i++) {
    const from = Math.max(0, lo(i))
    const to = Math.min(n, lo(i) + width - 1)
    for (let j = from; j <= to; j++) {
      const c = at(i, j)
      let best = Infinity
      let how = DIAG
      const up = at(i - 1, j)
      if (up >= 0 && cost[up]! + 1 < best) {
        best = cost[up]! + 1
        how = UP
      }
      if (j > 0) {
        const diag = at(i - 1, j - 1)
        if (diag >= 0) {
          const d = cost[diag]! + (timed[i - 1]!.name === ref[j - 1] ? 0 : 1)
          if (d <= best) {
            best = d
            how = DIAG
          }
        }
        const left = at(i, j - 1)
        if (left >= 0 && cost[left]! + 1 < best) {
          best = cost[left]! + 1
          how = LEFT
        }
      }
      cost[c] = best
      move[c] = how
    }
  }
  let i = m
  let j = n
  if (at(i, j) < 0 || cost[at(i, j)] === Infinity) return false
  while (i > 0 || j > 0) {
    const how = move[at(i, j)]!
    if (i > 0 && j > 0 && how === DIAG) {
      out[i - 1] = owner[j - 1]!
      i--
      j--
    } else if (i > 0 && (how === UP || j === 0)) i--
    else j--
  }
  return true
}
