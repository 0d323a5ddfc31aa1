/**
 * espeak-ng text-to-speech: every language of the build (140, incl. Estonian), variants
 * ("et+f3"), pitch, rate and speed; word timings from espeak's own word and phoneme events.
 *
 * Rate: 175 wpm × voice.rate × speed, clamped by espeak to 80–450 wpm (so speed 0.5 on a slow
 * preset is slightly less slow than asked). Pitch: espeak base pitch 50 × voice.pitch (0–100).
 * Output: 22050 Hz. A word starts at its first sounding phoneme and ends at the next word or
 * clause boundary, so clause pauses stay outside words. espeak folds some short words into the
 * previous one ("was a" is one word event with the schwa at its end); such words get a share of
 * that event's time in proportion to their length, so every word of the text has a timing.
 */
import { int16ToFloat } from "../audio/Pcm.ts"
import { EspeakNative } from "./EspeakNative.ts"
import { ESPEAK_DEFAULT_WPM, EspeakRuntime, type EspeakEvent } from "./EspeakRuntime.ts"
import {
  checkRequest,
  TtsError,
  type EngineVoice,
  type TtsBlockSink,
  type TtsBlocksResult,
  type TtsCapabilities,
  type TtsEngine,
  type TtsRequest,
  type TtsResult,
  type WordTiming
} from "./TtsEngine.ts"

export class EspeakTts implements TtsEngine {
  readonly capabilities: TtsCapabilities

  private constructor(private readonly runtime: EspeakRuntime, private readonly native: EspeakNative | null) {
    this.capabilities = {
      engine: "espeak",
      languages: [...new Set([...runtime.languageNames, ...(native?.languageNames ?? [])])].sort(),
      sampleRates: [runtime.sampleRate],
      timing: "word"
    }
  }

  /**
   * Shares the thread's espeak runtimes (loaded on the first call in a thread): Debian's native
   * library where it is installed, for the voices and rates it speaks (EspeakNative.speaks), and
   * the bundled build for the rest. Both make 22050 Hz; a native library at another rate is not
   * used. `native: false` gives the bundled build alone (to compare the two).
   */
  static async load(options: { readonly native?: boolean } = {}): Promise<EspeakTts> {
    const runtime = await EspeakRuntime.load()
    const native = options.native === false ? null : EspeakNative.load()
    return new EspeakTts(runtime, native !== null && native.sampleRate === runtime.sampleRate ? native : null)
  }

  /** Which build speaks this request: "native" (libespeak-ng) or "bundled" (wasm2js). */
  buildFor(request: Pick<TtsRequest, "voice" | "speed">): "native" | "bundled" {
    return this.native?.speaks(request.voice.variant, this.params(request).rateWpm) === true ? "native" : "bundled"
  }

  sampleRateFor(_voice: EngineVoice): number {
    return this.runtime.sampleRate
  }

  checkVoice(voice: EngineVoice): void {
    if (voice.engine !== "espeak") throw new TtsError("VoiceNotFound", `voice is for engine ${voice.engine}, not espeak`)
    if (this.native?.has(voice.variant) !== true) this.runtime.checkVoiceId(voice.variant)
  }

  async synthesize(request: TtsRequest): Promise<TtsResult> {
    const { samples, sampleCount, events } = this.run(request)
    return { samples: int16ToFloat(samples), sampleRate: this.runtime.sampleRate, words: this.words(request, events, sampleCount) }
  }

  /** espeak's own blocks (100 ms of audio each), as its synthesis callback delivers them. */
  async synthesizeBlocks(request: TtsRequest, onBlock: TtsBlockSink): Promise<TtsBlocksResult> {
    let stopped = false
    const { sampleCount, events } = this.run(request, (block) => {
      stopped = !onBlock(int16ToFloat(block))
      return !stopped
    })
    const words = stopped ? [] : this.words(request, events, sampleCount)
    return { sampleRate: this.runtime.sampleRate, sampleCount, words, stopped }
  }

  private run(request: TtsRequest, onBlock?: (block: Int16Array) => boolean) {
    checkRequest(request)
    this.checkVoice(request.voice)
    const params = this.params(request)
    if (this.buildFor(request) === "native") {
      try {
        return this.native!.synthesize(request.voice.variant, params, request.text, onBlock)
      } catch (e) {
        // A copy that failed to load made no sound: the bundled build speaks the voice from now on.
        if (this.native!.has(request.voice.variant)) throw e
      }
    }
    return this.runtime.withVoice(request.voice.variant, params, (s) => s.synthesize(request.text, onBlock))
  }

