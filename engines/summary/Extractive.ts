/**
 * Extractive summaries: every item is a sentence unit of the transcript, verbatim (Sentences.ts);
 * nothing is paraphrased or invented. Classical methods, no model:
 *
 * - Salience: TF-IDF vectors of each unit's content words (stop words dropped, light suffix
 *   stemming), scored by TextRank (PageRank over the cosine-similarity graph, damping 0.85) and
 *   discounted for units of fewer than 6 content words. Over `GRAPH_LIMIT` units (about 20 minutes
 *   of talk) the quadratic graph gives way to similarity with the centroid, linear in length.
 * - Redundancy: maximal marginal relevance (λ = 0.7) against what the summary already holds;
 *   a unit with cosine ≥ 0.8 to a chosen one (a repeat) is never picked.
 * - Decisions and action items: English cue phrases ("we decided", "let's go with", "i will",
 *   "we need to", "by friday"), ranked by cue strength then salience. An action's owner is the
 *   speaker for first-person commitments, the other party for "you …" in a two-person call,
 *   otherwise unknown (null).
 * - Per-speaker recap: the same selection within each speaker's units.
 *
 * Honest limits: cue phrases are English and miss decisions phrased any other way; salience is
 * word overlap, so a point made once in rare words can lose to a repeated topic; recognition
 * errors pass straight into the items.
 */
import type { SentenceUnit } from "./Sentences.ts"
import type { SummaryItem, SummarySection, SummarySource, TemplateSection } from "./Summarizer.ts"

const GRAPH_LIMIT = 300
const DAMPING = 0.85
const MMR_LAMBDA = 0.7
/** Cosine similarity above which a unit says again what a chosen one said: never picked. */
const NEAR_DUPLICATE = 0.8

// Function words of spoken English; they carry no topic.
const STOP = new Set(
  ("a about above after again against all am an and any are aren't as at be because been before being below between both but by " +
    "can can't could did didn't do does doesn't doing don't down during each few for from further had has have having he he'd " +
    "he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself " +
    "let's me more most my myself no nor not of off on once only or other ought our ours ourselves out over own same she she'd " +
    "she'll she's should so some such than that that's the their theirs them themselves then there there's these they they'd " +
    "they'll they're they've this those through to too under until up very was wasn't we we'd we'll we're we've were weren't what " +
    "what's when when's where where's which while who who's whom why why's with won't would you you'd you'll you're you've your " +
    "yours yourself yourselves uh um oh yeah okay ok well just like really mean know think going get got also would said say says")
    .split(" ")
)

/** A crude suffix stemmer: enough to let "decide", "decided" and "decides" meet. */
const stem = (w: string) => w.replace(/(?:ing|edly|ed|ly|es|s)$/u, "").replace(/e$/u, "") || w

