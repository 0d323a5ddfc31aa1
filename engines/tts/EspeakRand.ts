/**
 * A private rand() for one native espeak-ng copy (EspeakNativeLib.ts): its `rand` .got.plt slot
 * points here instead of at libc's process-wide generator.
 *
 * Why: the noise of breathy and Klatt voices (about half the presets, the default voice among
 * them) comes from rand(). libc's generator is shared by every thread of the process, and other
 * libraries draw from it too: onnxruntime (the speech-to-text VAD) calls it ~37 times per
 * transcription, so a noisy voice sounded different when a transcription ran beside it (an
 * outside review: 7 of ~2,400 requests). A process lock around every noisy synthesis kept
 * espeak's own threads apart but not other libraries, and held noisy voices to one core.
 *
 * What: 48 bytes of x86-64 machine code, a 64-bit linear congruential generator (Knuth's MMIX
 * constants) returning the top 31 bits, as glibc's rand() does (0 to RAND_MAX = 2^31 - 1). Its
 * state lives on a page of its own, set by `seed` before each synthesis, so a request draws the
 * same numbers whatever ran before it or beside it. A JavaScript callback would do the same at
 * ~1 µs per call, too slow: one sentence draws ~100,000 numbers.
 *
 * Hazards: the code page is mapped writable, filled, then made read-only and executable (never
 * both writable and executable). One generator per copy, used by the one thread that speaks with
 * the copy. Never unmapped: the copy's slot points at it for the life of the process.
 */
import type Koffi from "koffi"

const PAGE = 4096
const PROT_READ = 1
const PROT_WRITE = 2
const PROT_EXEC = 4
const MAP_PRIVATE = 0x02
const MAP_ANONYMOUS = 0x20
/** MMIX by Knuth: state = state × A + C (mod 2^64). */
const MULTIPLIER = 6364136223846793005n
const INCREMENT = 1442695040888963407n

const le64 = (value: bigint): Array<number> => [...new Uint8Array(BigUint64Array.of(value).buffer)]

/** The generator's code, reading and writing its state at `stateAddress`. */
export const randCode = (stateAddress: bigint): Uint8Array =>
  Uint8Array.from([
    ...[0x48, 0xb9], ...le64(stateAddress), // mov rcx, stateAddress
    ...[0x48, 0x8b, 0x01], //                  mov rax, [rcx]
    ...[0x48, 0xba], ...le64(MULTIPLIER), //   mov rdx, MULTIPLIER
    ...[0x48, 0x0f, 0xaf, 0xc2], //            imul rax, rdx
    ...[0x48, 0xba], ...le64(INCREMENT), //    mov rdx, INCREMENT
    ...[0x48, 0x01, 0xd0], //                  add rax, rdx
    ...[0x48, 0x89, 0x01], //                  mov [rcx], rax
    ...[0x48, 0xc1, 0xe8, 0x21], //            shr rax, 33
    0xc3 //                                    ret
  ])

interface Mem {
  readonly mmap: (addr: null, length: number, prot: number, flags: number, fd: number, offset: number) => bigint | number
  readonly mprotect: (addr: bigint, length: number, prot: number) => number
  readonly write: (dst: bigint, src: Uint8Array, n: number) => unknown
}

let mem: Mem | undefined
const bindMem = (koffi: typeof Koffi): Mem => {
  if (mem !== undefined) return mem
  const libc = koffi.load("libc.so.6")
  mem = {
    mmap: libc.func("intptr_t mmap(void *addr, size_t length, int prot, int flags, int fd, intptr_t offset)"),
    mprotect: libc.func("int mprotect(intptr_t addr, size_t length, int prot)"),
    write: libc.func("void *memcpy(intptr_t dst, const uint8_t *src, size_t n)")
  }
  return mem
}

export class PrivateRand {
  /** Where the code starts: the value for the copy's `rand` slot. */
  readonly address: bigint
  private readonly state: bigint
  private readonly mem: Mem

  constructor(koffi: typeof Koffi) {
    const m = (this.mem = bindMem(koffi))
    const pages = BigInt(m.mmap(null, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))
    if (pages === -1n) throw new Error("espeak-ng: mmap for its private rand() failed")
    this.address = pages
    this.state = pages + BigInt(PAGE)
    const code = randCode(this.state)
    m.write(this.address, code, code.length)
    if (m.mprotect(this.address, PAGE, PROT_READ | PROT_EXEC) !== 0) throw new Error("espeak-ng: mprotect of its private rand() failed")
  }

  /** Sets the state; the next draws are then the same on every call. */
  seed(value: bigint): void {
    const bytes = new Uint8Array(BigUint64Array.of(value).buffer)
    this.mem.write(this.state, bytes, bytes.length)
  }
}
