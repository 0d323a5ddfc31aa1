/**
 * The resampler's inner loop (the polyphase dot products of Resampler.ts) as a WebAssembly SIMD
 * function: four f32 lanes per instruction instead of one float64 multiply-add at a time.
 *
 * No compiler toolchain is involved: the module (a few hundred bytes) is assembled below from
 * named opcodes by a tiny emitter, validated with `WebAssembly.validate` and compiled
 * synchronously once per thread (each worker thread evaluates this module anew). Where
 * WebAssembly or its SIMD proposal is missing (`node --jitless`, old engines),
 * `createSimdKernel` answers undefined and Resampler.ts keeps its JavaScript loop.
 *
 * Memory (the module's own, exported, grown from JavaScript as needed):
 *   [ table of design 1 | table of design 2 | … | input window | output block ]
 * Each design's phase table is copied in once, its rows padded to a multiple of four floats so
 * that every row starts 16-byte aligned. Input and output go through a scratch area after the
 * tables in blocks of at most BLOCK outputs, which bounds the memory a long one-shot call needs.
 *
 * The function, in the notation of Resampler.ts (output n starts at input time i + p/L):
 *   convolve(inPtr, tablePtr, outPtr, count, p, L, M, taps, rowBytes) -> inPtr after the block
 *   for each of `count` outputs:
 *     out = Σ_{m < taps} in[m] · row_p[m], in f32x4: four vector accumulators over 16 taps a
 *           turn, then single vectors over 4, then a 64-bit load for the last 2 (taps = 2·H is
 *           even); lanes summed as (a0 + a1) + (a2 + a3), then (l0 + l1) + (l2 + l3);
 *     p += M; while p ≥ L: p -= L, inPtr += 4 (the input window slides by one sample).
 * Each output depends only on its own window and row, always summed in the same order, so the
 * way a stream is cut into blocks cannot change a single bit of it.
 */
import { encodeS32, encodeU32 } from "../Leb128.ts"


// ---- The part of the WebAssembly API used here (the project's lib has no WebAssembly types) ----

interface WasmModule {
  readonly __brand: "WebAssembly.Module"
}
interface WasmMemory {
  readonly buffer: ArrayBuffer
  grow(pages: number): number
}
interface KernelExports {
  readonly memory: WasmMemory
  convolve(inPtr: number, tablePtr: number, outPtr: number, count: number, p: number, L: number, M: number, taps: number, rowBytes: number): number
}
export interface WasmApi {
  validate(bytes: Uint8Array): boolean
  readonly Module: new (bytes: Uint8Array) => WasmModule
  readonly Instance: new (module: WasmModule, imports: object) => { readonly exports: object }
}

// ---- Encoding ----

const ascii = (s: string): Array<number> => [...encodeU32(s.length), ...Array.from(s, (c) => c.charCodeAt(0))]
const vector = (items: ReadonlyArray<ReadonlyArray<number>>): Array<number> => [...encodeU32(items.length), ...items.flat()]
const section = (id: number, body: ReadonlyArray<number>): Array<number> => [id, ...encodeU32(body.length), ...body]
const withLength = (code: ReadonlyArray<number>): Array<number> => [...encodeU32(code.length), ...code]

// ---- Opcodes (WebAssembly core spec 2.0, including fixed-width SIMD) ----

const I32 = 0x7f
const V128 = 0x7b
const FUNC_TYPE = 0x60
const VOID_BLOCK = 0x40

const BLOCK = 0x02
const LOOP = 0x03
const IF = 0x04
const END = 0x0b
const BR = 0x0c
const BR_IF = 0x0d
const LOCAL_GET = 0x20
const LOCAL_SET = 0x21
const LOCAL_TEE = 0x22
const F32_STORE = 0x38
const I32_CONST = 0x41
const I32_LT_U = 0x49
const I32_GE_U = 0x4f
const I32_ADD = 0x6a
const I32_SUB = 0x6b
const I32_MUL = 0x6c
const I32_AND = 0x71
const I32_SHL = 0x74
const F32_ADD = 0x92
/** Prefix of the SIMD instructions; the sub-opcode follows as unsigned LEB128. */
const SIMD_PREFIX = 0xfd
const V128_LOAD = 0x00
const V128_CONST = 0x0c
const F32X4_EXTRACT_LANE = 0x1f
const V128_LOAD64_ZERO = 0x5d
const F32X4_ADD = 0xe4
const F32X4_MUL = 0xe6

