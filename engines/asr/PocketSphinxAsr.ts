/**
 * PocketSphinx 5prealpha (Debian `libpocketsphinx3` + `pocketsphinx-en-us`) behind AsrEngine:
 * US English, continuous speech with the generic trigram language model `en-us.lm.bin`, the
 * CMU dictionary (134k entries) and the `en-us` PTM acoustic model. Called in-process through koffi
 * (PocketSphinxFfi.ts), one decoder per worker thread, never a process per request.
 *
 * One `recognize` = one utterance: start, the whole input in one `ps_process_raw` call with
 * `full_utt` set (the whole utterance is there at once, so feature normalisation can use all
 * of it), end, then the best path's word segments with their posteriors. Feed it VAD segments (≤ ~20 s):
 * memory and latency grow with utterance length.
 *
 * Settings that matter:
 *  - `-remove_silence no`: 5prealpha's default drops frames its own energy VAD calls silence
 *    before the search, and word frames then count only the kept frames (measured: a word at
 *    2.16 s reported at 0.29 s after 2 s of leading silence). Silero VAD runs upstream instead.
 *  - `-bestpath yes` (default): without it `ps_seg_prob` is 0 for every word.
 *  - `ps_start_stream` before every utterance: `-remove_noise` tracks the noise floor across
 *    utterances of a stream, so without it the same audio got different posteriors (0.97 vs
 *    0.39 for one word) depending on what the thread recognised before. With it a result
 *    depends only on its input, whichever worker runs it.
 *  - Dither of ±1 LSB from a generator restarted at every call: exact digital zeros make
 *    log-energy features degenerate, and 2 s of them "recognised" as a different word each time
 *    ("dog", "when", "her") depending on leftover state. PocketSphinx's own `-dither` seeds once
 *    per process, which would make results depend on history again.
 *
 * Hazard: see PocketSphinxFfi.ts (E_FATAL exits the process, so every model file is checked
 * before `ps_init`; a decoder is not freed when its thread is terminated).
 */
import { accessSync, constants } from "node:fs"
import * as path from "node:path"
import { ASR_SAMPLE_RATE, AsrError, checkLanguage, type AsrCapabilities, type AsrEngine, type AsrOptions, type AsrResult, type AsrWord } from "./AsrEngine.ts"
import { requireKoffi } from "../Koffi.ts"
import { openPocketSphinx, type Decoder, type LogMath, type PocketSphinxLib } from "./PocketSphinxFfi.ts"

export interface PocketSphinxOptions {
  /** dlopen name or path of the library; default the soname Debian installs. */
  readonly libraryPath?: string
  /** Directory holding `en-us/` (acoustic model), `en-us.lm.bin` and `cmudict-en-us.dict`. */
  readonly modelDirectory?: string
  /** Extra decoder arguments, e.g. `["-beam", "1e-60"]`; unknown names fail the load. */
  readonly extraArgs?: ReadonlyArray<string>
}

export const POCKETSPHINX_DEFAULTS = {
  libraryPath: "libpocketsphinx.so.3",
  modelDirectory: "/usr/share/pocketsphinx/model/en-us"
} as const

/** Debian packages to name when something is missing. */
export const POCKETSPHINX_PACKAGES = { library: "libpocketsphinx3", model: "pocketsphinx-en-us" } as const

interface ModelFiles {
  readonly hmm: string
  readonly lm: string
  readonly dict: string
}

const modelFiles = (modelDirectory: string): ModelFiles => ({
  hmm: path.join(modelDirectory, "en-us"),
  lm: path.join(modelDirectory, "en-us.lm.bin"),
  dict: path.join(modelDirectory, "cmudict-en-us.dict")
})

/** Files ps_init reads; a missing one could reach E_FATAL (process exit), so all are checked. */
const requiredFiles = (m: ModelFiles): Array<string> => [
  m.lm,
  m.dict,
  ...["mdef", "means", "variances", "transition_matrices", "sendump", "feat.params", "noisedict"].map((f) => path.join(m.hmm, f))
]

