/**
 * Makes the heap follow the rewinds of one native espeak-ng copy (EspeakNativeLib.ts). Rewinding
 * the copy's statics alone lost whatever a synthesis allocated (a non-Latin voice reading Latin
 * letters creates an English translator, 181 KB, on every request), and a block of the snapshot
 * that a synthesis freed would be back in use after the rewind. So the copy's own calls to
 * malloc, calloc, realloc, free and strdup (its .got.plt slots, resolved at load since koffi
 * loads with RTLD_NOW, and inside the segment the rewinds copy) go through this tracker:
 *
 *  - an epoch runs from one snapshot or rewind to the next;
 *  - blocks allocated in an epoch (`live`) are freed at the next rewind: the restored statics no
 *    longer point at them;
 *  - a block older than the epoch that espeak frees is only set aside (`freedOld`): the snapshot
 *    still points at it. At a rewind it simply stays; at a new snapshot (a voice change) nothing
 *    points at it any more and it is freed;
 *  - realloc of an older block allocates a new one and sets the old aside the same way.
 *
 * Hazards: the callbacks are JavaScript (koffi) and must only be called on the thread that made
 * them: espeak calls them from the synthesizing thread; its idle thread is parked before the
 * slots are patched and never runs again. Allocations are rare during synthesis (a handful), so
 * the cost per call (~1 µs) does not show. libsonic (the speed-up stream above 450 wpm) is a
 * library of its own whose allocations are not seen here: callers keep rates below it.
 */
import type Koffi from "koffi"

interface Libc {
  readonly malloc: (size: number) => number
  readonly calloc: (count: number, size: number) => number
  readonly realloc: (block: number, size: number) => number
  readonly free: (block: number) => void
  readonly strdup: (s: number) => number
  readonly usableSize: (block: number) => number
  readonly copy: (dst: number, src: number, n: number) => number
  readonly poke: (dst: bigint, src: BigUint64Array, n: number) => unknown
}

let libc: Libc | undefined
/** koffi prototypes by name: a name may be declared once per thread. */
const prototypes = new Map<string, unknown>()

/** The copy's allocator slots; each must be patched (EspeakNativeLib's loadCopy refuses a copy without them). */
export const ALLOCATOR_SLOTS = ["malloc", "calloc", "realloc", "free", "strdup"] as const

const bindLibc = (koffi: typeof Koffi): Libc => {
  if (libc !== undefined) return libc
  // The process's global scope (dlopen(NULL)), not libc.so.6's own symbols: the allocator the
  // rest of the copy's libc calls reach (strdup's malloc, fopen's), which is an LD_PRELOAD'ed
  // one (jemalloc, tcmalloc, glibc's malloc-debug) where there is one. Blocks from one allocator
  // freed by another would corrupt both heaps.
  const lib = koffi.load(null as unknown as string)
  libc = {
    malloc: lib.func("intptr_t malloc(size_t size)"),
    calloc: lib.func("intptr_t calloc(size_t count, size_t size)"),
    realloc: lib.func("intptr_t realloc(intptr_t block, size_t size)"),
    free: lib.func("void free(intptr_t block)"),
    strdup: lib.func("intptr_t strdup(intptr_t s)"),
    usableSize: lib.func("size_t malloc_usable_size(intptr_t block)"),
    copy: lib.func("intptr_t memcpy(intptr_t dst, intptr_t src, size_t n)"),
    poke: lib.func("void *memcpy(intptr_t dst, const uint64_t *src, size_t n)")
  }
  return libc
}

export class EpochHeap {
  private readonly live = new Set<number>()
  private readonly freedOld = new Set<number>()
  /** Blocks freed at rewinds so far: what the statics-only rewind leaked (for tests). */
  reclaimed = 0

  /** Points the copy's allocator slots (at `base` + each slot's offset) at this tracker. */
  constructor(koffi: typeof Koffi, base: bigint, slots: ReadonlyMap<string, bigint>) {
    const c = bindLibc(koffi)
    const track = (block: number) => {
      if (block !== 0) this.live.add(block)
      return block
    }
    const release = (block: number) => {
      if (this.live.delete(block)) c.free(block)
      else this.freedOld.add(block)
    }
    const hooks: Record<string, [string, (...args: Array<number>) => number | void]> = {
      malloc: ["intptr_t espeak_malloc(size_t size)", (size) => track(c.malloc(size!))],
      calloc: ["intptr_t espeak_calloc(size_t count, size_t size)", (count, size) => track(c.calloc(count!, size!))],
      strdup: ["intptr_t espeak_strdup(intptr_t s)", (s) => track(c.strdup(s!))],
      free: ["void espeak_free(intptr_t block)", (block) => {
        if (block !== 0) release(block!)
      }],
      realloc: ["intptr_t espeak_realloc(intptr_t block, size_t size)", (block, size) => {
        if (block === 0) return track(c.malloc(size!))
        if (size === 0) {
          // glibc frees the block and returns NULL: it must not stay in `live`.
          release(block!)
          return 0
        }
        if (this.live.has(block!)) {
          const moved = c.realloc(block!, size!)
          if (moved !== 0) {
            this.live.delete(block!)
            this.live.add(moved)
          }
          return moved
        }
        // An older block: the snapshot may still point at it, so it must not move or go.
        const copy = c.malloc(size!)
        if (copy === 0) return 0
        c.copy(copy, block!, Math.min(size!, c.usableSize(block!)))
        this.freedOld.add(block!)
        return track(copy)
      }]
    }
    for (const [name, [signature, hook]] of Object.entries(hooks)) {
      const slot = slots.get(name)!
      let type = prototypes.get(name)
      if (type === undefined) prototypes.set(name, (type = koffi.pointer(koffi.proto(signature))))
      const pointer = koffi.register(hook, type as ReturnType<typeof koffi.pointer>)
      c.poke(base + slot, BigUint64Array.of(pointer), 8)
    }
  }

  /** The statics went back to the snapshot: blocks of the epoch are unreachable. */
  rewound(): void {
    const { free } = libc!
    for (const block of this.live) free(block)
    this.reclaimed += this.live.size
    this.live.clear()
    this.freedOld.clear()
  }

  /** A new snapshot was taken: the epoch's blocks belong to it, what it freed is gone for good. */
  snapshotTaken(): void {
    const { free } = libc!
    for (const block of this.freedOld) free(block)
    this.freedOld.clear()
    this.live.clear()
  }


}
