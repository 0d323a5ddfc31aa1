/**
 * The espeak-ng WASM module of one worker thread: loaded once (lazily), shared by EspeakTts and
 * PiperTts (for phonemes), and made deterministic.
 *
 * Hazards of this build, each handled here:
 *  - Synthesis state (flutter phase, noise, filter memories) lives in C statics and carries over
 *    between calls, so the same text gives different samples on each call. Fix: after loading,
 *    the linear memory is snapshotted and restored before every use; every call then starts
 *    from the same bytes on every thread. Of its 16.3 MB only the first 1.15 MB hold anything at
 *    the snapshot (static data, stack, the heap so far); the rest is zero. So the snapshot keeps
 *    that prefix, and the restore copies it and zero-fills memory from there up to the
 *    allocator's break, above which nothing is written (found by a probe at load; usually
 *    nothing, since a synthesis fits in the heap the snapshot already has). The copy takes
 *    ~0.05 ms; zero-filling the other 15 MB every time took 0.6–1.5 ms, ~20 % of a busy
 *    worker's CPU (`perf`). The restore runs after a use, not before the next: deferred to the
 *    thread's next event-loop turn (the task's result and last audio are not held up by it), where an idle
 *    worker does it before the next request arrives, so the next first block does not wait for
 *    it. A use that comes first (back-to-back tasks) restores inline, as before.
 *  - `set_voice` returns 2 for an unknown voice and silently keeps the previous one; an unknown
 *    `+variant` is accepted with 0 and ignored. Both are turned into TtsError VoiceNotFound
 *    (variants are checked against the build's `voices/!v` directory).
 *  - `synthesize` runs with SSML and `[[phoneme]]` input enabled: request text is escaped
 *    (`& < >` as entities, `[[` split) and event positions are mapped back to the original.
 *  - Strings passed as JS strings go through a binding-side scratch buffer whose bookkeeping is
 *    JS state outside the snapshot; all strings are therefore malloc'd after the restore and
 *    passed as `{ ptr }`.
 *  - Effective rate is 80–450 words per minute; values outside are clamped.
 */
import init, { type EspeakModule, type ESpeakNGWorker, type EspeakVoiceInfo } from "@echogarden/espeak-ng-emscripten"
import { TtsError } from "./TtsEngine.ts"

export const ESPEAK_RATE_MIN_WPM = 80
export const ESPEAK_RATE_MAX_WPM = 450
/** espeak's own default rate, words per minute. */
export const ESPEAK_DEFAULT_WPM = 175
const VARIANT_DIR = "/usr/share/espeak-ng-data/voices/!v"

export interface EspeakEvent {
  readonly type: "word" | "sentence" | "end" | "phoneme" | "msg_terminated"
  /** ms from the start of this synthesis. */
  readonly audioMs: number
  /** UTF-16 span in the caller's original text (word events; other events: a point). */
  readonly charStart: number
  readonly charEnd: number
  /** Phoneme name (IPA) for phoneme events. */
  readonly phoneme?: string
}

export interface EspeakParams {
  /** Words per minute; clamped to 80–450. */
  readonly rateWpm: number
  /** Base pitch 0–100 (50 = voice default); clamped. */
  readonly pitch: number
}

/**
 * Takes each block of samples as espeak makes it (100 ms at 22050 Hz in this build); returns
 * false to stop the synthesis there.
 */
export type EspeakBlockSink = (samples: Int16Array) => boolean

export interface EspeakSession {
  /**
   * Speaks plain text (escaped here): Int16 samples at the runtime's rate plus events. With
   * `onBlock`, blocks go there as they are made and `samples` is empty; `sampleCount` counts
   * them either way (also when `onBlock` stopped the synthesis early).
   */
  synthesize(text: string, onBlock?: EspeakBlockSink): {
    readonly samples: Int16Array
    readonly sampleCount: number
    readonly events: ReadonlyArray<EspeakEvent>
  }
  /** IPA of plain text: phonemes joined by "_", words by " ", espeak clauses by " | ". */
  textToIpa(text: string): string
}

let shared: Promise<EspeakRuntime> | undefined

/** Clock value seen by espeak while it starts (see `load`), ms since the epoch. */
const FIXED_START_CLOCK_MS = 1_700_000_000_000

