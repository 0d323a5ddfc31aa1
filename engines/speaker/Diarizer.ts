/**
 * Who spoke when, the pure parts: clustering of embedded spans (the neural-embedding path of
 * actors/Diarization.ts; the classical path clusters by BIC, BicClustering.ts), turns from
 * labelled units, and words → speakers. No audio, no model: tested on made-up vectors.
 *
 *  1. `diarize`: agglomerative clustering, average linkage on cosine distance (1 − cos), by the
 *     nearest-neighbour chain (exact for average linkage); the dendrogram is cut where the next
 *     merge would be farther than `threshold`, or at exactly `numSpeakers` clusters when given.
 *     Clusters of fewer than `minClusterWindows` spans are dissolved into the nearest other
 *     (centroid cosine), so a cough or a laugh cannot become a speaker nor, with `numSpeakers`,
 *     take a speaker's place. Spans shorter than `minClusterMs` or with no speech (zero
 *     vector) are not clustered; they take the label of the nearest clustered span in time.
 *  2. Smoothing: within a run of overlapping spans, each label becomes the most common label
 *     among itself and `smoothing` neighbours on each side (a median for labels), which removes
 *     one-window flips; it never crosses a pause, where turns change. Units do not overlap, so
 *     for them it does nothing.
 *  3. Turns: each span owns the time up to the middle of its overlap with its neighbours;
 *     adjacent spans with one label join into a turn; labels are renamed `speaker_0`,
 *     `speaker_1`, … in order of first appearance.
 * Times are ms from the start of the recording. Overlapping speech gets one speaker.
 *
 * `DIARIZE_DEFAULTS.threshold` is the classical embedding's, measured on synthetic voices
 * (last merge within one voice 0.14–0.61, between voices 0.44–1.4); on real recordings it finds
 * one speaker, which is why the classical path no longer uses it. A neural model brings its own.
 */
import { cosine, isZero } from "./SpeakerEmbedding.ts"

export interface TimeSpan {
  /** ms from the start of the recording. */
  readonly startMs: number
  /** ms, end exclusive. */
  readonly endMs: number
}

export interface SpeakerTurn extends TimeSpan {
  readonly speaker: string
}

export interface DiarizeOptions {
  /** Exact number of speakers to find (≥ 1); overrides `threshold`. */
  readonly numSpeakers?: number
  /** Largest average cosine distance at which two clusters still merge. */
  readonly threshold: number
  /** Neighbours on each side in the label smoothing; 0 turns it off. */
  readonly smoothing: number
  /** Windows shorter than this are labelled by their neighbours, not clustered, ms. */
  readonly minClusterMs: number
  /** Clusters of fewer windows are dissolved into the nearest larger one. */
  readonly minClusterWindows: number
}

export const DIARIZE_DEFAULTS: DiarizeOptions = { threshold: 0.4, smoothing: 1, minClusterMs: 400, minClusterWindows: 2 }

export interface EmbeddedWindow extends TimeSpan {
  readonly embedding: Float32Array
}

export interface Diarization {
  readonly turns: Array<SpeakerTurn>
  /** Speaker of each input window, in input order. */
  readonly labels: Array<string>
  readonly speakerCount: number
}

/**
 * Merges of average-linkage clustering of `vectors` under cosine distance, sorted by distance:
 * [a, b, distance] where a and b are members of the two clusters joined.
 */
export const averageLinkage = (vectors: ReadonlyArray<Float32Array>): Array<readonly [number, number, number]> => {
  const n = vectors.length
  const d = new Float32Array(n * n)
  for (let i = 0; i < n; i++) {
    for (let j = i + 1; j < n; j++) {
      const v = 1 - cosine(vectors[i]!, vectors[j]!)
      d[i * n + j] = v
      d[j * n + i] = v
    }
  }
  const size = new Array<number>(n).fill(1)
  const active = new Uint8Array(n).fill(1)
  let remaining = n
  const merges: Array<readonly [number, number, number]> = []
  const chain: Array<number> = []
  while (remaining > 1) {
    if (chain.length === 0) chain.push(active.indexOf(1))
    const a = chain[chain.length - 1]!
    const previous = chain.length > 1 ? chain[chain.length - 2]! : -1
    // Nearest active cluster; ties go to the previous link so that the chain terminates.
    let b = previous
    let best = previous >= 0 ? d[a * n + previous]! : Infinity
    for (let k = 0; k < n; k++) {
      if (k === a || active[k] === 0) continue
      const v = d[a * n + k]!
      if (v < best) {
        best = v
        b = k
      }
    }
    if (b !== previous) {
      chain.push(b)
      continue
    }
    chain.pop()
    chain.pop()
    merges.push([a, b, best])
    // Lance–Williams update for average linkage; the union lives in slot a.
    const sa = size[a]!
    const sb = size[b]!
    for (let k = 0; k < n; k++) {
      if (active[k] === 0 || k === a || k === b) continue
      const v = (sa * d[a * n + k]! + sb * d[b * n + k]!) / (sa + sb)
      d[a * n + k] = v
      d[k * n + a] = v
    }
    size[a] = sa + sb
    active[b] = 0
    remaining--
  }
  return merges.sort((x, y) => x[2] - y[2])
}

