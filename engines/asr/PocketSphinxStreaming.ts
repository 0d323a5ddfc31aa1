/**
 * PocketSphinx as a streaming layer (StreamingAsr.ts): the decoder of PocketSphinxAsr.ts driven
 * utterance by utterance, `ps_start_utt` → `ps_process_raw` (not full_utt) per pushed block →
 * `ps_get_hyp` for partials → `ps_end_utt` and the best path's segments at commit.
 *
 * DECODER MEMORY. One en-us decoder is ≈ 97 MB of RSS and ≈ 0.6 s to build (measured here: 4
 * decoders in one process, 96-98 MB each; `-mmap yes`, `-fwdflat no` change nothing). 5prealpha
 * has no public way to share the acoustic model, dictionary or language model between decoders
 * (each `ps_init` reads its own), so sharing is not an option. Instead a session holds a decoder
 * only WHILE AN UTTERANCE RUNS: the first block after a commit takes one from this thread's
 * pool, the commit (or reset, or close) gives it back. An idle session (connected, nothing said
 * since its last commit) holds none: its memory is its converter's state, a few KB. Decoders live
 * = the most utterances that ran at once on the thread; spares are freed after `releaseAfterMs`
 * unused, down to one while the thread hosts a session, to none when it hosts none.
 *
 * What a shared decoder could carry from one utterance to the next: `ps_start_stream` at each
 * utterance resets the noise floor (PocketSphinxAsr.ts says why), and the dither restarts, so a
 * streamed utterance gets the samples a one-call recognition of the same audio gets. Live CMN
 * (cepstral mean, not full_utt) starts from the mean the decoder last saw, so the first ~0.5 s
 * of an utterance may decode slightly differently depending on the decoder's last utterance.
 *
 * Partials: `ps_get_hyp` walks the search's best path so far, so it runs once per
 * `partialEveryMs` of audio (default 160 ms), not per block; a smaller block gets the last
 * hypothesis back.
 *
 * FINAL PASS. The live pass cannot normalise its features as a whole-utterance decode does:
 * live CMN starts from the model's initial cepstral mean (`-cmninit`) and adapts only between
 * utterances, so on a fresh decoder the first utterance decoded 30 % of its words differently
 * from the synchronous recognizer (LibriVox 0870: "guess what and then" for "guess would have
 * been"; µ-law 8 kHz 78 %). So `commit` by default decodes the utterance again in one `full_utt`
 * call from the same dithered samples kept during the live pass, on the thread's FINAL-PASS
 * DECODER: one per thread, shared by its sessions one commit at a time, that never sees a live
 * block. It must be a decoder of its own: sphinxbase's feat_cmn switches a decoder to live CMN
 * for good at its first block-mode call (`fcb->cmn = CMN_LIVE`), after which even a `full_utt`
 * call blends in the CMN of earlier utterances (measured: the same µ-law audio then gave other
 * words than the synchronous recognizer). With it, the committed words are exactly the
 * synchronous recognizer's on that audio. The live decoders then only make partials, so they run
 * without the fwdflat pass (`-fwdflat no`): their ps_end_utt at commit costs ~5 ms instead of
 * ~200 ms per 7 s. Cost: the final pass (≈ the live decode's CPU again, at commit: the commit's
 * latency grows with the utterance; bench/sttStreamingRtf.ts), one more decoder per thread, and
 * 32 KB per second of utterance held until the commit. `finalPass: "live"` keeps the live pass's
 * words (with fwdflat) and a cheap commit instead.
 *
 * PREPARED FINAL PASS (`prepare`, the VAD's silence onset): the final pass runs on the samples
 * kept so far while the pause lasts, and its words wait; a commit told that only silence came
 * since (`prepared`) answers them after one ps_end_utt of the live decoder. They are the words of
 * the utterance without its trailing silence: the final pass of the same samples a plain commit
 * decodes, less that silence. A prepare is one synchronous full_utt call on this thread: the
 * session's next audio waits behind it (and is decoded by the live decoder, never lost); if
 * speech resumes its words are dropped, its CPU spent.
 *
 * Toward dropping the final pass (not done): priming live CMN. sphinxbase's cmn_live_set is not
 * reachable through 5prealpha's public API, but within it, tried by hand on the five LibriVox
 * recordings (WER against their transcriptions): after the utterance's first second, end it
 * (ps_end_utt updates live CMN from that second), restart it and feed that second again: live
 * words 31.0 % WER against the synchronous 28.2 % (cold live pass 38.0 %), for ~1 s more
 * decoding per utterance and a commit of one ps_end_utt.
 */
