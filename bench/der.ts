/**
 * Diarization scoring for the real-speech evaluation (issue 12): diarization error rate and
 * word-speaker accuracy, pure functions over speaker turns in seconds.
 *
 * DER as NIST md-eval scores it, simplified where noted: the timeline is cut at every turn
 * boundary; regions within `collar` seconds of a reference boundary are not scored; in each
 * remaining piece with R reference and H hypothesis speakers active, missed speech is
 * max(0, R−H), false alarm max(0, H−R), and confusion min(R, H) minus the reference speakers
 * whose mapped hypothesis speaker is also active. Overlapping speech counts once per speaker
 * (md-eval's default). The speaker mapping is the one-to-one mapping with the most overlap,
 * found exhaustively (fine for the ≤ 6 speakers of a conversation).
 */

export interface Turn {
  readonly speaker: string
  /** s */
  readonly start: number
  /** s, exclusive */
  readonly end: number
}

export interface DerResult {
  /** (missed + falseAlarm + confusion) / scored reference speech, 0-1 (can pass 1). */
  readonly der: number
  /** Seconds of scored reference speech, counted once per active speaker. */
  readonly scored: number
  readonly missed: number
  readonly falseAlarm: number
  readonly confusion: number
  /** Reference speaker → hypothesis speaker. */
  readonly mapping: ReadonlyMap<string, string>
}

const active = (turns: ReadonlyArray<Turn>, t: number): Set<string> => new Set(turns.filter((x) => x.start <= t && t < x.end).map((x) => x.speaker))

const overlap = (a: Turn, b: Turn) => Math.max(0, Math.min(a.end, b.end) - Math.max(a.start, b.start))

/** The one-to-one reference → hypothesis mapping with the largest total overlap. */
export const bestMapping = (reference: ReadonlyArray<Turn>, hypothesis: ReadonlyArray<Turn>): Map<string, string> => {
  const refs = [...new Set(reference.map((t) => t.speaker))]
  const hyps = [...new Set(hypothesis.map((t) => t.speaker))]
  const gain = refs.map((r) => hyps.map((h) => {
    let s = 0
    for (const a of reference) if (a.speaker === r) for (const b of hypothesis) if (b.speaker === h) s += overlap(a, b)
    return s
  }))
  let best = { total: -1, pairs: [] as Array<[number, number]> }
  const search = (i: number, used: Set<number>, total: number, pairs: Array<[number, number]>) => {
    if (i === refs.length) {
      if (total > best.total) best = { total, pairs: [...pairs] }
      return
    }
    search(i + 1, used, total, pairs) // this reference speaker unmapped
    for (let j = 0; j < hyps.length; j++) {
      if (used.has(j) || gain[i]![j]! <= 0) continue
      used.add(j)
      pairs.push([i, j])
      search(i + 1, used, total + gain[i]![j]!, pairs)
      pairs.pop()
      used.delete(j)
    }
  }
  search(0, new Set(), 0, [])
  return new Map(best.pairs.map(([i, j]) => [refs[i]!, hyps[j]!]))
}

export const diarizationErrorRate = (reference: ReadonlyArray<Turn>, hypothesis: ReadonlyArray<Turn>, collar = 0.25): DerResult => {
  const mapping = bestMapping(reference, hypothesis)
  const cuts = [...new Set([...reference, ...hypothesis].flatMap((t) => [t.start, t.end]))]
  const boundaries = [...new Set(reference.flatMap((t) => [t.start, t.end]))]
  for (const b of boundaries) cuts.push(b - collar, b + collar)
  cuts.sort((a, b) => a - b)
  let scored = 0
  let missed = 0
  let falseAlarm = 0
  let confusion = 0
  for (let i = 0; i + 1 < cuts.length; i++) {
    const from = cuts[i]!
    const to = cuts[i + 1]!
    if (to <= from) continue
    const mid = (from + to) / 2
    if (collar > 0 && boundaries.some((b) => Math.abs(mid - b) < collar)) continue
    const refs = active(reference, mid)
    const hyps = active(hypothesis, mid)
    const d = to - from
    const correct = [...refs].filter((r) => mapping.has(r) && hyps.has(mapping.get(r)!)).length
    scored += d * refs.size
    missed += d * Math.max(0, refs.size - hyps.size)
    falseAlarm += d * Math.max(0, hyps.size - refs.size)
    confusion += d * (Math.min(refs.size, hyps.size) - correct)
  }
  return { der: scored === 0 ? 0 : (missed + falseAlarm + confusion) / scored, scored, missed, falseAlarm, confusion, mapping }
}

/**
 * Of the recognised words whose midpoint lies in exactly one reference speaker's turn, the
 * fraction whose hypothesis speaker is that speaker's mapped one (0-1; NaN with no such word).
 */
export const wordSpeakerAccuracy = (
  reference: ReadonlyArray<Turn>,
  words: ReadonlyArray<{ readonly start: number; readonly end: number; readonly speaker: string }>,
  mapping: ReadonlyMap<string, string>
): number => {
  let counted = 0
  let right = 0
  for (const w of words) {
    const refs = [...active(reference, (w.start + w.end) / 2)]
    if (refs.length !== 1) continue
    counted++
    if (mapping.get(refs[0]!) === w.speaker) right++
  }
  return counted === 0 ? Number.NaN : right / counted
}

/** RTTM lines (`SPEAKER <file> 1 <start> <duration> <NA> <NA> <speaker> <NA> <NA>`) of turns. */
export const toRttm = (file: string, turns: ReadonlyArray<Turn>): string =>
  turns.map((t) => `SPEAKER ${file} 1 ${t.start.toFixed(3)} ${(t.end - t.start).toFixed(3)} <NA> <NA> ${t.speaker} <NA> <NA>`).join("\n") + "\n"

export const fromRttm = (text: string): Array<Turn> =>
  text.split("\n").flatMap((line) => {
    const f = line.trim().split(/\s+/)
    if (f[0] !== "SPEAKER" || f.length < 8) return []
    const start = Number(f[3])
    return [{ speaker: f[7]!, start, end: start + Number(f[4]) }]
  })
