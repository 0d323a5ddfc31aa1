/**
 * One private instance of Debian's native espeak-ng (`libespeak-ng1`, 1.51) through koffi: the
 * library file copied to an in-memory file of its own and dlopen'ed from there, so that it has statics of
 * its own, initialised in synchronous mode with one voice, and rewound to the state it had right
 * after that voice's warm-up before every synthesis.
 *
 * Why a copy per instance: espeak-ng keeps all its state in C statics (one synthesis at a time
 * per process). dlopen returns the same handle for the same file, so two worker threads sharing
 * it overwrite each other's state (seen: "phondata: Bad address", then espeak's exit() ended the
 * process). A copy under another name is a separate object with its own .data and .bss; the
 * file is an anonymous in-memory one (memfd).
 *
 * Why one voice per instance, and the rewind: synthesis state (flutter phase, filter memories,
 * echo buffer) carries over in statics, so the same text sounds different on each call. Copying
 * back the writable segment (.data and .bss: 165 KB, ~0.02 ms) makes every call start from the
 * same bytes. That is only safe while nothing the statics point to has been freed since the
 * snapshot, and changing the voice frees the translator and dictionary the statics point to
 * (a later rewind would bring back dangling pointers). So an instance changes voice only through
 * `retarget`: rewind first (the statics point at live objects again), let espeak change voice
 * (it frees what it replaces itself), warm up, and take a new snapshot. The runtime keeps one
 * instance per voice in use (EspeakNative.ts) and retargets the least recently used one.
 *
 * Hazards:
 *  - The writable segment's extent comes from the ELF program header (PT_LOAD with PF_W,
 *    p_vaddr + p_memsz), not from /proc/self/maps: the kernel merges .bss with neighbouring
 *    anonymous memory (a malloc arena of another thread), and rewinding that crashed the
 *    process. Only the part the loader left writable is copied (RELRO pages are read-only).
 *  - libc's rand() is process-wide, and other libraries draw from it: the noise of breathy and
 *    Klatt variants comes from it. Each copy's `rand` slot points at a generator of its own
 *    (EspeakRand.ts), seeded before the warm-up and before every synthesis.
 *  - espeak_Initialize calls setlocale (process-wide) and voice loading is not thread-safe;
 *    instances are created under a process lock (EspeakLock.ts).
 *  - `espeakINITIALIZE_DONT_EXIT`: without it a missing data file calls exit().
 *  - espeak_Initialize starts an idle thread even in synchronous mode (the asynchronous mode's
 *    command queue). Instances are therefore never terminated or unloaded: espeak_Terminate
 *    wakes that thread through a condition variable and joins it, and the rewinds, or an
 *    orphaned thread of an unloaded copy from an ended worker waiting at the same address, lose
 *    the wake-up; the join then hung the thread for good (seen). Synchronous synthesis never
 *    signals that condition variable, so parked threads stay parked.
 */
import { closeSync, fstatSync, readdirSync, readFileSync, writeSync } from "node:fs"
import { threadId } from "node:worker_threads"
import type Koffi from "koffi"
import type { LibraryHandle, TypeObject } from "koffi"
import { requireKoffi } from "../Koffi.ts"
import { jumpSlots, writableSegment } from "./Elf.ts"
import { ALLOCATOR_SLOTS, EpochHeap } from "./EspeakHeap.ts"
import { PrivateRand } from "./EspeakRand.ts"

export const LIBESPEAK_PATH = "/usr/lib/x86_64-linux-gnu/libespeak-ng.so.1"
export const ESPEAK_DATA_DIR = "/usr/lib/x86_64-linux-gnu/espeak-ng-data"

