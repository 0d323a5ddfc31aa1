/**
 * Piper-format neural voices (VITS `.onnx` + `.onnx.json`) through onnxruntime-node. Enabled only
 * when a deployment configures a directory of voices; none ship with the service.
 *
 * Front end as Piper does it: espeak-ng IPA per clause, clause punctuation re-appended
 * ("həlˈoʊ wˈɜːld, hˈaʊ ɑːɹ juː?"), NFD-decomposed, one id list per code point from
 * `phoneme_id_map`, laid out as BOS, PAD, (phoneme, PAD)*, EOS; unknown symbols are dropped.
 * Each sentence is one inference: `input` int64 [1, N], `input_lengths` int64 [1], `scales`
 * float [noise_scale, length_scale / (rate × speed), noise_w], `sid` int64 [1] when the model
 * has more than one speaker. Output audio is peak-normalised per sentence (as Piper's writer
 * does) and sentences are joined with `sentenceSilenceMs` of silence (Piper CLI default 200 ms).
 * Word timings are ESTIMATED: each sentence's audio is shared among its words in proportion to
 * their phoneme counts (VITS reports no durations).
 *
 * Voice id: `<model file stem>` or `<stem>:<speaker>` (speaker name from speaker_id_map, or a
 * numeric id). Models are read at load (configs) and compiled lazily on first use, each after
 * `makeRandomOpsDeterministic` so the same request gives the same samples. Sessions use one
 * intra-op thread by default: the pool already runs one worker per core.
 */
import { readdirSync, readFileSync } from "node:fs"
import * as ort from "onnxruntime-node"
import { EspeakRuntime, type EspeakSession } from "./EspeakRuntime.ts"
import { makeRandomOpsDeterministic } from "./OnnxProto.ts"
import { segmentSentences } from "../text/Segmenter.ts"
import { CONTROL, type PiperVoiceConfig, readConfig } from "./PiperConfig.ts"
export type { PiperVoiceConfig } from "./PiperConfig.ts"
import {
  checkRequest,
  TtsError,
  type EngineVoice,
  type TtsCapabilities,
  type TtsEngine,
  type TtsRequest,
  type TtsResult,
  type WordTiming
} from "./TtsEngine.ts"

export interface PiperOptions {
  /** Directory holding `<name>.onnx` with `<name>.onnx.json` side by side. */
  readonly directory: string
  /** Silence between sentences, ms. Default 200 (Piper CLI). */
  readonly sentenceSilenceMs?: number
  /** Seed of the noise bank that replaces the models' random ops. Default 0. */
  readonly noiseSeed?: number
  /** onnxruntime intra-op threads per session. Default 1. */
  readonly intraOpThreads?: number
}


export class PiperTts implements TtsEngine {
  readonly capabilities: TtsCapabilities
  private readonly voices: ReadonlyMap<string, PiperVoiceConfig>
  private readonly sessions = new Map<string, Promise<ort.InferenceSession>>()

  private constructor(
    private readonly espeak: EspeakRuntime,
    configs: ReadonlyArray<PiperVoiceConfig>,
    /** Files that were found but not usable, with the reason. */
    readonly skipped: ReadonlyArray<{ readonly file: string; readonly reason: string }>,
    private readonly options: PiperOptions
  ) {
    this.voices = new Map(configs.map((c) => [c.stem, c]))
    this.capabilities = {
      engine: "piper",
      languages: [...new Set(configs.map((c) => c.language))].sort(),
      sampleRates: [...new Set(configs.map((c) => c.sampleRate))].sort((a, b) => a - b),
      timing: "estimated"
    }
  }

  /** Reads every voice config in the directory (models are compiled on first use). */
  static async load(options: PiperOptions): Promise<PiperTts> {
    const espeak = await EspeakRuntime.load()
    let files: Array<string>
    try {
      files = readdirSync(options.directory)
    } catch (cause) {
      throw new TtsError("EngineUnavailable", `Piper voice directory ${options.directory} is not readable`, { cause })
    }
    const configs: Array<PiperVoiceConfig> = []
    const skipped: Array<{ file: string; reason: string }> = []
    for (const file of files.filter((f) => f.endsWith(".onnx")).sort()) {
      try {
        const config = readConfig(options.directory, file)
        espeak.checkVoiceId(config.espeakVoice)
        configs.push(config)
      } catch (e) {
        skipped.push({ file, reason: e instanceof Error ? e.message : String(e) })
      }
    }
    if (configs.length === 0) {
      throw new TtsError("EngineUnavailable", `no usable Piper voice in ${options.directory}${skipped.length ? `: ${skipped.map((s) => `${s.file}: ${s.reason}`).join("; ")}` : ""}`)
    }
    return new PiperTts(espeak, configs, skipped, options)
  }