import { ASR_SAMPLE_RATE, AsrError, type AsrWord, checkLanguage } from "./AsrEngine.ts"
import { DITHER_SEED, ditheredInt16, PocketSphinxAsr, type PocketSphinxOptions } from "./PocketSphinxAsr.ts"
import type { StreamingAsrConfig, StreamingAsrEngine, StreamingCommit, StreamingDecoder } from "./StreamingAsr.ts"
import { trimNativeHeap } from "../NativeHeap.ts"
import { joinBlocks } from "../audio/Pcm.ts"

export interface PocketSphinxStreamingOptions {
  readonly pocketsphinx?: PocketSphinxOptions
  /** Audio between two partial hypotheses, ms; default 160. */
  readonly partialEveryMs?: number
  /** Spare decoders unused this long are freed, ms; default 30 s. */
  readonly releaseAfterMs?: number
  /** "full" (default): commit decodes the utterance again as a whole (see FINAL PASS); "live": the live pass's words. */
  readonly finalPass?: "full" | "live"
}

const CAPABILITIES = { engine: "pocketsphinx", languages: ["en"], detectsLanguage: false } as const

/** This thread's decoders of one configuration. */
class DecoderPool {
  private readonly free: Array<PocketSphinxAsr> = []
  live = 0
  inUse = 0
  /** Open sessions of this configuration on the thread (a spare is kept while there are any). */
  sessions = 0
  private timer: ReturnType<typeof setTimeout> | undefined
  releaseAfterMs = 30_000
  /** The thread's final-pass decoder (FINAL PASS): whole utterances only, never a live block. */
  private finalDecoder: Promise<PocketSphinxAsr> | undefined

  /** `options` build the final-pass decoder; `liveOptions` the live ones. */
  constructor(private readonly options: PocketSphinxOptions, private readonly liveOptions: PocketSphinxOptions) {}

  /** The final-pass decoder, built on first use (≈ 0.6 s); one per thread, used one commit at a time. */
  final(): Promise<PocketSphinxAsr> {
    if (this.finalDecoder === undefined) {
      const loading = PocketSphinxAsr.load(this.options)
      this.finalDecoder = loading
      loading.then(() => this.live++, () => {
        if (this.finalDecoder === loading) this.finalDecoder = undefined
      })
    }
    return this.finalDecoder
  }

  /** A decoder for an utterance; builds one (≈ 0.6 s, blocking this thread) when none is spare. */
  async take(): Promise<PocketSphinxAsr> {
    const spare = this.free.pop()
    if (spare !== undefined) {
      this.inUse++
      return spare
    }
    const built = await PocketSphinxAsr.load(this.liveOptions)
    this.live++
    this.inUse++
    return built
  }

  give(decoder: PocketSphinxAsr): void {
    this.inUse--
    this.free.push(decoder)
    this.schedule()
  }

  /** Builds a spare ahead of the first utterance, so a session's first words do not wait for it. */
  async warm(): Promise<void> {
    if (this.free.length > 0) return
    this.free.push(await PocketSphinxAsr.load(this.liveOptions))
    this.live++
    this.schedule()
  }

  schedule(): void {
    clearTimeout(this.timer)
    // Not at once when the last session goes: the next one would pay the 0.6 s build at its open.
    this.timer = setTimeout(() => this.release(), this.releaseAfterMs)
    this.timer.unref()
  }

