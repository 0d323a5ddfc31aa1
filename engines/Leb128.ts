/**
 * LEB128, the variable-length integers of the WebAssembly binary format: read by the module
 * rewriter (engines/tts/WasmGlobals.ts), written by it and by the resampler's kernel assembler
 * (engines/audio/ResamplerKernel.ts).
 */

/** Unsigned LEB128 at `at`: the value and the offset after it. Throws past 32 bits or the end. */
export const readU32 = (bytes: Uint8Array, at: number): [number, number] => {
  let value = 0
  let shift = 0
  for (;;) {
    const b = bytes[at++]
    if (b === undefined || shift > 28) throw new Error(`wasm: bad LEB128 at ${at - 1}`)
    value += (b & 0x7f) * 2 ** shift
    shift += 7
    if ((b & 0x80) === 0) return [value, at]
  }
}

/** Unsigned LEB128 encoding of a non-negative integer (sizes, counts, indexes). */
export const encodeU32 = (n: number): Array<number> => {
  const out: Array<number> = []
  do {
    let b = n % 128
    n = Math.floor(n / 128)
    if (n > 0) b |= 0x80
    out.push(b)
  } while (n > 0)
  return out
}

/** Signed LEB128 encoding of an i32 (the immediate of `i32.const`). */
export const encodeS32 = (n: number): Array<number> => {
  const out: Array<number> = []
  for (;;) {
    const b = n & 0x7f
    n >>= 7
    if ((n === 0 && (b & 0x40) === 0) || (n === -1 && (b & 0x40) !== 0)) return [...out, b]
    out.push(b | 0x80)
  }
}
