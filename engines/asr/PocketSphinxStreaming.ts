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
 * = the most utterances that ran at once on the thread; spares beyond one are freed after
 * `releaseAfterMs` unused (all of them once the thread hosts no session).
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
 * from the synchronous recognizer (measured on LibriVox 0870: "guess what and then" for "guess
 * would have been", 30.4 % WER between the two; µ-law 8 kHz 78 %). So `commit` by default
 * decodes the utterance again in one `full_utt` call (batch CMN), from the same dithered samples
 * kept during the live pass: its words are then exactly the synchronous recognizer's on that
 * audio. Cost: a second decode of the utterance at commit and 32 KB of samples per second of
 * utterance held until then. Measured on 0870 (7.1 s; CPU ms, a machine at load 10-19 on 2
 * cores): live pass 810-1110, its ps_end_utt (the fwdflat pass) 200-300, the final pass 790-1270
 * more: the commit costs about as much CPU as the live decode did, so its latency grows with the
 * utterance (bench/sttStreamingRtf.ts). `finalPass: "live"` keeps the live pass's words and a
 * cheap commit instead. Measured too: the same decoder's SECOND live pass over the same audio
 * (its CMN warmed by the first) came within 2 words of the synchronous ones, so priming live CMN
 * (sphinxbase's cmn_live_set, not reachable through 5prealpha's public API) is the way to drop
 * the final pass; not done yet.
 */
import { ASR_SAMPLE_RATE, AsrError, checkLanguage } from "./AsrEngine.ts"
import { DITHER_SEED, ditheredInt16, PocketSphinxAsr, type PocketSphinxOptions } from "./PocketSphinxAsr.ts"
import type { StreamingAsrConfig, StreamingAsrEngine, StreamingCommit, StreamingDecoder } from "./StreamingAsr.ts"
import { trimNativeHeap } from "../NativeHeap.ts"

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

  constructor(private readonly options: PocketSphinxOptions) {}

  /** A decoder for an utterance; builds one (≈ 0.6 s, blocking this thread) when none is spare. */
  async take(): Promise<PocketSphinxAsr> {
    const spare = this.free.pop()
    if (spare !== undefined) {
      this.inUse++
      return spare
    }
    const built = await PocketSphinxAsr.load(this.options)
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
    this.free.push(await PocketSphinxAsr.load(this.options))
    this.live++
    this.schedule()
  }

  schedule(): void {
    clearTimeout(this.timer)
    this.timer = setTimeout(() => this.release(), this.sessions === 0 ? 0 : this.releaseAfterMs)
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
    if (freed > 0) trimNativeHeap()
  }
}

const pools = new Map<string, DecoderPool>()

const poolFor = (options: PocketSphinxStreamingOptions): DecoderPool => {
  const ps = options.pocketsphinx ?? {}
  const key = JSON.stringify([ps.libraryPath, ps.modelDirectory, ps.extraArgs])
  let pool = pools.get(key)
  if (pool === undefined) pools.set(key, (pool = new DecoderPool(ps)))
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
const joinSamples = (parts: ReadonlyArray<Int16Array>): Int16Array => {
  if (parts.length === 1) return parts[0]!
  const out = new Int16Array(parts.reduce((n, p) => n + p.length, 0))
  let at = 0
  for (const p of parts) {
    out.set(p, at)
    at += p.length
  }
  return out
}

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
      /** Ends the utterance in the decoder and gives the decoder back; the words when asked. */
      const finish = (decode: boolean): StreamingCommit => {
        const u = utt
        utt = undefined
        if (u === undefined) return { language, words: [], startMs: ms(clock), endMs: ms(clock) }
        const { lib, ps } = u.asr
        try {
          if (lib.ps_end_utt(ps) < 0) throw new AsrError("EngineFailed", "ps_end_utt failed")
          if (decode && fullPass) {
            const whole = joinSamples(u.kept)
            const searched = lib.ps_start_stream(ps) < 0 || lib.ps_start_utt(ps) < 0 ? -1 : lib.ps_process_raw(ps, whole, whole.length, 0, 1)
            // Always end the utterance, or the decoder refuses the next start.
            if (lib.ps_end_utt(ps) < 0 || searched < 0) throw new AsrError("EngineFailed", "the final pass failed")
          }
          const offsetMs = ms(u.startSample)
          const words = decode
            ? u.asr.words(ms(u.samples)).map((w) => ({ ...w, startMs: w.startMs + offsetMs, endMs: w.endMs + offsetMs }))
            : []
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
        commit: async () => {
          if (closed) throw new AsrError("EngineUnavailable", "the streaming decoder is closed")
          return finish(true)
        },
        reset: () => {
          finish(false)
        },
        close: () => {
          if (closed) return
          closed = true
          try {
            finish(false)
          } finally {
            pool.sessions--
            pool.schedule()
          }
        }
      }
    }
  }
}