export const contentTerms = (text: string): Array<string> =>
  text.toLowerCase().split(/[^\p{L}\p{N}']+/u).filter((w) => w.length > 1 && !STOP.has(w)).map(stem)

type Vector = Map<string, number>

const dot = (a: Vector, b: Vector) => {
  const [small, large] = a.size <= b.size ? [a, b] : [b, a]
  let s = 0
  for (const [k, v] of small) s += v * (large.get(k) ?? 0)
  return s
}

/** Unit-length TF-IDF vectors, one per unit's content terms. */
export const tfidf = (terms: ReadonlyArray<ReadonlyArray<string>>): Array<Vector> => {
  const df = new Map<string, number>()
  for (const ts of terms) for (const t of new Set(ts)) df.set(t, (df.get(t) ?? 0) + 1)
  return terms.map((ts) => {
    const v: Vector = new Map()
    for (const t of ts) v.set(t, (v.get(t) ?? 0) + 1)
    let norm = 0
    for (const [t, tf] of v) {
      const w = tf * Math.log(1 + terms.length / df.get(t)!)
      v.set(t, w)
      norm += w * w
    }
    norm = Math.sqrt(norm)
    if (norm > 0) for (const [t, w] of v) v.set(t, w / norm)
    return v
  })
}

/** TextRank scores (sum 1), or centroid similarity past GRAPH_LIMIT units. */
export const salience = (vectors: ReadonlyArray<Vector>): Array<number> => {
  const n = vectors.length
  if (n === 0) return []
  if (n > GRAPH_LIMIT) {
    const centroid: Vector = new Map()
    for (const v of vectors) for (const [t, w] of v) centroid.set(t, (centroid.get(t) ?? 0) + w / n)
    return vectors.map((v) => dot(v, centroid))
  }
  const sim = vectors.map((a, i) => vectors.map((b, j) => (i === j ? 0 : dot(a, b))))
  const out = sim.map((row) => row.reduce((s, x) => s + x, 0))
  let rank = new Array<number>(n).fill(1 / n)
  for (let iter = 0; iter < 40; iter++) {
    const next = new Array<number>(n).fill((1 - DAMPING) / n)
    for (let j = 0; j < n; j++) {
      // A unit similar to nothing spreads its rank evenly (the random jump), as in PageRank.
      if (out[j] === 0) for (let i = 0; i < n; i++) next[i]! += (DAMPING * rank[j]!) / n
      else for (let i = 0; i < n; i++) if (sim[j]![i]! > 0) next[i]! += (DAMPING * rank[j]! * sim[j]![i]!) / out[j]!
    }
    rank = next
  }
  return rank
}

const DECISION_CUES: ReadonlyArray<readonly [RegExp, number]> = [
  [/\b(?:we|i|they|you) (?:have |had |all )?(?:decided|agreed|settled on|chose|have chosen|approved|concluded)\b/u, 3],
  [/\b(?:let's|let us) (?:go with|agree|keep|use|do|move|stick)\b/u, 3],
  [/\b(?:decision|agreed|approved|final answer|consensus|we'll go with|we will go with)\b/u, 2],
  [/\b(?:we (?:will|'ll|are going to|shall)) (?:keep|use|ship|release|move|switch|start|stop|go)\b/u, 1]
]
const ACTION_CUES: ReadonlyArray<readonly [RegExp, number]> = [
  [/\b(?:action item|todo|follow up|follow-up|make sure|please)\b/u, 3],
  [/\b(?:i'll|i will|i am going to|i'm going to|i can|i shall) (?!be\b|have\b|never\b|not\b)/u, 2],
  [/\b(?:we|you|he|she|they) (?:need|needs|have|has|must|should|will need) to\b/u, 2],
  [/\bby (?:monday|tuesday|wednesday|thursday|friday|tomorrow|tonight|next week|the end of|end of)\b/u, 2]
]

const cueScore = (text: string, cues: ReadonlyArray<readonly [RegExp, number]>) =>
  cues.reduce((s, [re, w]) => (re.test(text) ? s + w : s), 0)

export interface Scored {
  readonly units: ReadonlyArray<SentenceUnit>
  readonly vectors: ReadonlyArray<Vector>
  /** Salience per unit, 0..1, short units discounted. */
  readonly score: ReadonlyArray<number>
}

export const scoreUnits = (units: ReadonlyArray<SentenceUnit>): Scored => {
  const terms = units.map((u) => contentTerms(u.text))
  const vectors = tfidf(terms)
  const raw = salience(vectors)
  const top = Math.max(...raw, Number.MIN_VALUE)
  const score = raw.map((r, i) => (r / top) * Math.min(1, terms[i]!.length / 6))
  return { units, vectors, score }
}

/** Up to `count` unit indices from `candidates` by MMR, given those already chosen. */
export const mmr = (scored: Scored, candidates: ReadonlyArray<number>, chosen: ReadonlyArray<number>, count: number): Array<number> => {
  const picked: Array<number> = []
  const pool = new Set(candidates.filter((i) => !chosen.includes(i)))
  const against = [...chosen]
  while (picked.length < count && pool.size > 0) {
    let best = -1
    let bestValue = -Infinity
    for (const i of pool) {
      const redundancy = against.reduce((m, j) => Math.max(m, dot(scored.vectors[i]!, scored.vectors[j]!)), 0)
      if (redundancy >= NEAR_DUPLICATE) continue
      const value = MMR_LAMBDA * scored.score[i]! - (1 - MMR_LAMBDA) * redundancy
      if (value > bestValue) (bestValue = value), (best = i)
    }
    if (best < 0) break // only near-duplicates left
    pool.delete(best)
    picked.push(best)
    against.push(best)
  }
  return picked
}

const speakerLabel = (source: SummarySource, id: string | undefined) => (id === undefined ? null : source.speakerNames?.[id] ?? id)

const itemOf = (source: SummarySource, u: SentenceUnit, extra: Partial<SummaryItem> = {}): SummaryItem => ({
  text: u.text,
  speaker: speakerLabel(source, u.speaker),
  ...(u.start !== undefined ? { start: u.start } : {}),
  ...(u.end !== undefined ? { end: u.end } : {}),
  ...extra
})

const ownerOf = (source: SummarySource, u: SentenceUnit, speakers: ReadonlyArray<string>): string | null => {
  if (u.speaker === undefined) return null
  if (/\b(?:i|i'll|i'm)\b/u.test(u.text)) return speakerLabel(source, u.speaker)
  if (/\byou\b/u.test(u.text) && speakers.length === 2) return speakerLabel(source, speakers.find((s) => s !== u.speaker))
  return null
}

/** How many salient items a section gets: about one per seven units, within its bounds. */
const salientCount = (section: TemplateSection, units: number) =>
  Math.min(units, Math.max(section.minItems ?? 1, Math.min(section.maxItems, Math.ceil(units / 7))))

const byTime = (scored: Scored) => (a: number, b: number) => scored.units[a]!.index - scored.units[b]!.index

/** The sections of `template` filled from `units` (at least one unit). */
export const extractSections = (source: SummarySource, units: ReadonlyArray<SentenceUnit>, sections: ReadonlyArray<TemplateSection>): Array<SummarySection> => {
  const scored = scoreUnits(units)
  const all = units.map((_, i) => i)
  const speakers = [...new Set(units.flatMap((u) => (u.speaker === undefined ? [] : [u.speaker])))]
  // Salient sections share one MMR run, so key points do not repeat the overview.
  const usedSalient: Array<number> = []
  const cued = (cues: ReadonlyArray<readonly [RegExp, number]>, max: number) =>
    all.map((i) => ({ i, cue: cueScore(units[i]!.text, cues) })).filter((x) => x.cue > 0)
      .sort((a, b) => b.cue - a.cue || scored.score[b.i]! - scored.score[a.i]!)
      .slice(0, max).map((x) => x.i).sort(byTime(scored))

  return sections.map((section): SummarySection => {
    const fill = (items: ReadonlyArray<SummaryItem>) => ({ id: section.id, title: section.title, kind: section.kind, items })
    switch (section.focus) {
      case "salient": {
        const picked = mmr(scored, all, usedSalient, salientCount(section, units.length))
        usedSalient.push(...picked)
        return fill(picked.sort(byTime(scored)).map((i) => itemOf(source, units[i]!)))
      }
      case "decisions":
        return fill(cued(DECISION_CUES, section.maxItems).map((i) => itemOf(source, units[i]!)))
      case "actions":
        return fill(cued(ACTION_CUES, section.maxItems).map((i) => itemOf(source, units[i]!, { owner: ownerOf(source, units[i]!, speakers) })))
      case "per_speaker": {
        const groups = speakers.length === 0 ? [undefined] : speakers
        return fill(groups.flatMap((speaker) => {
          const own = all.filter((i) => units[i]!.speaker === speaker)
          return mmr(scored, own, [], Math.min(section.maxItems, own.length)).sort(byTime(scored)).map((i) => itemOf(source, units[i]!))
        }))
      }
    }
  })
}