const SECTION_TYPE = 1
const SECTION_FUNCTION = 3
const SECTION_MEMORY = 5
const SECTION_EXPORT = 7
const SECTION_CODE = 10
const EXPORT_FUNC = 0x00
const EXPORT_MEMORY = 0x02

// ---- Instruction helpers ----

type Code = Array<number>
const get = (local: number): Code => [LOCAL_GET, ...encodeU32(local)]
const set = (local: number): Code => [LOCAL_SET, ...encodeU32(local)]
const tee = (local: number): Code => [LOCAL_TEE, ...encodeU32(local)]
const i32 = (n: number): Code => [I32_CONST, ...encodeS32(n)]
const simd = (op: number, ...immediates: Array<number>): Code => [SIMD_PREFIX, ...encodeU32(op), ...immediates]
/** Memory argument: log2 of the alignment promised (a hint; f32 data is 4-byte aligned), offset. */
const memarg = (alignLog2: number, offset: number): Code => [...encodeU32(alignLog2), ...encodeU32(offset)]
/** acc = acc + v128.load(x + offset) * v128.load(row + offset) */
const multiplyAdd = (acc: number, x: number, row: number, offset: number): Code => [
  ...get(acc),
  ...get(x), ...simd(V128_LOAD, ...memarg(2, offset)),
  ...get(row), ...simd(V128_LOAD, ...memarg(2, offset)),
  ...simd(F32X4_MUL),
  ...simd(F32X4_ADD),
  ...set(acc)
]
/** local += n */
const bump = (local: number, n: Code): Code => [...get(local), ...n, I32_ADD, ...set(local)]

// ---- The function ----

// Parameters (locals 0–8), then the function's own locals.
const IN = 0
const TABLE = 1
const OUT = 2
const COUNT = 3
const P = 4
const L = 5
const M = 6
const TAPS = 7
const ROW_BYTES = 8
const OUT_END = 9
const X = 10
const ROW = 11
const BYTES16 = 12
const BYTES4 = 13
const END_X = 14
const A0 = 15
const A1 = 16
const A2 = 17
const A3 = 18

/** Runs `body` while local x < local end, as `block { if x >= end break; loop { body; if x < end continue } }`. */
const whileBelow = (x: number, end: number, body: Code): Code => [
  BLOCK, VOID_BLOCK,
  ...get(x), ...get(end), I32_GE_U, BR_IF, 0,
  LOOP, VOID_BLOCK,
  ...body,
  ...get(x), ...get(end), I32_LT_U, BR_IF, 0,
  END,
  END
]