/** Bytes up to the end of the last 64 KiB page of `heap` that holds a non-zero byte. */
const usedPrefixBytes = (heap: Uint8Array): number => {
  const page = 65536
  const words = new Uint32Array(heap.buffer, heap.byteOffset, heap.byteLength >>> 2)
  let last = words.length - 1
  while (last >= 0 && words[last] === 0) last--
  return Math.min(heap.byteLength, Math.ceil(((last + 1) * 4) / page) * page)
}

/**
 * Finds the allocator's break (the C static behind sbrk; this build exports no sbrk) among the
 * 32-bit words of the snapshot's prefix: the one word that a 4 MiB malloc moves up by at least
 * that much, to at or past the block's end, and that stays there after the free (the
 * allocator does not trim). Anything else (no such word, two of them, a trim) gives undefined.
 * The caller restores the snapshot afterwards.
 */
const findBreakWord = (m: EspeakModule, prefixBytes: number): number | undefined => {
  const probeBytes = 4 << 20
  const before = m.HEAPU32.slice(0, prefixBytes >>> 2)
  const ptr = m._malloc(probeBytes)
  if (ptr === 0) return undefined
  const after = m.HEAPU32.slice(0, prefixBytes >>> 2) // re-read: malloc may have grown memory
  m._free(ptr)
  const freed = m.HEAPU32
  const found: Array<number> = []
  for (let i = 0; i < before.length; i++) {
    const grew = after[i]! - before[i]!
    if (grew >= probeBytes && grew < 2 * probeBytes && after[i]! >= ptr + probeBytes && freed[i] === after[i]) found.push(i * 4)
  }
  return found.length === 1 ? found[0] : undefined
}

export class EspeakRuntime {
  /** Hz (22050 for this build). */
  readonly sampleRate: number
  readonly voices: ReadonlyArray<EspeakVoiceInfo>
  /**
   * Voice names set_voice accepts: the lowercased file names of the voices ("et", "en" = British,
   * "en-us", "en-gb-x-rp", "fr", "cmn", ...). Hazard: several language tags listed by
   * list_voices are NOT accepted ("en-gb", "fr-fr", "zh", "no"), so those are not used here.
   */
  readonly languageNames: ReadonlySet<string>
  readonly variants: ReadonlySet<string>
  private readonly snapshot: Uint8Array
  /**
   * Byte address of the allocator's break (sbrk's pointer) in linear memory, found once by a
   * probe (`findBreakWord`); undefined when the probe was not conclusive (every restore then
   * zero-fills all memory past the snapshot, as before).
   */
  private readonly breakWord: number | undefined
  /** The break's value in the snapshot: the lowest it can be after a restore. */
  private readonly snapshotBreak: number
  /** Memory has been used since the last restore. */
  private dirty = false
  private restoreScheduled = false

  private constructor(private readonly m: EspeakModule, private readonly w: ESpeakNGWorker, readonly loadMs: number) {
    this.sampleRate = w.get_samplerate()
    this.voices = w.list_voices()
    this.languageNames = new Set(this.voices.map((v) => v.identifier.split("/").pop()!.toLowerCase()))
    this.variants = new Set(m.FS.readdir(VARIANT_DIR).filter((n) => n !== "." && n !== ".."))
    // Warm-up before the snapshot: selects a voice (allocates the binding's string buffer) and
    // runs one synthesis so lazily allocated tables exist in the snapshot, not after it.
    // (Longer warm-ups were measured: +450 ms load for no reliable gain on the first request,
    // which stays 150–500 ms while the wasm2js code goes through the JIT.)
    if (w.set_voice("en") !== 0) throw new TtsError("EngineUnavailable", "espeak-ng: default voice missing")
    w.synthesize("a", () => 0)
    this.snapshot = m.HEAPU8.slice(0, usedPrefixBytes(m.HEAPU8))
    this.breakWord = findBreakWord(m, this.snapshot.length)
    // Read from the snapshot: the probe has moved the live word since.
    this.snapshotBreak = this.breakWord === undefined
      ? m.HEAPU8.length
      : new DataView(this.snapshot.buffer).getUint32(this.breakWord, true)
    // The probe allocated and freed; back to the snapshot (the break it raised bounds the fill).
    this.restore()
  }

  /** True once `load` was called in this thread. */
  static get started(): boolean {
    return shared !== undefined
  }