  private release(): void {
    const keep = this.sessions > 0 ? 1 : 0
    let freed = 0
    while (this.free.length > keep) {
      this.free.pop()!.dispose()
      this.live--
      freed++
    }
    if (this.sessions === 0 && this.finalDecoder !== undefined) {
      const held = this.finalDecoder
      this.finalDecoder = undefined
      held.then((d) => {
        d.dispose()
        this.live--
        trimNativeHeap()
      }, () => {})
    }
    if (freed > 0) trimNativeHeap()
  }
}

const pools = new Map<string, DecoderPool>()

const poolFor = (options: PocketSphinxStreamingOptions): DecoderPool => {
  const ps = options.pocketsphinx ?? {}
  const fullPass = (options.finalPass ?? "full") === "full"
  const key = JSON.stringify([ps.libraryPath, ps.modelDirectory, ps.extraArgs, fullPass])
  let pool = pools.get(key)
  // With a final pass the live decoders only make partials: no fwdflat pass, so that their
  // ps_end_utt at commit costs ~5 ms instead of ~200 ms per 7 s (measured).
  const live = fullPass ? { ...ps, extraArgs: [...(ps.extraArgs ?? []), "-fwdflat", "no"] } : ps
  if (pool === undefined) pools.set(key, (pool = new DecoderPool(ps, live)))
  if (options.releaseAfterMs !== undefined) pool.releaseAfterMs = options.releaseAfterMs
  return pool
}

/** Decoders on this thread, all configurations: built, and held by an utterance now. */
export const pocketSphinxDecoderStats = (): { readonly live: number; readonly inUse: number } => {
  let live = 0
  let inUse = 0
  for (const p of pools.values()) {
    live += p.live
    inUse += p.inUse
  }
  return { live, inUse }
}

/** The hypothesis as words: no pronunciation variants (`word(2)`), no fillers (`<sil>`, `[NOISE]`). */
const wordText = (hyp: string | null): string =>
  (hyp ?? "").split(/\s+/).filter((w) => w !== "" && !/^<.*>$|^\[.*\]$|^\+\+.*\+\+$/.test(w)).map((w) => w.replace(/\(\d+\)$/, "")).join(" ")

interface Utterance {
  readonly asr: PocketSphinxAsr
  /** Session-clock sample of its first sample. */
  readonly startSample: number
  samples: number
  sinceHyp: number
  hyp: string
  readonly dither: { seed: number }
  /** The dithered samples so far, for the final pass (none kept with finalPass "live"). */
  readonly kept: Array<Int16Array>
  /** Words of the final pass over the samples kept at the last `prepare`, times from the utterance's start. */
  prepared?: ReadonlyArray<AsrWord>
}