  /** Model stems available. */
  get models(): ReadonlyArray<string> {
    return [...this.voices.keys()]
  }

  checkVoice(voice: EngineVoice): void {
    this.resolve(voice)
  }

  sampleRateFor(voice: EngineVoice): number {
    return this.resolve(voice).config.sampleRate
  }

  async synthesize(request: TtsRequest): Promise<TtsResult> {
    checkRequest(request)
    const { config, speaker } = this.resolve(request.voice)
    const sentences = segmentSentences(request.text, { locale: config.language })
    // All espeak work first, in one restored session (synchronous), then inference.
    const prepared = this.espeak.withVoice(config.espeakVoice, { rateWpm: 175, pitch: 50 }, (s) =>
      sentences.map((sentence) => ({
        sentence,
        ids: phonemeIds(config, phonemizeLikePiper(s, sentence.text)),
        words: wordWeights(s, request.text, sentence.charStart, sentence.charEnd, config.language)
      }))
    )
    const session = await this.session(config)
    const silence = Math.round(((this.options.sentenceSilenceMs ?? 200) * config.sampleRate) / 1000)
    const parts: Array<Float32Array> = []
    const words: Array<WordTiming> = []
    let offset = 0
    for (const [k, p] of prepared.entries()) {
      if (p.ids.length <= 3) continue // nothing but BOS/PAD/EOS: punctuation only
      const audio = await this.infer(session, config, p.ids, speaker, request.voice.rate * request.speed)
      if (k > 0 && parts.length > 0) {
        parts.push(new Float32Array(silence))
        offset += silence
      }
      parts.push(audio)
      spreadWords(p.words, request.text, (offset * 1000) / config.sampleRate, (audio.length * 1000) / config.sampleRate, words)
      offset += audio.length
    }
    const samples = new Float32Array(offset)
    let o = 0
    for (const part of parts) {
      samples.set(part, o)
      o += part.length
    }
    return { samples, sampleRate: config.sampleRate, words }
  }

  private resolve(voice: EngineVoice): { config: PiperVoiceConfig; speaker: number } {
    if (voice.engine !== "piper") throw new TtsError("VoiceNotFound", `voice is for engine ${voice.engine}, not piper`)
    const colon = voice.variant.lastIndexOf(":")
    const stem = colon < 0 ? voice.variant : voice.variant.slice(0, colon)
    const config = this.voices.get(stem)
    if (config === undefined) throw new TtsError("VoiceNotFound", `no Piper model "${stem}" (have ${this.models.join(", ")})`)
    if (colon < 0) return { config, speaker: 0 }
    const name = voice.variant.slice(colon + 1)
    const speaker = config.speakerIds[name] ?? (/^\d+$/.test(name) ? Number(name) : NaN)
    if (!(speaker >= 0 && speaker < config.numSpeakers)) throw new TtsError("VoiceNotFound", `Piper model "${stem}" has no speaker "${name}"`)
    return { config, speaker }
  }

  private session(config: PiperVoiceConfig): Promise<ort.InferenceSession> {
    let s = this.sessions.get(config.stem)
    if (s === undefined) {
      s = (async () => {
        const { model } = makeRandomOpsDeterministic(readFileSync(config.modelPath), this.options.noiseSeed ?? 0)
        return ort.InferenceSession.create(model, {
          intraOpNumThreads: this.options.intraOpThreads ?? 1,
          interOpNumThreads: 1,
          executionMode: "sequential",
          logSeverityLevel: 3
        })
      })().catch((cause: unknown) => {
        this.sessions.delete(config.stem)
        throw new TtsError("EngineUnavailable", `Piper model ${config.stem} failed to load`, { cause })
      })
      this.sessions.set(config.stem, s)
    }
    return s
  }