/** speak_lib.h values. */
const AUDIO_OUTPUT_SYNCHRONOUS = 2
const INIT_PHONEME_EVENTS = 0x0001
const INIT_PHONEME_IPA = 0x0002
const INIT_DONT_EXIT = 0x8000
const CHARS_UTF8 = 1
const SSML = 0x10
const PHONEMES = 0x100
const POS_CHARACTER = 1
const PARAM_RATE = 1
const PARAM_PITCH = 3
/**
 * Text of the warm-up before each snapshot: silent on purpose. A spoken one ("a.") left its
 * sound in the filter and echo memories, which the snapshot keeps and the next voice inherits:
 * the same voice then sounded different after each history of voice changes (measured: es,
 * en>es, fi>es, en>fi>es all differed; with a silent warm-up they are byte-identical).
 */
const WARM_UP = new TextEncoder().encode(" \0")
/** Synthesis callback period, ms: the block size (as the wasm build's 100 ms). */
const BLOCK_MS = 100
/** The private rand()'s state before the warm-up and before every synthesis. */
const RAND_SEED = 1n

export const EVENT_TYPES = ["list_terminated", "word", "sentence", "mark", "play", "end", "msg_terminated", "phoneme", "samplerate"] as const

export interface RawEvent {
  readonly type: (typeof EVENT_TYPES)[number]
  /** 1-based, in code points of the text given to espeak. */
  readonly textPosition: number
  readonly length: number
  /** ms from the start of the synthesis. */
  readonly audioPosition: number
  /** IPA name (phoneme events). */
  readonly phoneme?: string
}

/** Gets each block and its events; returns false to stop the synthesis. */
export type RawBlockSink = (samples: Int16Array, events: ReadonlyArray<RawEvent>) => boolean

interface Bindings {
  readonly koffi: typeof Koffi
  readonly memcpyIn: (dst: bigint, src: Uint8Array, n: number) => unknown
  readonly memcpyOut: (dst: Uint8Array, src: bigint, n: number) => unknown
  readonly dlopen: (path: string, flags: number) => unknown
  readonly memfdCreate: (name: string, flags: number) => number
  /** fcntl(fd, cmd, <type>, arg): variadic. */
  readonly fcntl: (fd: number, cmd: number, type: string, arg: number) => number
  /** The library file's bytes, copied into each memfd. */
  readonly elf: Uint8Array
  readonly sigmask: (how: number, set: Uint8Array, old: Uint8Array) => number
  /** espeak_EVENT: its size and the byte offsets of the fields read, from koffi's layout. */
  readonly event: { readonly size: number; readonly type: number; readonly text: number; readonly length: number; readonly audio: number; readonly id: number }
  readonly callbackType: TypeObject
  /** The writable PT_LOAD segment of the library file: [vaddr, vaddr + memsz). */
  readonly writable: { readonly vaddr: bigint; readonly memsz: bigint }
  /** Its .got.plt slots by symbol (offsets from the load base). */
  readonly slots: ReadonlyMap<string, bigint>
}

let bindings: Bindings | undefined

const bind = (): Bindings => {
  if (bindings !== undefined) return bindings
  const koffi = requireKoffi()
  const libc = koffi.load("libc.so.6")
  const elf = readFileSync(LIBESPEAK_PATH)
  const eventType = koffi.struct({
    type: "int",
    unique_identifier: "uint",
    text_position: "int",
    length: "int",
    audio_position: "int",
    sample: "int",
    user_data: "void *",
    id: koffi.array("uint8_t", 8, "Array")
  })
  bindings = {
    koffi,
    memcpyIn: libc.func("void *memcpy(intptr_t dst, const uint8_t *src, size_t n)"),
    memcpyOut: libc.func("void *memcpy(_Out_ uint8_t *dst, intptr_t src, size_t n)"),
    dlopen: libc.func("void *dlopen(const char *path, int flags)"),
    memfdCreate: libc.func("int memfd_create(const char *name, unsigned int flags)"),
    fcntl: libc.func("int fcntl(int fd, int cmd, ...)"),
    elf,
    sigmask: libc.func("int pthread_sigmask(int how, const uint8_t *set, _Out_ uint8_t *old)"),
    event: {
      size: koffi.sizeof(eventType),
      type: koffi.offsetof(eventType, "type"),
      text: koffi.offsetof(eventType, "text_position"),
      length: koffi.offsetof(eventType, "length"),
      audio: koffi.offsetof(eventType, "audio_position"),
      id: koffi.offsetof(eventType, "id")
    },
    callbackType: koffi.pointer(koffi.proto("int espeak_synth_cb(void *wav, int numsamples, void *events)")),
    writable: writableSegment(elf),
    slots: jumpSlots(elf)
  }
  return bindings
}


