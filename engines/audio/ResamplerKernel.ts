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
 *
 * Two more functions serve streams of s16 (the TTS workers' espeak-ng blocks): toFloat(src, dst,
 * octets) converts their input, eight samples a turn, and toInt16(src, dst, pairs) the outputs,
 * two a turn, in place; bit for bit Pcm.ts's int16ToFloat and floatToInt16.
 */
import { encodeU32 } from "../Leb128.ts"
import {
  ascii, vector, section, withLength, I32, V128, FUNC_TYPE, VOID_BLOCK, BLOCK, LOOP, IF, END, BR, BR_IF,
  F32_STORE, I32_LT_U, I32_ADD, I32_SUB, I32_MUL, I32_AND, I32_SHL, F32_ADD, V128_LOAD, V128_CONST,
  F32X4_EXTRACT_LANE, V128_STORE, V128_STORE32_LANE, V128_LOAD64_ZERO, F64X2_PROMOTE_LOW_F32X4, F64X2_FLOOR,
  I16X8_NARROW_I32X4_S, I32X4_EXTEND_LOW_I16X8_S, I32X4_EXTEND_HIGH_I16X8_S, F32X4_ADD, F32X4_MUL, F64X2_ADD,
  F64X2_MUL, F32X4_CONVERT_I32X4_S, I32X4_TRUNC_SAT_F64X2_S_ZERO, SECTION_TYPE, SECTION_FUNCTION,
  SECTION_MEMORY, SECTION_EXPORT, SECTION_CODE, EXPORT_FUNC, EXPORT_MEMORY, type Code, get, set, tee, i32,
  simd, memarg, bump, whileBelow, f64x2, f32x4
} from "./WasmEmitter.ts"

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
  toInt16(src: number, dst: number, pairs: number): void
  toFloat(src: number, dst: number, octets: number): void
}
export interface WasmApi {
  validate(bytes: Uint8Array): boolean
  readonly Module: new (bytes: Uint8Array) => WasmModule
  readonly Instance: new (module: WasmModule, imports: object) => { readonly exports: object }
}

// ---- The convolution ----

/** acc = acc + v128.load(x + offset) * v128.load(row + offset) */
const multiplyAdd = (acc: number, x: number, row: number, offset: number): Code => [
  ...get(acc),
  ...get(x), ...simd(V128_LOAD, ...memarg(2, offset)),
  ...get(row), ...simd(V128_LOAD, ...memarg(2, offset)),
  ...simd(F32X4_MUL),
  ...simd(F32X4_ADD),
  ...set(acc)
]

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

// toInt16(src, dst, pairs): parameters, then the end of the source.
const SRC = 0
const DST = 1
const PAIRS = 2
const SRC_END = 3

/**
 * toInt16(src, dst, pairs): 2·pairs f32 samples at src become s16 at dst, two at a time, by
 * Pcm.ts's floatToInt16 rule: floor(s · 32768 + 0.5) in float64 (exact for every float32 s, so
 * bit for bit the JavaScript result; float32 arithmetic would round 0.5 - 2^-25 up to 1),
 * saturated to s16 (trunc_sat to i32, then narrow; NaN → 0). dst may be src (writes trail reads).
 */
const toInt16Body: Code = [
  ...get(SRC), ...get(PAIRS), ...i32(3), I32_SHL, I32_ADD, ...set(SRC_END),
  ...whileBelow(SRC, SRC_END, [
    ...get(DST),
    ...get(SRC), ...simd(V128_LOAD64_ZERO, ...memarg(2, 0)), ...simd(F64X2_PROMOTE_LOW_F32X4),
    ...f64x2(32768), ...simd(F64X2_MUL), ...f64x2(0.5), ...simd(F64X2_ADD), ...simd(F64X2_FLOOR),
    ...simd(I32X4_TRUNC_SAT_F64X2_S_ZERO), ...tee(SRC_END + 1), ...get(SRC_END + 1), ...simd(I16X8_NARROW_I32X4_S),
    ...simd(V128_STORE32_LANE, ...memarg(1, 0), 0),
    ...bump(SRC, i32(8)),
    ...bump(DST, i32(4))
  ]),
  END
]

// toFloat(src, dst, octets): parameters, then the end of the source and the loaded vector.
const OCTETS = 2
const VALUES = 4

/**
 * toFloat(src, dst, octets): 8·octets s16 samples at src become f32 at dst, eight a turn, as
 * s / 32768 (exact: Pcm.ts's int16ToFloat, bit for bit).
 */
const toFloatBody: Code = [
  ...get(SRC), ...get(OCTETS), ...i32(4), I32_SHL, I32_ADD, ...set(SRC_END),
  ...whileBelow(SRC, SRC_END, [
    ...get(SRC), ...simd(V128_LOAD, ...memarg(1, 0)), ...set(VALUES),
    ...get(DST), ...get(VALUES), ...simd(I32X4_EXTEND_LOW_I16X8_S), ...simd(F32X4_CONVERT_I32X4_S), ...f32x4(1 / 32768), ...simd(F32X4_MUL),
    ...simd(V128_STORE, ...memarg(2, 0)),
    ...get(DST), ...get(VALUES), ...simd(I32X4_EXTEND_HIGH_I16X8_S), ...simd(F32X4_CONVERT_I32X4_S), ...f32x4(1 / 32768), ...simd(F32X4_MUL),
    ...simd(V128_STORE, ...memarg(2, 16)),
    ...bump(SRC, i32(16)),
    ...bump(DST, i32(32))
  ]),
  END
]