/** What an operator types to get the engine back (the `pocketsphinx` package pulls `libpocketsphinx3`). */
export const POCKETSPHINX_INSTALL = "apt install pocketsphinx pocketsphinx-en-us"

const unavailable = (what: string, missing: string, cause?: unknown, registry = "Debian"): AsrError =>
  new AsrError(
    "EngineUnavailable",
    registry === "Debian"
      ? `PocketSphinx is unavailable: ${what} (the Debian package ${missing} is missing: ${POCKETSPHINX_INSTALL}; or set POCKETSPHINX_LIBRARY / POCKETSPHINX_MODEL_DIR)`
      : `PocketSphinx is unavailable: ${what} (install the ${registry} package ${missing})`,
    { cause, missing }
  )

const detail = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause))

const resolved = (options: PocketSphinxOptions) => ({
  libraryPath: options.libraryPath ?? POCKETSPHINX_DEFAULTS.libraryPath,
  modelDirectory: options.modelDirectory ?? POCKETSPHINX_DEFAULTS.modelDirectory
})

const openLibrary = (libraryPath: string): PocketSphinxLib => {
  try {
    requireKoffi()
  } catch (cause) {
    throw unavailable(`the FFI module koffi does not load: ${detail(cause)}`, "koffi", cause, "npm")
  }
  try {
    return openPocketSphinx(libraryPath)
  } catch (cause) {
    throw unavailable(`cannot load ${libraryPath}: ${detail(cause)}`, POCKETSPHINX_PACKAGES.library, cause)
  }
}

const checkModel = (files: ModelFiles): void => {
  for (const file of requiredFiles(files)) {
    try {
      accessSync(file, constants.R_OK)
    } catch (cause) {
      throw unavailable(`model file ${file} is missing or unreadable`, POCKETSPHINX_PACKAGES.model, cause)
    }
  }
}

/** Where the dither generator starts: every utterance starts here. */
export const DITHER_SEED = 0x2545f491

/**
 * A copy of the input with deterministic ±1 LSB dither (an LCG restarted at every call, or
 * continued from `state` when one is given: a streamed utterance then gets exactly the dither
 * of the same audio in one call), clipped to 16 bits; Float32 is scaled by 32768 as in Pcm.ts.
 */
export const ditheredInt16 = (pcm: Float32Array | Int16Array, state?: { seed: number }): Int16Array => {
  const out = new Int16Array(pcm.length)
  const scale = pcm instanceof Int16Array ? 1 : 32768
  let seed = state?.seed ?? DITHER_SEED
  for (let i = 0; i < pcm.length; i++) {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0
    const x = pcm[i]! * scale
    const v = Math.round((x !== x ? 0 : x) + ((seed >>> 16) % 3) - 1) // NaN counts as silence
    out[i] = v > 32767 ? 32767 : v < -32768 ? -32768 : v
  }
  if (state !== undefined) state.seed = seed
  return out
}

/** Pronunciation variants are spelled `word(2)`; fillers are `<s>`, `</s>`, `<sil>`, `[NOISE]`. */
const wordOf = (token: string): string | undefined => {
  if (/^<.*>$|^\[.*\]$|^\+\+.*\+\+$/.test(token)) return undefined
  const text = token.replace(/\(\d+\)$/, "")
  return text.length > 0 ? text : undefined
}

export class PocketSphinxAsr implements AsrEngine {
  readonly capabilities: AsrCapabilities = { engine: "pocketsphinx", languages: ["en"], detectsLanguage: false }
  private disposed = false

  /**
   * `lib` and `ps` are public for the streaming layer (PocketSphinxStreaming.ts), which drives
   * the same decoder utterance by utterance; nothing else should call into them.
   */
  private constructor(
    readonly lib: PocketSphinxLib,
    readonly ps: Decoder,
    private readonly logmath: LogMath,
    /** ms per decoder frame (10 at the default 100 frames/s). */
    private readonly frameMs: number,
    readonly loadMs: number
  ) {}

  /**
   * Checks that the library loads and every model file is readable, without building a decoder
   * (cheap: for readiness probes and start-up logs). Returns the error `load` would throw.
   */
  static check(options: PocketSphinxOptions = {}): AsrError | undefined {
    const o = resolved(options)
    try {
      openLibrary(o.libraryPath)
      checkModel(modelFiles(o.modelDirectory))
      return undefined
    } catch (e) {
      if (AsrError.is(e)) return e
      throw e
    }
  }