/** dlfcn.h and signal.h (glibc, x86-64). */
const RTLD_NOW = 0x2
const RTLD_NOLOAD = 0x4
const RTLD_NODELETE = 0x1000
/** sys/mman.h and fcntl.h (Linux). */
const MFD_CLOEXEC = 0x1
const MFD_ALLOW_SEALING = 0x2
const F_ADD_SEALS = 1033
const F_SEAL_SEAL = 0x1
const F_SEAL_SHRINK = 0x2
const F_SEAL_GROW = 0x4
const F_SEAL_WRITE = 0x8
const SIG_SETMASK = 2
/** sizeof(sigset_t) in glibc. */
const SIGSET_BYTES = 128
/** Linux x86-64 futex(2). */
const SYS_FUTEX = 202
const PARK_TIMEOUT_MS = 2000

/**
 * Waits until a thread started since `before` is blocked in futex(2) on a word inside
 * [start, end): the instance's own idle thread (see the hazards above), parked on its
 * condition variable. Until then it is still working on its mutex and condition variable,
 * which live in the segment the snapshot copies: a snapshot taken meanwhile (the thread can be
 * slow to be scheduled under load) would have every rewind write a half-done state over them.
 */
const awaitParkedThread = (before: ReadonlySet<string>, start: bigint, end: bigint): void => {
  const nap = new Int32Array(new SharedArrayBuffer(4))
  const deadline = performance.now() + PARK_TIMEOUT_MS
  for (;;) {
    for (const tid of readdirSync("/proc/self/task")) {
      if (before.has(tid)) continue
      let fields: Array<string>
      try {
        fields = readFileSync(`/proc/self/task/${tid}/syscall`, "utf8").trim().split(" ")
      } catch {
        continue // the thread ended meanwhile
      }
      const word = fields[1] === undefined ? -1n : BigInt(fields[1])
      if (Number(fields[0]) === SYS_FUTEX && word >= start && word < end) return
    }
    if (performance.now() > deadline) throw new Error("espeak-ng: its idle thread never parked")
    Atomics.wait(nap, 0, 0, 1)
  }
}

const utf8 = new TextDecoder()
let copies = 0

/** The .got.plt slots pointed elsewhere: the allocators (EspeakHeap.ts) and rand (EspeakRand.ts). */
const PATCHED_SLOTS = [...ALLOCATOR_SLOTS, "rand"]

/**
 * Loads a private copy of the library from an anonymous in-memory file (memfd_create): no
 * temporary directory to be missing, mounted noexec or shared with other users; sealed once
 * written, so nothing that can open /proc/<pid>/fd/<n> can change its code. The file
 * descriptor stays open for the life of the process: glibc knows the copy by its name,
 * /proc/self/fd/<n>, and a later dlopen of a reused number would get this copy back instead
 * of a new one. `pin`: make the copy permanent (RTLD_NODELETE). Throws, before espeak runs
 * any code, when the slots to patch are not in the writable memory the rewinds restore (a
 * build linked with -z now keeps its GOT read-only after relocation, where a patch would
 * crash).
 */