  private async infer(session: ort.InferenceSession, config: PiperVoiceConfig, ids: ReadonlyArray<number>, speaker: number, speed: number): Promise<Float32Array> {
    const feeds: Record<string, ort.Tensor> = {
      input: new ort.Tensor("int64", BigInt64Array.from(ids, BigInt), [1, ids.length]),
      input_lengths: new ort.Tensor("int64", BigInt64Array.of(BigInt(ids.length)), [1]),
      scales: new ort.Tensor("float32", Float32Array.of(config.noiseScale, config.lengthScale / speed, config.noiseW), [3])
    }
    if (config.numSpeakers > 1) feeds.sid = new ort.Tensor("int64", BigInt64Array.of(BigInt(speaker)), [1])
    let result: ort.InferenceSession.OnnxValueMapType
    try {
      result = await session.run(feeds)
    } catch (cause) {
      throw new TtsError("EngineFailed", `Piper inference failed (${config.stem})`, { cause })
    }
    const out = result[session.outputNames[0]!]
    if (out === undefined || !(out.data instanceof Float32Array)) throw new TtsError("EngineFailed", `Piper model ${config.stem} returned no float audio`)
    const audio = Float32Array.from(out.data)
    let peak = 0
    for (const v of audio) peak = Math.max(peak, Math.abs(v))
    const gain = 1 / Math.max(0.01, peak)
    for (let i = 0; i < audio.length; i++) audio[i] = Math.max(-1, Math.min(1, audio[i]! * gain))
    return audio
  }
}

/** Phoneme string of one sentence, clause by clause with punctuation, as piper-phonemize makes it. */
export const phonemizeLikePiper = (s: EspeakSession, sentence: string): string => {
  const parts: Array<string> = []
  for (const m of sentence.matchAll(/([^,;:!?.…]*)([,;:!?.…]*)/gu)) {
    const [, body = "", punctuation = ""] = m
    if (body.trim().length === 0 && punctuation.length === 0) continue
    const ipa = body.trim().length === 0 ? "" : s.textToIpa(body).replaceAll(" | ", " ").replaceAll("_", "").trim()
    const mark = punctuation.length === 0 ? "" : punctuation.includes("?") ? "?" : punctuation.includes("!") ? "!" : punctuation[0] === "…" ? "." : punctuation[0]!
    const piece = ipa + mark
    if (piece.length > 0) parts.push(piece)
  }
  return parts.join(" ")
}

/** BOS, PAD, (id, PAD)*, EOS; code points missing from the map are skipped. */
export const phonemeIds = (config: Pick<PiperVoiceConfig, "idMap">, phonemes: string): Array<number> => {
  const id = (s: string) => config.idMap.get(s)!
  const ids = [...id("^"), ...id("_")]
  for (const cp of phonemes.normalize("NFD")) {
    if (CONTROL.has(cp)) continue
    const mapped = config.idMap.get(cp)
    if (mapped === undefined) continue
    ids.push(...mapped, ...id("_"))
  }
  ids.push(...id("$"))
  return ids
}

interface WeightedWord {
  readonly charStart: number
  readonly charEnd: number
  readonly weight: number
}

/** Words of text[start, end) (ICU word rules) weighted by their phoneme counts. */
const wordWeights = (s: EspeakSession, text: string, start: number, end: number, locale: string): Array<WeightedWord> => {
  const out: Array<WeightedWord> = []
  for (const w of new Intl.Segmenter(locale, { granularity: "word" }).segment(text.slice(start, end))) {
    if (!w.isWordLike) continue
    const phones = s.textToIpa(w.segment).replace(/[_\sˈˌ|]/gu, "")
    out.push({ charStart: start + w.index, charEnd: start + w.index + w.segment.length, weight: Math.max(1, [...phones].length) })
  }
  return out
}

/** Shares [offsetMs, offsetMs + durationMs) among words by weight; appends to `into`. */
const spreadWords = (words: ReadonlyArray<WeightedWord>, text: string, offsetMs: number, durationMs: number, into: Array<WordTiming>) => {
  const total = words.reduce((a, w) => a + w.weight, 0)
  let acc = 0
  for (const w of words) {
    const startMs = offsetMs + (durationMs * acc) / total
    acc += w.weight
    into.push({ text: text.slice(w.charStart, w.charEnd), startMs, endMs: offsetMs + (durationMs * acc) / total, charStart: w.charStart, charEnd: w.charEnd })
  }
}