  /** The thread's runtime, loaded on first use. */
  static load(): Promise<EspeakRuntime> {
    if (shared === undefined) {
      const t0 = performance.now()
      // espeak seeds its noise generator (breathy variants such as f2, f3, f5) from the clock
      // while it starts, and that state is then part of the snapshot: with a real clock the
      // same text sounded different in every process. A fixed clock during start-up makes the
      // snapshot, and so every synthesis, the same everywhere. Safe: a worker runs one task
      // at a time, and the clock is restored before any other code of the task runs on.
      const realNow = Date.now
      Date.now = () => FIXED_START_CLOCK_MS
      shared = init().then(
        (m) => {
          try {
            return new EspeakRuntime(m, new m.eSpeakNGWorker(), performance.now() - t0)
          } finally {
            Date.now = realNow
          }
        },
        (cause: unknown) => {
          Date.now = realNow
          shared = undefined
          throw new TtsError("EngineUnavailable", "espeak-ng failed to load", { cause })
        }
      )
    }
    return shared
  }

  /** Throws VoiceNotFound unless `<voice name>[+<variant>]` exists in this build. */
  checkVoiceId(voiceId: string): void {
    const [language, variant, extra] = voiceId.split("+")
    // Names are case-insensitive for set_voice; variants are file names and are not.
    if (extra !== undefined || language === undefined || !this.languageNames.has(language.toLowerCase())) {
      throw new TtsError("VoiceNotFound", `espeak-ng has no voice "${voiceId}"`)
    }
    if (variant !== undefined && !this.variants.has(variant)) {
      throw new TtsError("VoiceNotFound", `espeak-ng has no variant "${variant}" (voice "${voiceId}")`)
    }
  }

  /** From the pristine state (restored here if the deferred restore has not run), selects the voice and runs `f`. Synchronous. */
  withVoice<A>(voiceId: string, params: EspeakParams, f: (session: EspeakSession) => A): A {
    this.checkVoiceId(voiceId)
    if (this.dirty) this.restore()
    this.dirty = true
    try {
      const code = this.w.set_voice(this.cString(voiceId))
      if (code !== 0) throw new TtsError("VoiceNotFound", `espeak-ng set_voice("${voiceId}") returned ${code}`)
      this.w.set_rate(Math.round(clamp(params.rateWpm, ESPEAK_RATE_MIN_WPM, ESPEAK_RATE_MAX_WPM)))
      this.w.set_pitch(Math.round(clamp(params.pitch, 0, 100)))
      return f({ synthesize: (text, onBlock) => this.synth(text, onBlock), textToIpa: (text) => this.ipa(text) })
    } finally {
      this.restoreLater()
    }
  }

  private restoreLater() {
    if (this.restoreScheduled) return
    this.restoreScheduled = true
    setImmediate(() => {
      this.restoreScheduled = false
      if (this.dirty) this.restore()
    })
  }

  private restore() {
    const heap = this.m.HEAPU8
    // Read before the snapshot overwrites it. Nothing above the break has been written since the
    // last restore (the stack lies below the heap in this build, and its allocator never trims,
    // checked by the probe), so only memory up to the break needs zeroing: usually none of the
    // 15 MB past the snapshot (zero-filling all of it was ~20 % of a busy worker's CPU).
    const dirtyEnd = this.breakValue(heap)
    heap.set(this.snapshot)
    // Zero past the snapshot's prefix, up to where anything can have been written (memory
    // grown since must look fresh too: allocators may assume zeroed pages).
    heap.fill(0, this.snapshot.length, dirtyEnd)
    this.dirty = false
  }

  /** The allocator's break now; all of memory when it is unknown or implausible. */
  private breakValue(heap: Uint8Array): number {
    if (this.breakWord === undefined) return heap.length
    const brk = this.m.HEAPU32[this.breakWord >>> 2]!
    return brk >= this.snapshotBreak && brk <= heap.length ? brk : heap.length
  }

  private cString(s: string): { ptr: number } {
    const bytes = new TextEncoder().encode(s)
    const ptr = this.m._malloc(bytes.length + 1)
    if (ptr === 0) throw new TtsError("EngineFailed", "espeak-ng: out of memory")
    const heap = this.m.HEAPU8 // re-read: malloc may have grown memory
    heap.set(bytes, ptr)
    heap[ptr + bytes.length] = 0
    return { ptr }
  }