/** Cluster index per vector: merges applied in order until `stop` says no. */
const cut = (n: number, merges: ReadonlyArray<readonly [number, number, number]>, stop: (distance: number, clusters: number) => boolean) => {
  const parent = Array.from({ length: n }, (_, i) => i)
  const find = (i: number): number => {
    while (parent[i] !== i) i = parent[i] = parent[parent[i]!]!
    return i
  }
  let clusters = n
  for (const [a, b, distance] of merges) {
    if (stop(distance, clusters)) break
    parent[find(a)] = find(b)
    clusters--
  }
  return Array.from({ length: n }, (_, i) => find(i))
}

const sizes = (labels: ReadonlyArray<number>) => {
  const m = new Map<number, number>()
  for (const l of labels) m.set(l, (m.get(l) ?? 0) + 1)
  return m
}

/**
 * Cluster per vector: the dendrogram cut by threshold or count, then clusters of fewer than
 * `minClusterWindows` windows dissolved into the nearest remaining cluster (centroid cosine). For
 * a count, the cut moves down until `numSpeakers` clusters of that size exist, so that a stray
 * window or two (a cough, a laugh) cannot take the place of a speaker.
 */
const partition = (vectors: ReadonlyArray<Float32Array>, merges: ReadonlyArray<readonly [number, number, number]>, o: DiarizeOptions): Array<number> => {
  const n = vectors.length
  const big = (labels: ReadonlyArray<number>) =>
    [...sizes(labels)].filter(([, size]) => size >= o.minClusterWindows).sort((a, b) => b[1] - a[1] || a[0] - b[0]).map(([l]) => l)
  let labels: Array<number> | undefined
  let keep: Array<number> = []
  if (o.numSpeakers !== undefined) {
    const target = o.numSpeakers
    for (let k = Math.min(target, n); k <= n && labels === undefined; k++) {
      const candidate = cut(n, merges, (_, clusters) => clusters <= k)
      const b = big(candidate)
      if (b.length >= target) [labels, keep] = [candidate, b.slice(0, target)]
    }
    // Too few windows for that many clusters of that size: plain cut, nothing dissolved.
    if (labels === undefined) return cut(n, merges, (_, clusters) => clusters <= target)
  } else {
    labels = cut(n, merges, (distance) => distance > o.threshold)
    keep = big(labels)
    if (keep.length === 0) return labels
  }
  const centroids = keep.map((l) => {
    const c = new Float32Array(vectors[0]!.length)
    labels.forEach((x, i) => {
      if (x === l) for (let d = 0; d < c.length; d++) c[d] = c[d]! + vectors[i]![d]!
    })
    return c
  })
  const kept = new Set(keep)
  return labels.map((l, i) => {
    if (kept.has(l)) return l
    let best = 0
    for (let k = 1; k < keep.length; k++) if (cosine(vectors[i]!, centroids[k]!) > cosine(vectors[i]!, centroids[best]!)) best = k
    return keep[best]!
  })
}

const mode = (labels: ReadonlyArray<number>, own: number): number => {
  const counts = new Map<number, number>()
  for (const l of labels) counts.set(l, (counts.get(l) ?? 0) + 1)
  let best = own
  let bestCount = counts.get(own) ?? 0
  for (const [l, c] of counts) if (c > bestCount) [best, bestCount] = [l, c]
  return best
}

