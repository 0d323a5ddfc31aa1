/**
 * Speech probabilities per frame → speech segments: hysteresis, minimum durations, padding, and
 * a length cap. Pure (no model) so it can be tested on made-up probabilities.
 *
 * Frames are `frameMs` long (Silero at 16 kHz: 512 samples = 32 ms); frame i covers
 * [i·frameMs, (i+1)·frameMs). Times are ms from the start of the audio.
 *
 *  1. Speech starts at the first frame with p ≥ `threshold`; it ends where p first fell below
 *     `negThreshold` once it has stayed below it (not back above `threshold`) for `minSilenceMs`.
 *     The two thresholds are the hysteresis that keeps a 0.4 dip inside a word from splitting it.
 *     At the end of the audio, speech ends where a trailing dip began, however short.
 *  2. Segments shorter than `minSpeechMs` (before padding) are dropped: clicks, breaths.
 *  3. Each side is padded by `padMs`, clamped to the audio; where two padded segments would
 *     overlap, both end at the middle of the silence between them.
 *  4. A segment longer than `maxSegmentMs` is cut at its least speech-like frames (a breath, a
 *     pause too short to end speech) into pieces of ½ to 1 × the cap, so a recogniser never sees
 *     more than ~20 s at once and cuts avoid the middle of words where it can. Pieces abut.
 */

export interface VadOptions {
  /** Speech starts when p ≥ this. */
  readonly threshold: number
  /** Speech may end when p < this; default threshold − 0.15 (at least 0.01). */
  readonly negThreshold: number
  readonly minSpeechMs: number
  readonly minSilenceMs: number
  readonly padMs: number
  readonly maxSegmentMs: number
}

export const VAD_DEFAULTS: VadOptions = {
  threshold: 0.5,
  negThreshold: 0.35,
  minSpeechMs: 250,
  minSilenceMs: 300,
  // 250 ms, not Silero's 30 or our earlier 100: on real speech (pocketsphinx-testdata) a tighter
  // pad clipped soft word onsets and endings ("and", "them"), and the service then made more
  // errors than the raw engine on two files; at 250 it made fewer on all 20 (bench/stt (d)).
  padMs: 250,
  maxSegmentMs: 20_000
}

export interface SpeechSegment {
  /** ms from the start of the audio. */
  readonly startMs: number
  /** ms, end exclusive. */
  readonly endMs: number
}

/** Defaults filled in; `negThreshold` follows a changed `threshold` unless given. */
export const vadOptions = (partial: Partial<VadOptions> = {}): VadOptions => {
  const threshold = partial.threshold ?? VAD_DEFAULTS.threshold
  const negThreshold = partial.negThreshold ?? Math.max(0.01, threshold - 0.15)
  const o = { ...VAD_DEFAULTS, ...partial, threshold, negThreshold }
  if (!(o.threshold > 0 && o.threshold < 1 && o.negThreshold > 0 && o.negThreshold <= o.threshold)) {
    throw new RangeError(`VAD thresholds must satisfy 0 < negThreshold ≤ threshold < 1, got ${o.negThreshold} and ${o.threshold}`)
  }
  if (!(o.maxSegmentMs >= 1000 && o.minSpeechMs >= 0 && o.minSilenceMs >= 0 && o.padMs >= 0)) {
    throw new RangeError("VAD durations must be non-negative and maxSegmentMs at least 1000")
  }
  return o
}

type Probabilities = ArrayLike<number>

/**
 * Segments for `probs` (one per frame) over audio lasting `durationMs`; the last frame may
 * extend past the audio (zero-padded), ends are clamped to `durationMs`.
 */
export const speechSegments = (probs: Probabilities, frameMs: number, durationMs: number, partial: Partial<VadOptions> = {}): Array<SpeechSegment> => {
  const o = vadOptions(partial)
  const raw = hysteresis(probs, frameMs, o)
    .map((s) => ({ startMs: s.startMs, endMs: Math.min(s.endMs, durationMs) }))
    .filter((s) => s.endMs - s.startMs >= o.minSpeechMs)
  const padded = pad(raw, o.padMs, durationMs)
  return padded.flatMap((s) => split(s, probs, frameMs, o.maxSegmentMs))
}

const hysteresis = (probs: Probabilities, frameMs: number, o: VadOptions): Array<SpeechSegment> => {
  const out: Array<SpeechSegment> = []
  const minSilenceFrames = Math.ceil(o.minSilenceMs / frameMs)
  let start = -1 // first frame of the current segment, -1 outside speech
  let silenceStart = -1 // first frame below negThreshold of the current dip, -1 if none
  for (let i = 0; i < probs.length; i++) {
    const p = probs[i]!
    if (start < 0) {
      if (p >= o.threshold) start = i
      continue
    }
    if (p >= o.threshold) silenceStart = -1
    else if (p < o.negThreshold && silenceStart < 0) silenceStart = i
    if (silenceStart >= 0 && i + 1 - silenceStart >= minSilenceFrames) {
      out.push({ startMs: start * frameMs, endMs: silenceStart * frameMs })
      start = -1
      silenceStart = -1
    }
  }
  // Speech running into the end stops where a trailing dip began, even one shorter than minSilence.
  if (start >= 0) out.push({ startMs: start * frameMs, endMs: (silenceStart >= 0 ? silenceStart : probs.length) * frameMs })
  return out
}

const pad = (segments: ReadonlyArray<SpeechSegment>, padMs: number, durationMs: number): Array<SpeechSegment> => {
  const out = segments.map((s) => ({ startMs: Math.max(0, s.startMs - padMs), endMs: Math.min(durationMs, s.endMs + padMs) }))
  for (let k = 1; k < out.length; k++) {
    const previous = out[k - 1]!
    const current = out[k]!
    if (previous.endMs > current.startMs) {
      const middle = Math.round((segments[k - 1]!.endMs + segments[k]!.startMs) / 2)
      previous.endMs = middle
      current.startMs = middle
    }
  }
  return out
}

/**
 * Cuts at the lowest-probability frame centre in [start + max/2, min(start + max, end − max/4)],
 * repeatedly: pieces last between half the cap and the cap, and no piece is a sliver at the end.
 * Ties go to the later frame, so speech without a trough is cut into the fewest pieces.
 */
const split = (s: SpeechSegment, probs: Probabilities, frameMs: number, maxMs: number): Array<SpeechSegment> => {
  const out: Array<SpeechSegment> = []
  let { startMs } = s
  while (s.endMs - startMs > maxMs) {
    const earliest = startMs + maxMs / 2
    const latest = Math.min(startMs + maxMs, s.endMs - maxMs / 4)
    let cut = latest
    let lowest = Infinity
    for (let f = Math.max(0, Math.ceil(earliest / frameMs - 0.5)); f < probs.length && (f + 0.5) * frameMs <= latest; f++) {
      if (probs[f]! <= lowest) {
        lowest = probs[f]!
        cut = (f + 0.5) * frameMs
      }
    }
    out.push({ startMs, endMs: cut })
    startMs = cut
  }
  out.push({ startMs, endMs: s.endMs })
  return out
}