  private synth(text: string, onBlock?: EspeakBlockSink) {
    const { escaped, start, end } = escapeForSsml(text)
    const chunks: Array<Int16Array> = []
    const events: Array<EspeakEvent> = []
    const toEvent = eventMapper(start, end)
    let total = 0
    try {
      this.w.synthesize(this.cString(escaped), (samples, raw) => {
        let stop = false
        if (samples !== null && samples.length > 0) {
          total += samples.length
          if (onBlock === undefined) chunks.push(samples)
          else stop = !onBlock(samples)
        }
        for (const e of raw) {
          const event = toEvent(e.type, e.text_position, e.word_length, e.audio_position, typeof e.id === "string" ? e.id : undefined)
          if (event !== undefined) events.push(event)
        }
        // Non-zero tells espeak to stop synthesizing; events of this block are already in.
        return stop ? 1 : 0
      })
    } catch (cause) {
      throw new TtsError("EngineFailed", "espeak-ng synthesis failed", { cause })
    }
    return { samples: joinSamples(chunks, onBlock === undefined ? total : 0), sampleCount: total, events }
  }

  private ipa(text: string): string {
    try {
      const { ptr } = this.w.text_to_phonemes(this.cString(text), 1)
      const heap = this.m.HEAPU8
      let e = ptr
      while (heap[e] !== 0) e++
      return new TextDecoder().decode(heap.subarray(ptr, e))
    } catch (cause) {
      throw new TtsError("EngineFailed", "espeak-ng phonemization failed", { cause })
    }
  }
}

export const clamp = (x: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, x))

/** The blocks joined into `length` samples (0: an empty array, for block-streamed calls). */
export const joinSamples = (chunks: ReadonlyArray<Int16Array>, length: number): Int16Array => {
  const samples = new Int16Array(length)
  if (length === 0) return samples
  let o = 0
  for (const c of chunks) {
    samples.set(c, o)
    o += c.length
  }
  return samples
}

/**
 * Turns espeak's raw events (positions 1-based in code points of the escaped text) into
 * EspeakEvents with UTF-16 spans of the original text (`start`/`end` from escapeForSsml); other
 * event types give undefined.
 */
export const eventMapper = (start: Int32Array, end: Int32Array) => {
  const span = (position: number, length: number): [number, number] => {
    const first = clamp(position - 1, 0, start.length - 1)
    const last = clamp(position - 2 + Math.max(1, length), first, start.length - 1)
    return start.length === 0 ? [0, 0] : [start[first]!, end[last]!]
  }
  return (type: string, textPosition: number, wordLength: number, audioMs: number, id: string | undefined): EspeakEvent | undefined => {
    if (type !== "word" && type !== "sentence" && type !== "end" && type !== "phoneme" && type !== "msg_terminated") return undefined
    const [charStart, charEnd] = span(textPosition, type === "word" ? wordLength : 0)
    return {
      type,
      audioMs,
      charStart,
      charEnd: type === "word" ? charEnd : charStart,
      ...(type === "phoneme" && id !== undefined ? { phoneme: id } : {})
    }
  }
}

/**
 * Escapes text for espeak's SSML + phoneme-input mode (and blanks C0 control characters, which
 * espeak takes as commands). Returns the escaped string and, per code point of it, the UTF-16
 * span of the original character it came from.
 */
export const escapeForSsml = (text: string): { escaped: string; start: Int32Array; end: Int32Array } => {
  let escaped = ""
  const start: Array<number> = []
  const end: Array<number> = []
  let i = 0
  for (const ch of text) {
    const next = i + ch.length
    let out: string
    if (ch === "&") out = "&amp;"
    else if (ch === "<") out = "&lt;"
    else if (ch === ">") out = "&gt;"
    else if (ch === "[" && text[next] === "[") out = "[ " // `[[` would open phoneme input
    // C0 controls other than tab and line breaks: NUL ends espeak's C string (the rest went
    // unspoken while its words still got timings) and U+0001 starts an embedded command
    // ("\u0001450S" set the rate past the speed limit, "\u0001200A" the amplitude to clipping).
    else if (ch.length === 1 && ch.charCodeAt(0) < 0x20 && ch !== "\t" && ch !== "\n" && ch !== "\r") out = " "
    else out = ch
    for (const c of out) {
      escaped += c
      start.push(i)
      end.push(next)
    }
    i = next
  }
  return { escaped, start: Int32Array.from(start), end: Int32Array.from(end) }
}