/** The module's bytes: one memory and three functions, all exported. */
export const kernelModule = (): Uint8Array => {
  const params = new Array<number>(9).fill(I32)
  const bytes = [
    // Header: "\0asm", version 1.
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    // Types: 0 = (i32 × 9) -> i32 (convolve), 1 = (i32 × 3) -> () (toInt16).
    ...section(SECTION_TYPE, vector([
      [FUNC_TYPE, ...encodeU32(params.length), ...params, ...encodeU32(1), I32],
      [FUNC_TYPE, ...encodeU32(3), I32, I32, I32, ...encodeU32(0)]
    ])),
    // Functions: convolve of type 0, toInt16 and toFloat of type 1.
    ...section(SECTION_FUNCTION, vector([[0], [1], [1]])),
    // Memory: one, 1 page (64 KiB) to start, no maximum.
    ...section(SECTION_MEMORY, vector([[0x00, ...encodeU32(1)]])),
    // Exports: the memory and the functions.
    ...section(SECTION_EXPORT, vector([
      [...ascii("memory"), EXPORT_MEMORY, 0],
      [...ascii("convolve"), EXPORT_FUNC, 0],
      [...ascii("toInt16"), EXPORT_FUNC, 1],
      [...ascii("toFloat"), EXPORT_FUNC, 2]
    ])),
    // Code: each body's size, its locals as (count, type) runs, the body.
    ...section(SECTION_CODE, vector([
      withLength([...vector([[6, I32], [4, V128]]), ...body]),
      withLength([...vector([[1, I32], [1, V128]]), ...toInt16Body]),
      withLength([...vector([[1, I32], [1, V128]]), ...toFloatBody])
    ]))
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
   * by M/L (p += M; while p ≥ L: p -= L, j++). Every sample read must be in `buf`. An Int16Array
   * `out` gets the outputs converted as by Pcm.ts's floatToInt16, bit for bit, inside the module
   * (saves a JavaScript pass over the output and a Float32Array per block: the TTS workers' path).
   */
  convolve(table: Float32Array, taps: number, L: number, M: number, buf: Float32Array, j: number, p: number, out: Float32Array | Int16Array): void
  /** Pcm.ts's floatToInt16 into `out` (as long as `samples`), bit for bit; for tests. */
  toInt16(samples: Float32Array, out: Int16Array): void
  /** Pcm.ts's int16ToFloat into `out` (as long as `samples`), bit for bit: the s16 streams' input. */
  toFloat(samples: Int16Array, out: Float32Array): void
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
  let heap16 = new Int16Array(memory.buffer)
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
      heap16 = new Int16Array(memory.buffer)
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
      if (tableBytes + align16(spanOf(BLOCK_OUT, L - 1, L, M, taps) * 4) + (BLOCK_OUT + 1) * 4 > MAX_BYTES) return false
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
        // One float more than the outputs: toInt16 reads pairs.
        reserve(outPtr + (count + 1) * 4)
        heap.set(buf.subarray(j, j + span), inPtr / 4)
        const inEnd = kernel(inPtr, at, outPtr, count, p, L, M, taps, rowBytes)
        if (out instanceof Int16Array) {
          exports.toInt16(outPtr, outPtr, (count + 1) >> 1)
          out.set(heap16.subarray(outPtr / 2, outPtr / 2 + count), done)
        } else out.set(heap.subarray(outPtr / 4, outPtr / 4 + count), done)
        const step = p + count * M
        j += Math.floor(step / L)
        p = step % L
        if (inEnd !== inPtr + 4 * Math.floor(step / L)) throw new Error("ResamplerKernel: the kernel and its caller disagree on the input step")
        done += count
      }
    },
    toInt16: (samples, out) => {
      for (let done = 0; done < samples.length; done += BLOCK_OUT) {
        const count = Math.min(BLOCK_OUT, samples.length - done)
        reserve(top + (count + 1) * 4)
        heap.set(samples.subarray(done, done + count), top / 4)
        exports.toInt16(top, top, (count + 1) >> 1)
        out.set(heap16.subarray(top / 2, top / 2 + count), done)
      }
    },
    toFloat: (samples, out) => {
      for (let done = 0; done < samples.length; done += BLOCK_OUT) {
        const count = Math.min(BLOCK_OUT, samples.length - done)
        // Whole octets: up to 7 samples past the end are read and converted, and not copied out.
        const octets = (count + 7) >> 3
        const outPtr = align16(top + octets * 16)
        reserve(outPtr + octets * 32)
        heap16.set(samples.subarray(done, done + count), top / 2)
        exports.toFloat(top, outPtr, octets)
        out.set(heap.subarray(outPtr / 4, outPtr / 4 + count), done)
      }
    }
  }
}
