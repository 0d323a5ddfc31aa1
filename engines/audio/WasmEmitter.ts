/**
 * A tiny emitter of WebAssembly bytecode: the binary encoding, the opcodes used here (core spec
 * 2.0 with fixed-width SIMD) and helpers that return instruction sequences as byte arrays.
 * ResamplerKernel.ts assembles its module from these, so no compiler toolchain is involved.
 */
import { encodeS32, encodeU32 } from "../Leb128.ts"

// ---- Encoding ----

export const ascii = (s: string): Array<number> => [...encodeU32(s.length), ...Array.from(s, (c) => c.charCodeAt(0))]
export const vector = (items: ReadonlyArray<ReadonlyArray<number>>): Array<number> => [...encodeU32(items.length), ...items.flat()]
export const section = (id: number, body: ReadonlyArray<number>): Array<number> => [id, ...encodeU32(body.length), ...body]
export const withLength = (code: ReadonlyArray<number>): Array<number> => [...encodeU32(code.length), ...code]

// ---- Opcodes (WebAssembly core spec 2.0, including fixed-width SIMD) ----

export const I32 = 0x7f
export const V128 = 0x7b
export const FUNC_TYPE = 0x60
export const VOID_BLOCK = 0x40

export const BLOCK = 0x02
export const LOOP = 0x03
export const IF = 0x04
export const END = 0x0b
export const BR = 0x0c
export const BR_IF = 0x0d
export const LOCAL_GET = 0x20
export const LOCAL_SET = 0x21
export const LOCAL_TEE = 0x22
export const F32_STORE = 0x38
export const I32_CONST = 0x41
export const I32_LT_U = 0x49
export const I32_GE_U = 0x4f
export const I32_ADD = 0x6a
export const I32_SUB = 0x6b
export const I32_MUL = 0x6c
export const I32_AND = 0x71
export const I32_SHL = 0x74
export const F32_ADD = 0x92
/** Prefix of the SIMD instructions; the sub-opcode follows as unsigned LEB128. */
export const SIMD_PREFIX = 0xfd
export const V128_LOAD = 0x00
export const V128_CONST = 0x0c
export const F32X4_EXTRACT_LANE = 0x1f
export const V128_STORE = 0x0b
export const V128_STORE32_LANE = 0x5a
export const V128_LOAD64_ZERO = 0x5d
export const F64X2_PROMOTE_LOW_F32X4 = 0x5f
export const F64X2_FLOOR = 0x75
export const I16X8_NARROW_I32X4_S = 0x85
export const I32X4_EXTEND_LOW_I16X8_S = 0xa7
export const I32X4_EXTEND_HIGH_I16X8_S = 0xa8
export const F32X4_ADD = 0xe4
export const F32X4_MUL = 0xe6
export const F64X2_ADD = 0xf0
export const F64X2_MUL = 0xf2
export const F32X4_CONVERT_I32X4_S = 0xfa
export const I32X4_TRUNC_SAT_F64X2_S_ZERO = 0xfc

export const SECTION_TYPE = 1
export const SECTION_FUNCTION = 3
export const SECTION_MEMORY = 5
export const SECTION_EXPORT = 7
export const SECTION_CODE = 10
export const EXPORT_FUNC = 0x00
export const EXPORT_MEMORY = 0x02

// ---- Instruction helpers ----

export type Code = Array<number>
export const get = (local: number): Code => [LOCAL_GET, ...encodeU32(local)]
export const set = (local: number): Code => [LOCAL_SET, ...encodeU32(local)]
export const tee = (local: number): Code => [LOCAL_TEE, ...encodeU32(local)]
export const i32 = (n: number): Code => [I32_CONST, ...encodeS32(n)]
export const simd = (op: number, ...immediates: Array<number>): Code => [SIMD_PREFIX, ...encodeU32(op), ...immediates]
/** Memory argument: log2 of the alignment promised (a hint: 2 for f32 data, 1 for s16), offset. */
export const memarg = (alignLog2: number, offset: number): Code => [...encodeU32(alignLog2), ...encodeU32(offset)]
/** local += n */
export const bump = (local: number, n: Code): Code => [...get(local), ...n, I32_ADD, ...set(local)]

/** Runs `body` while local x < local end, as `block { if x >= end break; loop { body; if x < end continue } }`. */
export const whileBelow = (x: number, end: number, body: Code): Code => [
  BLOCK, VOID_BLOCK,
  ...get(x), ...get(end), I32_GE_U, BR_IF, 0,
  LOOP, VOID_BLOCK,
  ...body,
  ...get(x), ...get(end), I32_LT_U, BR_IF, 0,
  END,
  END
]

/** A v128 constant of two equal f64 lanes. */
export const f64x2 = (value: number): Code => {
  const lane = new Uint8Array(new Float64Array([value]).buffer)
  return simd(V128_CONST, ...lane, ...lane)
}

/** A v128 constant of four equal f32 lanes. */
export const f32x4 = (value: number): Code => {
  const lane = new Uint8Array(new Float32Array([value]).buffer)
  return simd(V128_CONST, ...lane, ...lane, ...lane, ...lane)
}