const body: Code = [
  // Per call: where the outputs end; the bytes of taps covered by 16-tap and by 4-tap turns.
  ...get(OUT), ...get(COUNT), ...i32(2), I32_SHL, I32_ADD, ...set(OUT_END),
  ...get(TAPS), ...i32(-16), I32_AND, ...i32(2), I32_SHL, ...set(BYTES16),
  ...get(TAPS), ...i32(-4), I32_AND, ...i32(2), I32_SHL, ...set(BYTES4),
  ...whileBelow(OUT, OUT_END, [
    // The phase row and the start of the window; four zeroed accumulators.
    ...get(TABLE), ...get(P), ...get(ROW_BYTES), I32_MUL, I32_ADD, ...set(ROW),
    ...get(IN), ...set(X),
    ...simd(V128_CONST, ...new Array<number>(16).fill(0)), ...tee(A0), ...tee(A1), ...tee(A2), ...set(A3),
    // 16 taps a turn into four independent accumulators (their additions overlap).
    ...get(IN), ...get(BYTES16), I32_ADD, ...set(END_X),
    ...whileBelow(X, END_X, [
      ...multiplyAdd(A0, X, ROW, 0),
      ...multiplyAdd(A1, X, ROW, 16),
      ...multiplyAdd(A2, X, ROW, 32),
      ...multiplyAdd(A3, X, ROW, 48),
      ...bump(X, i32(64)),
      ...bump(ROW, i32(64))
    ]),
    // Then 4 taps a turn.
    ...get(IN), ...get(BYTES4), I32_ADD, ...set(END_X),
    ...whileBelow(X, END_X, [...multiplyAdd(A0, X, ROW, 0), ...bump(X, i32(16)), ...bump(ROW, i32(16))]),
    // The last 2 taps, if any: 64-bit loads leave lanes 2 and 3 zero.
    ...get(TAPS), ...i32(2), I32_AND, IF, VOID_BLOCK,
    ...get(A1),
    ...get(X), ...simd(V128_LOAD64_ZERO, ...memarg(2, 0)),
    ...get(ROW), ...simd(V128_LOAD64_ZERO, ...memarg(2, 0)),
    ...simd(F32X4_MUL), ...simd(F32X4_ADD), ...set(A1),
    END,
    // out = (l0 + l1) + (l2 + l3) of (a0 + a1) + (a2 + a3).
    ...get(A0), ...get(A1), ...simd(F32X4_ADD), ...get(A2), ...get(A3), ...simd(F32X4_ADD), ...simd(F32X4_ADD), ...set(A0),
    ...get(OUT),
    ...get(A0), ...simd(F32X4_EXTRACT_LANE, 0), ...get(A0), ...simd(F32X4_EXTRACT_LANE, 1), F32_ADD,
    ...get(A0), ...simd(F32X4_EXTRACT_LANE, 2), ...get(A0), ...simd(F32X4_EXTRACT_LANE, 3), F32_ADD,
    F32_ADD,
    F32_STORE, ...memarg(2, 0),
    ...bump(OUT, i32(4)),
    // Next input time: p += M; while p >= L { p -= L; the window moves one sample }.
    ...bump(P, get(M)),
    BLOCK, VOID_BLOCK,
    LOOP, VOID_BLOCK,
    ...get(P), ...get(L), I32_LT_U, BR_IF, 1,
    ...get(P), ...get(L), I32_SUB, ...set(P),
    ...bump(IN, i32(4)),
    BR, 0,
    END,
    END
  ]),
  ...get(IN),
  END
]

/** The module's bytes: one memory, one function, both exported. */
export const kernelModule = (): Uint8Array => {
  const params = new Array<number>(9).fill(I32)
  const bytes = [
    // Header: "\0asm", version 1.
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    // Types: (i32 × 9) -> i32.
    ...section(SECTION_TYPE, vector([[FUNC_TYPE, ...encodeU32(params.length), ...params, ...encodeU32(1), I32]])),
    // Functions: one, of type 0.
    ...section(SECTION_FUNCTION, vector([[0]])),
    // Memory: one, 1 page (64 KiB) to start, no maximum.
    ...section(SECTION_MEMORY, vector([[0x00, ...encodeU32(1)]])),
    // Exports: the memory and the function.
    ...section(SECTION_EXPORT, vector([[...ascii("memory"), EXPORT_MEMORY, 0], [...ascii("convolve"), EXPORT_FUNC, 0]])),
    // Code: the body's size, its locals as (count, type) runs (6 more i32, then 4 v128), the body.
    ...section(SECTION_CODE, vector([withLength([...vector([[6, I32], [4, V128]]), ...body])]))
  ]
  return Uint8Array.from(bytes)
}

// ---- The kernel, driven from JavaScript ----

/** Outputs per call into WebAssembly: bounds the scratch area whatever the length of the input. */
const BLOCK_OUT = 4096
const PAGE = 65536
/**
 * A design whose table and scratch would need more than this stays with the JavaScript loop.
 * The usual pairs need tens of KB (22050 → 24000: 20 KB); odd rates (an upload at 44101 Hz)
 * can need hundreds of MB, and those are rare enough for the JavaScript loop.
 */
const MAX_BYTES = 8 * 1024 * 1024
/**
 * All tables admitted in this thread together. Tables are never freed (the memory only grows),
 * so without a total a stream of distinct odd rates would grow it past 2 GiB, where the kernel's
 * i32 addresses wrap and every later call failed; past this total new designs use JavaScript.
 */
const TABLES_BUDGET = 32 * 1024 * 1024

/** Rounds up to a multiple of 16 (arithmetic, not bitwise: addresses may pass 2^31). */
const align16 = (bytes: number) => Math.ceil(bytes / 16) * 16

