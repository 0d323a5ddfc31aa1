/**
 * espeak-ng synthesis on Debian's native library (`libespeak-ng1`), for the voices it has: one
 * private library instance per voice in use (EspeakNativeLib.ts), at most MAX_INSTANCES per
 * thread; past that the least recently used one is retargeted to the new voice. Same text, voice
 * and parameters give the same samples on every call and every thread.
 *
 * Why beside the bundled build (EspeakRuntime.ts, Emscripten's wasm2js JavaScript): measured on
 * the same sentences (bench/espeak.ts), 1.77 ms of CPU per second of audio against 6.06 ms, and a
 * first 100 ms block in 0.58 ms against 2.89 ms. The bundled build stays for machines without the Debian package,
 * for the voices 1.51 lacks (1.52's ca-ba, ca-nw, ca-va, fo, kaa, mto, ru-cl, ti, xex and the
 * Reed, ian, mike2 variants), and for Piper's phonemes.
 *
 * The process lock: creating or retargeting an instance (setlocale, voice files) happens one
 * thread at a time (EspeakLock.ts); syntheses run in parallel, noisy voices too (each copy has
 * a rand() of its own, EspeakRand.ts).
 */
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import {
  clamp,
  ESPEAK_RATE_MAX_WPM,
  ESPEAK_RATE_MIN_WPM,
  escapeForSsml,
  eventMapper,
  joinSamples,
  type EspeakBlockSink,
  type EspeakEvent,
  type EspeakParams
} from "./EspeakRuntime.ts"
import { espeakLocked as locked } from "./EspeakLock.ts"
import { ESPEAK_DATA_DIR, EspeakInstance, LIBESPEAK_PATH, probeCopy } from "./EspeakNativeLib.ts"
import { TtsError } from "./TtsEngine.ts"

/** Instances per thread (~5 MB of RSS and one parked thread each, measured); never freed. */
const MAX_INSTANCES = 8
/**
 * `<voice name>[+<variant>]` split, and the instance key: names are case-insensitive for espeak,
 * variants are file names and are not.
 */
const splitVoiceId = (voiceId: string) => {
  const [language = "", variant, extra] = voiceId.split("+")
  const name = language.toLowerCase()
  return { name, variant, extra, key: variant === undefined ? name : `${name}+${variant}` }
}

let loaded: EspeakNative | null | undefined

export class EspeakNative {
  readonly sampleRate: number
  /** Lowercased voice file names, as for EspeakRuntime.languageNames. */
  readonly languageNames: ReadonlySet<string>
  readonly variants: ReadonlySet<string>
  private readonly instances = new Map<string, EspeakInstance>()
  /** Highest rate by variant file name ("" for none), wpm. */
  private readonly maxRates = new Map<string, number>()
  /** Instance keys whose copy could not be made or retargeted: the bundled build speaks them. */
  private readonly unloadable = new Set<string>()

  private constructor(first: EspeakInstance) {
    this.sampleRate = first.sampleRate
    this.instances.set(first.voiceId, first)
    this.languageNames = new Set(first.voiceIdentifiers.map((id) => id.split("/").pop()!.toLowerCase()))
    this.variants = new Set(readdirSync(join(ESPEAK_DATA_DIR, "voices", "!v")))
  }

  /**
   * The thread's runtime, or null when the library, its data or koffi is missing (`reason` says
   * which); decided once per thread.
   */
  static load(): EspeakNative | null {
    if (loaded === undefined) {
      try {
        loaded = new EspeakNative(locked(() => new EspeakInstance("en")))
      } catch (cause) {
        loaded = null
        loadFailure = cause instanceof Error ? cause.message : String(cause)
      }
    }
    return loaded
  }

  /**
   * Why the native library cannot be used on this machine (missing library or data, or a copy
   * that cannot be loaded: no memfd, no executable mapping), or undefined. Loads one copy and
   * unloads it, without starting espeak; decided once per thread. For readiness and the start-up
   * log, in the main thread (workers make the same copies).
   */
  static check(): string | undefined {
    if (checked === undefined) {
      checked = { reason: undefined }
      for (const path of [LIBESPEAK_PATH, join(ESPEAK_DATA_DIR, "phondata")]) {
        if (!existsSync(path)) checked.reason ??= `${path} is missing: install Debian's libespeak-ng1 for espeak-ng's native library`
      }
      try {
        if (checked.reason === undefined) probeCopy()
      } catch (cause) {
        checked.reason = `a private copy of ${LIBESPEAK_PATH} could not be loaded: ${cause instanceof Error ? cause.message : String(cause)}`
      }
      if (checked.reason !== undefined) checked.reason += " (the bundled build speaks every voice meanwhile, with ~3x the CPU)"
    }
    return checked.reason ?? loadFailure
  }

  /** Why `load` gave null, when it did. */
  static get reason(): string | undefined {
    return loadFailure
  }