const loadCopy = (b: Bindings, pin = true): { lib: LibraryHandle; base: bigint; segmentAt: bigint; segmentEnd: bigint; fd: number } => {
  const name = `speech-espeak-${threadId}-${copies++}`
  const fd = b.memfdCreate(name, MFD_CLOEXEC | MFD_ALLOW_SEALING)
  if (fd < 0) throw new Error("espeak-ng: memfd_create failed")
  for (let at = 0; at < b.elf.length; ) at += writeSync(fd, b.elf, at)
  if (b.fcntl(fd, F_ADD_SEALS, "int", F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) !== 0) throw new Error("espeak-ng: could not seal the copy")
  const path = `/proc/self/fd/${fd}`
  const lib = b.koffi.load(path)
  // Pinned: koffi closes a library once nothing references it, also when a worker thread ends,
  // and the idle thread espeak started would then wait on unmapped memory (a signal delivered to
  // it aborted the whole process, an outside review showed).
  if (pin && b.dlopen(path, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE) === null) throw new Error(`espeak-ng: could not pin ${path}`)
  // Its mappings: the memfd's name (unique in the process) and inode (unique on the memfd
  // device; an inode number alone can also belong to a file on another device).
  const inode = String(fstatSync(fd).ino)
  const mapped = readFileSync("/proc/self/maps", "utf8").split("\n").map((l) => l.split(/\s+/)).filter((m) => m[4] === inode && m[5] === `/memfd:${name}`)
  const first = mapped.find((m) => m[2] === "00000000")
  const rw = mapped.find((m) => m[1]!.startsWith("rw"))
  if (first === undefined || rw === undefined) throw new Error(`espeak-ng: the copy in ${path} is not mapped as expected`)
  const base = BigInt(`0x${first[0]!.split("-")[0]}`)
  const writableStart = BigInt(`0x${rw[0]!.split("-")[0]}`)
  const segmentStart = base + b.writable.vaddr
  const segmentEnd = segmentStart + b.writable.memsz
  // Only the part the loader left writable (RELRO pages are read-only).
  const segmentAt = writableStart > segmentStart ? writableStart : segmentStart
  for (const slot of PATCHED_SLOTS) {
    const at = base + (b.slots.get(slot) ?? -1n)
    if (at < segmentAt || at + 8n > segmentEnd) throw new Error(`espeak-ng: ${slot}'s .got.plt slot is outside the rewound writable memory`)
  }
  return { lib, base, segmentAt, segmentEnd, fd }
}

/**
 * Loads one copy and unloads it again, without starting espeak: whether copies can be made on
 * this machine (for readiness); throws why not.
 */
export const probeCopy = (): void => {
  const copy = loadCopy(bind(), false)
  copy.lib.unload()
  closeSync(copy.fd)
}

export class EspeakInstance {
  readonly sampleRate: number
  private readonly lib: LibraryHandle
  private readonly synth: (text: Uint8Array, size: number, position: number, positionType: number, endPosition: number, flags: number, uid: null, user: null) => number
  private readonly setParameter: (parameter: number, value: number, relative: number) => number
  /** Where the writable segment lives in this copy, and its bytes right after the warm-up. */
  private readonly segmentAt: bigint
  private readonly snapshot: Uint8Array
  private readonly setVoice: (name: string) => number
  private voice = ""
  private readonly heap: EpochHeap
  private readonly rand: PrivateRand
  /** Identifiers of the voices espeak lists ("gmw/en-US", ...). */
  readonly voiceIdentifiers: ReadonlyArray<string>
  private sink: RawBlockSink | undefined
  private failure: unknown