/** Input samples that `count` outputs starting at phase p read (the last window's end). */
const spanOf = (count: number, p: number, L: number, M: number, taps: number) => Math.floor((p + (count - 1) * M) / L) + taps

export interface SimdKernel {
  /**
   * Whether the kernel takes a design (its table and scratch within MAX_BYTES, and the table
   * within what is left of TABLES_BUDGET); a yes counts against the budget. Asked once per design.
   */
  admit(taps: number, L: number, M: number): boolean
  /**
   * The same contract as Resampler.ts's JavaScript loop: out[n] is row p_n of `table` (L rows of
   * `taps`) dotted with buf[j_n …], where j_0 = j, p_0 = p and each output steps the input time
   * by M/L (p += M; while p ≥ L: p -= L, j++). Every sample read must be in `buf`.
   */
  convolve(table: Float32Array, taps: number, L: number, M: number, buf: Float32Array, j: number, p: number, out: Float32Array): void
}

/** This platform's WebAssembly; undefined where there is none (`node --jitless`). */
export const platformWasm = (globalThis as unknown as { WebAssembly?: WasmApi }).WebAssembly

/**
 * Compiles the kernel for this thread with `wasm` (platformWasm, or a test's stand-in), or answers
 * undefined where WebAssembly or its SIMD instructions are unavailable.
 */
export const createSimdKernel = (wasm: WasmApi | undefined): SimdKernel | undefined => {
  const bytes = kernelModule()
  if (wasm === undefined || !wasm.validate(bytes)) return undefined
  let exports: KernelExports
  try {
    exports = new wasm.Instance(new wasm.Module(bytes), {}).exports as KernelExports
  } catch {
    return undefined
  }
  const { memory } = exports
  const kernel = exports.convolve
  let heap = new Float32Array(memory.buffer)
  /** Where each design's table lives (bytes), and its padded row length. */
  const tables = new WeakMap<Float32Array, { readonly at: number; readonly rowBytes: number }>()
  /** End of the tables: the scratch area starts here. */
  let top = 0
  /** Bytes of the tables admitted so far (placed or not yet). */
  let admitted = 0

  const reserve = (bytes: number) => {
    if (bytes > memory.buffer.byteLength) {
      memory.grow(Math.ceil((bytes - memory.buffer.byteLength) / PAGE))
      heap = new Float32Array(memory.buffer)
    }
  }

  const tableOf = (table: Float32Array, taps: number, L: number) => {
    const known = tables.get(table)
    if (known !== undefined) return known
    const rowFloats = (taps + 3) & ~3
    const at = top
    reserve(at + L * rowFloats * 4)
    for (let p = 0; p < L; p++) heap.set(table.subarray(p * taps, (p + 1) * taps), at / 4 + p * rowFloats)
    top = align16(at + L * rowFloats * 4)
    const placed = { at, rowBytes: rowFloats * 4 }
    tables.set(table, placed)
    return placed
  }

  return {
    // Asked once per design (Resampler.ts caches its answer), so a design's kernel never changes.
    admit: (taps, L, M) => {
      const tableBytes = align16(((taps + 3) & ~3) * L * 4)
      if (tableBytes + align16(spanOf(BLOCK_OUT, L - 1, L, M, taps) * 4) + BLOCK_OUT * 4 > MAX_BYTES) return false
      if (admitted + tableBytes > TABLES_BUDGET) return false
      admitted += tableBytes
      return true
    },
    convolve: (table, taps, L, M, buf, j, p, out) => {
      const { at, rowBytes } = tableOf(table, taps, L)
      for (let done = 0; done < out.length; ) {
        const count = Math.min(BLOCK_OUT, out.length - done)
        const span = spanOf(count, p, L, M, taps)
        const inPtr = top
        const outPtr = align16(inPtr + span * 4)
        reserve(outPtr + count * 4)
        heap.set(buf.subarray(j, j + span), inPtr / 4)
        const inEnd = kernel(inPtr, at, outPtr, count, p, L, M, taps, rowBytes)
        out.set(heap.subarray(outPtr / 4, outPtr / 4 + count), done)
        const step = p + count * M
        j += Math.floor(step / L)
        p = step % L
        if (inEnd !== inPtr + 4 * Math.floor(step / L)) throw new Error("ResamplerKernel: the kernel and its caller disagree on the input step")
        done += count
      }
    }
  }
}
