/**
 * espeak-ng text-to-speech: every language of the bundled build (1.52, 140 incl. Estonian),
 * variants ("et+f3"), pitch, rate and speed; word timings from espeak's own word and phoneme
 * events. Two builds speak: Debian's native library (EspeakNative.ts; 3.4× less CPU per audio
 * second, first block 5× sooner) for the voices and rates it has, and the bundled wasm2js build
 * (EspeakRuntime.ts) for the rest and on machines without the library. Their versions differ
 * (1.51 and 1.52), so the same request can sound slightly different on two machines; on one
 * machine it always gives the same bytes.
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

/** Hz of both builds' output (espeak-ng's own rate). */
export const ESPEAK_SAMPLE_RATE = 22050

export class EspeakTts implements TtsEngine {
  private bundledRuntime: EspeakRuntime | undefined

  private constructor(private readonly native: EspeakNative | null, bundled: EspeakRuntime | undefined) {
    this.bundledRuntime = bundled
  }

  /**
   * Shares the thread's espeak runtimes: Debian's native library where it is installed, for the
   * voices and rates it speaks (EspeakNative.speaks), and the bundled build for the rest. The
   * bundled build (~42 MB per worker thread, measured) loads on the first request the native
   * library cannot take, or here when there is no native library. `native: false` gives the
   * bundled build alone (to compare the two).
   */
  static async load(options: { readonly native?: boolean } = {}): Promise<EspeakTts> {
    const loaded = options.native === false ? null : EspeakNative.load()
    const native = loaded !== null && loaded.sampleRate === ESPEAK_SAMPLE_RATE ? loaded : null
    return new EspeakTts(native, native === null ? await EspeakTts.loadBundled() : undefined)
  }

  private static async loadBundled(): Promise<EspeakRuntime> {
    const runtime = await EspeakRuntime.load()
    if (runtime.sampleRate !== ESPEAK_SAMPLE_RATE) throw new TtsError("EngineUnavailable", `espeak-ng's bundled build runs at ${runtime.sampleRate} Hz, not ${ESPEAK_SAMPLE_RATE}`)
    return runtime
  }

  private async bundled(): Promise<EspeakRuntime> {
    return (this.bundledRuntime ??= await EspeakTts.loadBundled())
  }

  /** The languages of the builds loaded so far (the bundled build's once it has loaded). */
  get capabilities(): TtsCapabilities {
    const languages = new Set([...(this.native?.languageNames ?? []), ...(this.bundledRuntime?.languageNames ?? [])])
    return { engine: "espeak", languages: [...languages].sort(), sampleRates: [ESPEAK_SAMPLE_RATE], timing: "word" }
  }

  /** Which build speaks this request: "native" (libespeak-ng) or "bundled" (wasm2js). */
  buildFor(request: Pick<TtsRequest, "voice" | "speed">): "native" | "bundled" {
    return this.native?.speaks(request.voice.variant, this.params(request).rateWpm) === true ? "native" : "bundled"
  }

  sampleRateFor(_voice: EngineVoice): number {
    return ESPEAK_SAMPLE_RATE
  }

  /** Loads the bundled build for a voice the native library does not have. */
  async checkVoice(voice: EngineVoice): Promise<void> {
    if (voice.engine !== "espeak") throw new TtsError("VoiceNotFound", `voice is for engine ${voice.engine}, not espeak`)
    if (this.native?.has(voice.variant) !== true) (await this.bundled()).checkVoiceId(voice.variant)
  }

  async synthesize(request: TtsRequest): Promise<TtsResult> {
    const { samples, sampleCount, events } = await this.run(request)
    return { samples: int16ToFloat(samples), sampleRate: ESPEAK_SAMPLE_RATE, words: this.words(request, events, sampleCount) }
  }

  /** espeak's own blocks (100 ms of audio each, s16), as its synthesis callback delivers them. */
  async synthesizeBlocks(request: TtsRequest, onBlock: TtsBlockSink): Promise<TtsBlocksResult> {
    let stopped = false
    const { sampleCount, events } = await this.run(request, (block) => {
      stopped = !onBlock(block)
      return !stopped
    })
    const words = stopped ? [] : this.words(request, events, sampleCount)
    return { sampleRate: ESPEAK_SAMPLE_RATE, sampleCount, words, stopped }
  }

  private async run(request: TtsRequest, onBlock?: (block: Int16Array) => boolean) {
    checkRequest(request)
    await this.checkVoice(request.voice)
    const params = this.params(request)
    if (this.buildFor(request) === "native") {
      try {
        return this.native!.synthesize(request.voice.variant, params, request.text, onBlock)
      } catch (e) {
        // A copy that failed to load made no sound: the bundled build speaks the voice from now on.
        if (this.native!.has(request.voice.variant)) throw e
      }
    }
    return (await this.bundled()).withVoice(request.voice.variant, params, (s) => s.synthesize(request.text, onBlock))
  }

  private params(request: Pick<TtsRequest, "voice" | "speed">) {
    return { rateWpm: ESPEAK_DEFAULT_WPM * request.voice.rate * request.speed, pitch: 50 * request.voice.pitch }
  }

  private words(request: TtsRequest, events: ReadonlyArray<EspeakEvent>, sampleCount: number) {
    const durationMs = (sampleCount * 1000) / ESPEAK_SAMPLE_RATE
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