  /** Builds a decoder (≈ 0.3–0.7 s); once per worker thread. Throws AsrError EngineUnavailable. */
  static async load(options: PocketSphinxOptions = {}): Promise<PocketSphinxAsr> {
    const t0 = performance.now()
    const o = resolved(options)
    const lib = openLibrary(o.libraryPath)
    const files = modelFiles(o.modelDirectory)
    checkModel(files)
    lib.err_set_logfp(null)
    const argv = [
      "-hmm", files.hmm, "-lm", files.lm, "-dict", files.dict,
      "-samprate", String(ASR_SAMPLE_RATE), "-remove_silence", "no", "-bestpath", "yes",
      ...(options.extraArgs ?? [])
    ]
    const config = lib.cmd_ln_parse_r(null, lib.ps_args(), argv.length, argv, 1)
    if (config === null) throw new AsrError("EngineUnavailable", `PocketSphinx rejected its arguments (extraArgs ${JSON.stringify(options.extraArgs ?? [])})`)
    const frameRate = lib.cmd_ln_int_r(config, "-frate")
    const ps = lib.ps_init(config)
    lib.cmd_ln_free_r(config) // ps_init retained its own reference
    if (ps === null) throw unavailable(`ps_init failed for the model in ${o.modelDirectory}`, POCKETSPHINX_PACKAGES.model)
    return new PocketSphinxAsr(lib, ps, lib.ps_get_logmath(ps), 1000 / frameRate, performance.now() - t0)
  }

  async recognize(pcm16k: Float32Array | Int16Array, options?: AsrOptions): Promise<AsrResult> {
    if (this.disposed) throw new AsrError("EngineUnavailable", "PocketSphinx engine was disposed")
    const language = checkLanguage(this.capabilities, options)
    if (pcm16k.length === 0) return { language, words: [] }
    const pcm = ditheredInt16(pcm16k)
    const { lib, ps } = this
    if (lib.ps_start_stream(ps) < 0 || lib.ps_start_utt(ps) < 0) throw new AsrError("EngineFailed", "ps_start_utt failed")
    const searched = lib.ps_process_raw(ps, pcm, pcm.length, 0, 1)
    // Always end the utterance, or the decoder refuses the next start.
    const ended = lib.ps_end_utt(ps)
    if (searched < 0 || ended < 0) throw new AsrError("EngineFailed", `ps_process_raw/ps_end_utt failed (${searched}, ${ended})`)
    return { language, words: this.words((pcm.length * 1000) / ASR_SAMPLE_RATE) }
  }

  /**
   * Best-path segments → words of the utterance just ended (`ps_end_utt`); times from its first
   * sample, clamped to its duration, ms.
   */
  words(durationMs: number): Array<AsrWord> {
    const { lib, ps, logmath, frameMs } = this
    const words: Array<AsrWord> = []
    const sf = [0]
    const ef = [0]
    const scratch = [0]
    // Iterating to the end frees the iterator (ps_seg_next returns NULL after freeing it).
    for (let seg = lib.ps_seg_iter(ps); seg !== null; seg = lib.ps_seg_next(seg)) {
      const text = wordOf(lib.ps_seg_word(seg))
      if (text === undefined) continue
      lib.ps_seg_frames(seg, sf, ef)
      const logp = Math.min(0, lib.ps_seg_prob(seg, scratch, scratch, scratch)) // rounding can give +1..+5
      const startMs = Math.min(sf[0]! * frameMs, durationMs)
      const endMs = Math.min(Math.max((ef[0]! + 1) * frameMs, startMs), durationMs)
      words.push({ text, startMs, endMs, confidence: Math.min(1, lib.logmath_exp(logmath, logp)), logprob: lib.logmath_log_to_ln(logmath, logp) })
    }
    return words
  }

  dispose(): void {
    if (this.disposed) return
    this.disposed = true
    this.lib.ps_free(this.ps)
  }
}