  /** Loads a private copy and selects `voiceId` (espeak's `<name>[+<variant>]`); throws when either fails. */
  constructor(voiceId: string) {
    const b = bind()
    const copy = loadCopy(b)
    this.lib = copy.lib
    const { base, segmentAt, segmentEnd } = copy
    const initialize = this.lib.func("int espeak_Initialize(int output, int buflength, const char *path, int options)")
    this.synth = this.lib.func("int espeak_Synth(const uint8_t *text, size_t size, uint position, int position_type, uint end_position, uint flags, void *unique_identifier, void *user_data)")
    this.setParameter = this.lib.func("int espeak_SetParameter(int parameter, int value, int relative)")
    const setVoice = this.lib.func("int espeak_SetVoiceByName(const char *name)")
    const setCallback = this.lib.func("espeak_SetSynthCallback", "void", [b.callbackType])
    const threadsBefore = new Set(readdirSync("/proc/self/task"))
    // The idle thread inherits this thread's signal mask: all blocked, so no signal is ever
    // handled on it (it would run Node's handlers on a thread Node does not know).
    const old = new Uint8Array(SIGSET_BYTES)
    b.sigmask(SIG_SETMASK, new Uint8Array(SIGSET_BYTES).fill(0xff), old)
    try {
      this.sampleRate = initialize(AUDIO_OUTPUT_SYNCHRONOUS, BLOCK_MS, ESPEAK_DATA_DIR, INIT_PHONEME_EVENTS | INIT_PHONEME_IPA | INIT_DONT_EXIT)
    } finally {
      b.sigmask(SIG_SETMASK, old, new Uint8Array(SIGSET_BYTES))
    }
    // A copy that failed stays loaded (pinned above, see the hazards).
    if (this.sampleRate <= 0) throw new Error(`espeak-ng: espeak_Initialize returned ${this.sampleRate}`)
    awaitParkedThread(threadsBefore, segmentAt, segmentEnd)
    const callback = b.koffi.register((wav: unknown, count: number, events: unknown) => this.onBlock(wav, count, events), b.callbackType)
    setCallback(callback)
    this.setVoice = setVoice
    this.segmentAt = segmentAt
    this.snapshot = new Uint8Array(Number(segmentEnd - segmentAt))
    this.voiceIdentifiers = this.listVoices()
    // From here on the copy allocates through the tracker (after the idle thread parked: its
    // callbacks must run on this thread only).
    this.heap = new EpochHeap(b.koffi, base, b.slots)
    this.rand = new PrivateRand(b.koffi)
    b.memcpyIn(base + b.slots.get("rand")!, new Uint8Array(BigUint64Array.of(this.rand.address).buffer), 8)
    this.select(voiceId)
  }

  /** The voice this instance speaks with. */
  get voiceId(): string {
    return this.voice
  }

  /**
   * Makes this instance speak with another voice (under the caller's lock: voice loading is not
   * thread-safe). On failure it keeps its old voice (`voiceId` tells), or, when even that
   * failed, must not be used again.
   */
  retarget(voiceId: string): void {
    this.rewind()
    const previous = this.voice
    try {
      this.select(voiceId)
    } catch (cause) {
      this.rewind()
      this.select(previous)
      throw cause
    }
  }

  /** Statics back to the snapshot, and the heap with them. */
  private rewind() {
    bind().memcpyIn(this.segmentAt, this.snapshot, this.snapshot.length)
    this.heap.rewound()
  }

  /** Heap blocks freed at rewinds so far, that a statics-only rewind would have leaked (for tests). */
  get reclaimedBlocks(): number {
    return this.heap.reclaimed
  }

  /** Sets the voice, warms up, and snapshots the writable segment. */
  private select(voiceId: string) {
    const code = this.setVoice(voiceId)
    if (code !== 0) throw new Error(`espeak-ng: espeak_SetVoiceByName("${voiceId}") returned ${code}`)
    this.voice = voiceId
    // Warm-up: the voice change espeak queued (a malloc'd copy of the voice, freed when a
    // synthesis takes it off the queue) and lazily allocated tables (the text decoder) are dealt
    // with before the snapshot, so a rewind never brings back a queued or unallocated pointer.
    this.rand.seed(RAND_SEED)
    this.run(WARM_UP, () => true)
    bind().memcpyOut(this.snapshot, this.segmentAt, this.snapshot.length)
    this.heap.snapshotTaken()
  }