/** Clusters embedded windows into speakers and returns their turns (see the module header). */
export const diarize = (windows: ReadonlyArray<EmbeddedWindow>, options: Partial<DiarizeOptions> = {}): Diarization => {
  const o = { ...DIARIZE_DEFAULTS, ...options }
  if (o.numSpeakers !== undefined && !(Number.isInteger(o.numSpeakers) && o.numSpeakers >= 1)) {
    throw new RangeError(`numSpeakers must be a positive integer, got ${o.numSpeakers}`)
  }
  const order = windows.map((_, i) => i).sort((a, b) => windows[a]!.startMs - windows[b]!.startMs || a - b)
  const w = order.map((i) => windows[i]!)
  const clustered = w.flatMap((x, i) => (x.endMs - x.startMs >= o.minClusterMs && !isZero(x.embedding) ? [i] : []))
  const merges = averageLinkage(clustered.map((i) => w[i]!.embedding))
  const clusterOf = partition(clustered.map((i) => w[i]!.embedding), merges, o)
  const label = new Array<number>(w.length).fill(-1)
  clustered.forEach((i, k) => (label[i] = clusterOf[k]!))
  // Unclustered windows: label of the nearest clustered window by centre time.
  const centre = (x: TimeSpan) => (x.startMs + x.endMs) / 2
  for (let i = 0; i < w.length; i++) {
    if (label[i] !== -1) continue
    let best = -1
    for (const k of clustered) if (best < 0 || Math.abs(centre(w[k]!) - centre(w[i]!)) < Math.abs(centre(w[best]!) - centre(w[i]!))) best = k
    label[i] = best < 0 ? 0 : label[best]!
  }
  // Smoothing inside runs of overlapping or touching windows.
  const smoothed = [...label]
  if (o.smoothing > 0) {
    let runStart = 0
    for (let i = 1; i <= w.length; i++) {
      if (i < w.length && w[i]!.startMs <= w[i - 1]!.endMs) continue
      for (let k = runStart; k < i; k++) {
        smoothed[k] = mode(label.slice(Math.max(runStart, k - o.smoothing), Math.min(i, k + o.smoothing + 1)), label[k]!)
      }
      runStart = i
    }
  }
  // Names in order of first appearance.
  const names = new Map<number, string>()
  const nameOf = (l: number) => {
    let s = names.get(l)
    if (s === undefined) names.set(l, (s = `speaker_${names.size}`))
    return s
  }
  const sortedLabels = smoothed.map(nameOf)
  const turns: Array<SpeakerTurn> = []
  for (let i = 0; i < w.length; i++) {
    const x = w[i]!
    const prev = w[i - 1]
    const next = w[i + 1]
    const startMs = prev !== undefined && prev.endMs > x.startMs ? Math.max(x.startMs, (x.startMs + prev.endMs) / 2) : x.startMs
    const endMs = next !== undefined && next.startMs < x.endMs ? Math.min(x.endMs, (next.startMs + x.endMs) / 2) : x.endMs
    if (endMs <= startMs) continue
    const last = turns[turns.length - 1]
    if (last !== undefined && last.speaker === sortedLabels[i] && startMs <= last.endMs) turns[turns.length - 1] = { ...last, endMs: Math.max(last.endMs, endMs) }
    else turns.push({ startMs, endMs, speaker: sortedLabels[i]! })
  }
  const labels = new Array<string>(w.length)
  order.forEach((original, k) => (labels[original] = sortedLabels[k]!))
  return { turns, labels, speakerCount: names.size }
}

/**
 * Speaker of each word: the turn it overlaps most, else the nearest turn in time; "speaker_0"
 * when there are no turns. `turns` must be in time order and not overlap (as `diarize` returns).
 */
export const assignWords = (words: ReadonlyArray<TimeSpan>, turns: ReadonlyArray<SpeakerTurn>): Array<string> =>
  words.map((word) => {
    if (turns.length === 0) return "speaker_0"
    // First turn that ends after the word starts.
    let lo = 0
    let hi = turns.length
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (turns[mid]!.endMs <= word.startMs) lo = mid + 1
      else hi = mid
    }
    let best: SpeakerTurn | undefined
    let bestOverlap = 0
    for (let k = lo; k < turns.length && turns[k]!.startMs < word.endMs; k++) {
      const t = turns[k]!
      const overlap = Math.min(t.endMs, word.endMs) - Math.max(t.startMs, word.startMs)
      if (overlap > bestOverlap) [best, bestOverlap] = [t, overlap]
    }
    if (best !== undefined) return best.speaker
    const before = turns[lo - 1]
    const after = turns[lo]
    if (before === undefined) return after!.speaker
    if (after === undefined) return before.speaker
    return word.startMs - before.endMs <= after.startMs - word.endMs ? before.speaker : after.speaker
  })

/**
 * Turns from labelled units in time order: units set aside (−1) take the label of the nearest
 * labelled unit in time; touching neighbours with one label join; names follow first appearance.
 */
export const unitTurns = (units: ReadonlyArray<TimeSpan>, labels: ArrayLike<number>): { turns: Array<SpeakerTurn>; speakers: Array<string> } => {
  const labelled = units.flatMap((_, i) => (labels[i]! >= 0 ? [i] : []))
  const centre = (u: TimeSpan) => (u.startMs + u.endMs) / 2
  const resolved = units.map((u, i) => {
    if (labels[i]! >= 0) return labels[i]!
    let best = -1
    for (const k of labelled) if (best < 0 || Math.abs(centre(units[k]!) - centre(u)) < Math.abs(centre(units[best]!) - centre(u))) best = k
    return best < 0 ? 0 : labels[best]!
  })
  const names = new Map<number, string>()
  const speakers = resolved.map((l) => {
    let name = names.get(l)
    if (name === undefined) names.set(l, (name = `speaker_${names.size}`))
    return name
  })
  const turns: Array<SpeakerTurn> = []
  units.forEach((u, i) => {
    const last = turns[turns.length - 1]
    if (last !== undefined && last.speaker === speakers[i] && u.startMs <= last.endMs) turns[turns.length - 1] = { ...last, endMs: Math.max(last.endMs, u.endMs) }
    else turns.push({ startMs: u.startMs, endMs: u.endMs, speaker: speakers[i]! })
  })
  return { turns, speakers }
}