export const pocketSphinxStreaming = (options: PocketSphinxStreamingOptions = {}): StreamingAsrEngine & { readonly warm: () => Promise<void> } => {
  const pool = poolFor(options)
  const partialEvery = Math.max(1, Math.round(((options.partialEveryMs ?? 160) * ASR_SAMPLE_RATE) / 1000))
  const fullPass = (options.finalPass ?? "full") === "full"
  return {
    capabilities: CAPABILITIES,
    warm: () => pool.warm(),
    open: (config: StreamingAsrConfig): StreamingDecoder => {
      const language = checkLanguage(CAPABILITIES, config.language === undefined ? undefined : { language: config.language })
      if (config.sampleRate !== ASR_SAMPLE_RATE) throw new RangeError(`the streaming decoder takes ${ASR_SAMPLE_RATE} Hz, got ${config.sampleRate}`)
      pool.sessions++
      let clock = 0
      let utt: Utterance | undefined
      let closed = false
      const ms = (samples: number) => (samples * 1000) / ASR_SAMPLE_RATE
      /** Ends the live utterance and gives its decoder back (reset, close): synchronous, no words. */
      const drop = (): void => {
        const u = utt
        utt = undefined
        if (u === undefined) return
        try {
          if (u.asr.lib.ps_end_utt(u.asr.ps) < 0) throw new AsrError("EngineFailed", "ps_end_utt failed")
        } finally {
          pool.give(u.asr)
        }
      }
      /** The final pass over the utterance's kept samples: its words, times from the utterance's start. */
      const finalPass = async (u: Utterance): Promise<ReadonlyArray<AsrWord>> => {
        // No await from here to the words: sessions of this thread share the final decoder.
        const decoded = await pool.final()
        const whole = joinBlocks(u.kept)
        const { lib, ps } = decoded
        const searched = lib.ps_start_stream(ps) < 0 || lib.ps_start_utt(ps) < 0 ? -1 : lib.ps_process_raw(ps, whole, whole.length, 0, 1)
        // Always end the utterance, or the decoder refuses the next start.
        if (lib.ps_end_utt(ps) < 0 || searched < 0) throw new AsrError("EngineFailed", "the final pass failed")
        return decoded.words(ms(whole.length))
      }
      /** Ends the utterance: its words, from the final pass (prepared, or run now) or the live one. */
      const finish = async (usePrepared: boolean): Promise<StreamingCommit> => {
        const u = utt
        utt = undefined
        if (u === undefined) return { language, words: [], startMs: ms(clock), endMs: ms(clock) }
        try {
          if (u.asr.lib.ps_end_utt(u.asr.ps) < 0) throw new AsrError("EngineFailed", "ps_end_utt failed")
          const own = !fullPass ? u.asr.words(ms(u.samples)) : usePrepared && u.prepared !== undefined ? u.prepared : await finalPass(u)
          const offsetMs = ms(u.startSample)
          const words = own.map((w) => ({ ...w, startMs: w.startMs + offsetMs, endMs: w.endMs + offsetMs }))
          return { language, words, startMs: offsetMs, endMs: offsetMs + ms(u.samples) }
        } finally {
          pool.give(u.asr)
        }
      }
      return {
        push: async (pcm) => {
          if (closed) throw new AsrError("EngineUnavailable", "the streaming decoder is closed")
          if (pcm.length === 0) return utt?.hyp ?? ""
          if (utt === undefined) {
            const asr = await pool.take()
            if (asr.lib.ps_start_stream(asr.ps) < 0 || asr.lib.ps_start_utt(asr.ps) < 0) {
              pool.give(asr)
              throw new AsrError("EngineFailed", "ps_start_utt failed")
            }
            utt = { asr, startSample: clock, samples: 0, sinceHyp: 0, hyp: "", dither: { seed: DITHER_SEED }, kept: [] }
          }
          const u = utt
          const block = ditheredInt16(pcm, u.dither)
          if (fullPass) u.kept.push(block)
          if (u.asr.lib.ps_process_raw(u.asr.ps, block, block.length, 0, 0) < 0) throw new AsrError("EngineFailed", "ps_process_raw failed")
          clock += pcm.length
          u.samples += pcm.length
          u.sinceHyp += pcm.length
          if (u.sinceHyp >= partialEvery) {
            u.sinceHyp = 0
            u.hyp = wordText(u.asr.lib.ps_get_hyp(u.asr.ps, [0]))
          }
          return u.hyp
        },
        commit: async (o) => {
          if (closed) throw new AsrError("EngineUnavailable", "the streaming decoder is closed")
          return finish(o?.prepared === true)
        },
        prepare: async () => {
          const u = utt
          if (closed || !fullPass || u === undefined) return
          u.prepared = undefined
          const words = await finalPass(u)
          // The utterance may have been committed or dropped while the final decoder was built.
          if (utt === u) u.prepared = words
        },
        reset: drop,
        close: () => {
          if (closed) return
          closed = true
          try {
            drop()
          } finally {
            pool.sessions--
            pool.schedule()
          }
        }
      }
    }
  }
}