  /**
   * True when this library has the voice (`<voice name>[+<variant>]`) and its copy did not fail
   * to load.
   */
  has(voiceId: string): boolean {
    const { name, variant, extra, key } = splitVoiceId(voiceId)
    return extra === undefined && this.languageNames.has(name) && (variant === undefined || this.variants.has(variant)) && !this.unloadable.has(key)
  }

  /**
   * True when `synthesize` speaks this voice at this rate as asked: `has` it, and the rate stays
   * below the voice's cap (`maxRateOf`); above it, callers use the bundled build, which has the
   * whole 80–450 wpm range.
   */
  speaks(voiceId: string, rateWpm: number): boolean {
    return this.has(voiceId) && Math.round(clamp(rateWpm, ESPEAK_RATE_MIN_WPM, ESPEAK_RATE_MAX_WPM)) <= this.maxRateOf(voiceId)
  }

  /** As EspeakSession.synthesize, for a voice `has` accepts. Synchronous. */
  synthesize(voiceId: string, params: EspeakParams, text: string, onBlock?: EspeakBlockSink): {
    readonly samples: Int16Array
    readonly sampleCount: number
    readonly events: ReadonlyArray<EspeakEvent>
  } {
    if (!this.has(voiceId)) throw new TtsError("VoiceNotFound", `espeak-ng (native) has no voice "${voiceId}"`)
    const instance = this.instance(voiceId)
    const { escaped, start, end } = escapeForSsml(text)
    const toEvent = eventMapper(start, end)
    const bytes = new TextEncoder().encode(`${escaped}\0`)
    const chunks: Array<Int16Array> = []
    const events: Array<EspeakEvent> = []
    let total = 0
    const rate = Math.round(clamp(params.rateWpm, ESPEAK_RATE_MIN_WPM, this.maxRateOf(voiceId)))
    const pitch = Math.round(clamp(params.pitch, 0, 100))
    try {
      instance.speak(bytes, rate, pitch, (samples, raw) => {
        // Events first: those of a block that stops the synthesis are kept, as in the wasm build.
        for (const e of raw) {
          const event = toEvent(e.type, e.textPosition, e.length, e.audioPosition, e.phoneme)
          if (event !== undefined) events.push(event)
        }
        if (samples.length === 0) return true
        total += samples.length
        if (onBlock === undefined) {
          chunks.push(samples)
          return true
        }
        return onBlock(samples)
      })
    } catch (cause) {
      throw new TtsError("EngineFailed", "espeak-ng synthesis failed", { cause })
    }
    return { samples: joinSamples(chunks, onBlock === undefined ? total : 0), sampleCount: total, events }
  }

  /** The instance speaking `voiceId`: kept, new, or the least recently used one retargeted. */
  private instance(voiceId: string): EspeakInstance {
    const { key } = splitVoiceId(voiceId)
    const known = this.instances.get(key)
    if (known !== undefined) {
      this.instances.delete(key)
      this.instances.set(key, known)
      return known
    }
    try {
      if (this.instances.size < MAX_INSTANCES) {
        const created = locked(() => new EspeakInstance(key))
        this.instances.set(key, created)
        return created
      }
      const [oldest, reused] = this.instances.entries().next().value!
      this.instances.delete(oldest)
      try {
        locked(() => reused.retarget(key))
      } catch (cause) {
        if (reused.voiceId === oldest) this.instances.set(oldest, reused)
        throw cause
      }
      this.instances.set(key, reused)
      return reused
    } catch (cause) {
      this.unloadable.add(key)
      throw new TtsError("EngineFailed", `espeak-ng could not load voice "${voiceId}"`, { cause })
    }
  }

  /**
   * The voice's highest rate, wpm, read once from its variant file: below where espeak starts
   * libsonic's speed-up stream, whose allocations (in libsonic, not the copy) the heap tracker
   * does not see: 450 wpm, or 350 with a `fast_test2` variant (`fast`), per an outside review's
   * allocation trace.
   */
  private maxRateOf(voiceId: string): number {
    const { variant } = splitVoiceId(voiceId)
    const key = variant ?? ""
    let rate = this.maxRates.get(key)
    if (rate === undefined) {
      const variantText = variant === undefined ? "" : readFileSync(join(ESPEAK_DATA_DIR, "voices", "!v", variant), "utf8")
      rate = Math.min(ESPEAK_RATE_MAX_WPM, /^\s*fast_test2\b/m.test(variantText) ? 350 : 450) - 1
      this.maxRates.set(key, rate)
    }
    return rate
  }

  /** Heap blocks the voice's instance freed at rewinds so far (for tests). */
  reclaimedBlocks(voiceId: string): number {
    return this.instance(voiceId).reclaimedBlocks
  }
}

let loadFailure: string | undefined
let checked: { reason: string | undefined } | undefined