  private params(request: Pick<TtsRequest, "voice" | "speed">) {
    return { rateWpm: ESPEAK_DEFAULT_WPM * request.voice.rate * request.speed, pitch: 50 * request.voice.pitch }
  }

  private words(request: TtsRequest, events: ReadonlyArray<EspeakEvent>, sampleCount: number) {
    const durationMs = (sampleCount * 1000) / this.runtime.sampleRate
    return attachMergedWords(request.text, wordsFromEvents(request.text, events, durationMs), request.voice.language)
  }
}

/** Builds word timings (ms) from espeak events; merges repeated events for one word. */
export const wordsFromEvents = (text: string, events: ReadonlyArray<EspeakEvent>, durationMs: number): Array<WordTiming> => {
  const words: Array<{ charStart: number; charEnd: number; startMs: number; endMs: number; firstPhoneMs?: number }> = []
  let open: (typeof words)[number] | undefined
  const close = (atMs: number) => {
    if (open !== undefined) open.endMs = Math.min(durationMs, Math.max(open.startMs, atMs))
    open = undefined
  }
  for (const e of events) {
    if (e.type === "word") {
      const last = words[words.length - 1]
      if (last !== undefined && e.charStart < last.charEnd) {
        // Same word again (espeak splits some scripts, e.g. CJK runs): extend it.
        last.charEnd = Math.max(last.charEnd, e.charEnd)
        open = last
        continue
      }
      close(e.audioMs)
      if (text.slice(e.charStart, e.charEnd).trim().length === 0) continue
      open = { charStart: e.charStart, charEnd: e.charEnd, startMs: e.audioMs, endMs: e.audioMs }
      words.push(open)
    } else if (e.type === "phoneme") {
      // Pause pseudo-phonemes start with "_"; the word starts at its first real phoneme.
      if (open !== undefined && open.firstPhoneMs === undefined && e.phoneme !== undefined && e.phoneme !== "" && !e.phoneme.startsWith("_")) {
        open.firstPhoneMs = e.audioMs
      }
    } else {
      close(e.audioMs)
    }
  }
  close(durationMs)
  let previousEnd = 0
  return words.map((w) => {
    const startMs = Math.min(Math.max(w.firstPhoneMs ?? w.startMs, previousEnd), durationMs)
    const endMs = Math.min(Math.max(w.endMs, startMs), durationMs)
    previousEnd = endMs
    return { text: text.slice(w.charStart, w.charEnd), startMs, endMs, charStart: w.charStart, charEnd: w.charEnd }
  })
}

/**
 * Words (ICU word rules) that got no event of their own share the time of the word event before
 * them (espeak emits the merged event at the start of the first word), or after them at the start
 * of the text; shares are proportional to character counts.
 */
export const attachMergedWords = (text: string, words: ReadonlyArray<WordTiming>, locale: string): Array<WordTiming> => {
  if (words.length === 0) return []
  const covered = (a: number, b: number) => words.some((w) => w.charStart < b && a < w.charEnd)
  const orphans = [...new Intl.Segmenter(locale, { granularity: "word" }).segment(text)]
    .filter((s) => s.isWordLike && !covered(s.index, s.index + s.segment.length))
    .map((s) => ({ charStart: s.index, charEnd: s.index + s.segment.length }))
  if (orphans.length === 0) return [...words]
  const out: Array<WordTiming> = []
  const split = (host: WordTiming, group: ReadonlyArray<{ charStart: number; charEnd: number }>) => {
    const total = group.reduce((a, g) => a + (g.charEnd - g.charStart), 0)
    let acc = 0
    for (const g of group) {
      const startMs = host.startMs + ((host.endMs - host.startMs) * acc) / total
      acc += g.charEnd - g.charStart
      out.push({ text: text.slice(g.charStart, g.charEnd), startMs, endMs: host.startMs + ((host.endMs - host.startMs) * acc) / total, charStart: g.charStart, charEnd: g.charEnd })
    }
  }
  words.forEach((w, i) => {
    const nextStart = words[i + 1]?.charStart ?? Infinity
    const before = i === 0 ? orphans.filter((o) => o.charEnd <= w.charStart) : []
    const after = orphans.filter((o) => o.charStart >= w.charEnd && o.charEnd <= nextStart)
    if (before.length === 0 && after.length === 0) out.push(w)
    else split(w, [...before, { charStart: w.charStart, charEnd: w.charEnd }, ...after])
  })
  return out
}