  /**
   * Identifiers of the voices espeak_ListVoices lists ("gmw/en-US", ...). Called once, before
   * the first snapshot: listing frees and rebuilds the voice list the statics point to, so after
   * a snapshot it would leave the rewinds dangling pointers (seen: a crash in the next voice
   * change, which searches that list).
   */
  private listVoices(): Array<string> {
    const { koffi } = bind()
    const voiceType = koffi.struct({ name: "const char *", languages: "void *", identifier: "const char *", gender: "uint8_t", age: "uint8_t", variant: "uint8_t", xx1: "uint8_t", score: "int", spare: "void *" })
    const list = this.lib.func("void *espeak_ListVoices(void *spec)")(null)
    const ids: Array<string> = []
    for (let i = 0; list !== null; i++) {
      const voice = koffi.decode(list, i * 8, "void *")
      if (voice === null) break
      ids.push((koffi.decode(voice, voiceType) as { identifier: string }).identifier)
    }
    return ids
  }

  /** Bytes copied by each rewind. */
  get rewindBytes(): number {
    return this.snapshot.length
  }

  /**
   * From the post-warm-up state, speaks NUL-terminated UTF-8 `text` (SSML and `[[phonemes]]`
   * enabled) at `rateWpm` (80–450) and `pitch` (0–100), giving `sink` each block as it is made.
   * Throws what the sink threw, or when espeak reports an error.
   */
  speak(text: Uint8Array, rateWpm: number, pitch: number, sink: RawBlockSink): void {
    // A sink that speaks again on this instance would rewind it under the running synthesis.
    if (this.sink !== undefined) throw new Error("espeak-ng: this instance is already speaking")
    this.rewind()
    this.rand.seed(RAND_SEED)
    this.setParameter(PARAM_RATE, rateWpm, 0)
    this.setParameter(PARAM_PITCH, pitch, 0)
    this.run(text, sink)
  }

  private run(text: Uint8Array, sink: RawBlockSink) {
    this.sink = sink
    this.failure = undefined
    try {
      const code = this.synth(text, text.length, 0, POS_CHARACTER, 0, CHARS_UTF8 | SSML | PHONEMES, null, null)
      if (this.failure !== undefined) throw this.failure
      if (code !== 0) throw new Error(`espeak-ng: espeak_Synth returned ${code}`)
    } finally {
      this.sink = undefined
    }
  }

  /** One espeak_EVENT at a time, copied out of espeak's list (see onBlock), and its int32 view. */
  private eventScratch: Uint8Array | undefined
  private eventInts: Int32Array | undefined

  /** The synthesis callback: samples and events are only valid during the call, so both are copied. */
  private onBlock(wav: unknown, count: number, eventsPtr: unknown): number {
    if (this.sink === undefined || this.failure !== undefined) return 1
    try {
      const { koffi, event, memcpyOut } = bind()
      const events: Array<RawEvent> = []
      // Each event copied into a scratch buffer and read as int32s: koffi.decode built an object
      // and an array per event, an eighth of a worker's time under load.
      const at = eventsPtr === null ? 0n : koffi.address(eventsPtr)
      const scratch = (this.eventScratch ??= new Uint8Array(event.size))
      const ints = (this.eventInts ??= new Int32Array(scratch.buffer))
      for (let i = 0; eventsPtr !== null; i++) {
        memcpyOut(scratch, at + BigInt(i * event.size), event.size)
        const code = ints[event.type >> 2]!
        if (code === 0) break
        const type = EVENT_TYPES[code]
        if (type === undefined) continue
        const raw: RawEvent = { type, textPosition: ints[event.text >> 2]!, length: ints[event.length >> 2]!, audioPosition: ints[event.audio >> 2]! }
        if (type === "phoneme") {
          const id = scratch.subarray(event.id, event.id + 8)
          const end = id.indexOf(0)
          events.push({ ...raw, phoneme: utf8.decode(end < 0 ? id : id.subarray(0, end)) })
        } else events.push(raw)
      }
      // Copied with memcpy: a koffi.view holds ~200 B until the event loop turns.
      const samples = new Int16Array(count > 0 && wav !== null ? count : 0)
      if (samples.length > 0) memcpyOut(new Uint8Array(samples.buffer), koffi.address(wav), samples.byteLength)
      return this.sink(samples, events) ? 0 : 1
    } catch (cause) {
      this.failure = cause
      return 1
    }
  }
}
