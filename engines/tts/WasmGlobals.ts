/**
 * Just enough of the WebAssembly binary format (LEB128, sections, globals, exports, data
 * segments) to make ONE instance of a WASI command reusable: `addResetExport` rewrites the module
 * so that it exports a function that puts the instance back into the state it had right after
 * instantiation, before `_start` ran.
 *
 * What a fresh instance starts with, and how the reset function restores it:
 *  - mutable globals (the C stack pointer): each is set again from its own initialiser
 *    expression, copied from the global section;
 *  - linear memory: zeroed up to its current size (memory can grow, never shrink), then every
 *    data segment is copied in again with `memory.init`. To make that possible the active
 *    segments become passive and the module's own start-up copy is done by the first reset.
 * Why not a JS copy of the memory (as EspeakRuntime keeps): V8 reads passive segments straight
 * from the module's wire bytes, which the compiled module holds anyway, so the pristine copy
 * costs no extra memory (a JS snapshot of Flite's memory is ~16 MB per thread).
 *
 * Not restored, and refused or assumed instead: a start function (refused: it would have to run
 * again), tables (element segments are applied once; C code compiled by clang never writes its
 * table), imported globals and memories (owned by the importer; refused for memories).
 * Spec: https://webassembly.github.io/spec/core/binary/modules.html
 */
import { encodeS32, encodeU32, readU32 } from "../Leb128.ts"


/** Section ids of the binary format. */
const SECTION = { custom: 0, type: 1, import: 2, function: 3, memory: 5, global: 6, export: 7, start: 8, code: 10, data: 11, dataCount: 12 } as const
const EXTERNAL = { function: 0, table: 1, memory: 2, global: 3 } as const

export interface Section {
  readonly id: number
  /** Custom sections: their name; "" otherwise. */
  readonly name: string
  /** Byte range of the whole section (id and size included) and of its payload. */
  readonly start: number
  readonly payloadStart: number
  readonly end: number
}

export interface GlobalDef {
  /** Index in the global index space (imported globals come first). */
  readonly index: number
  readonly valueType: number
  readonly mutable: boolean
  /** The initialiser's instructions, without the final `end`. */
  readonly init: Uint8Array
}

export interface ExportDef {
  readonly name: string
  readonly kind: number
  readonly index: number
}

export interface DataSegment {
  /** Passive segments have no memory and offset. */
  readonly active: boolean
  readonly memory: number
  /** Offset expression without the final `end` (active segments; empty otherwise). */
  readonly offset: Uint8Array
  /** Byte range of the segment's contents in the module. */
  readonly bytesStart: number
  readonly bytesEnd: number
}

const skipLeb = (bytes: Uint8Array, at: number): number => {
  while ((bytes[at]! & 0x80) !== 0) at++
  return at + 1
}

const utf8 = new TextDecoder()
const name = (bytes: Uint8Array, at: number): [string, number] => {
  const [length, start] = readU32(bytes, at)
  return [utf8.decode(bytes.subarray(start, start + length)), start + length]
}

/** The module's sections in file order; checks the magic number and version 1. */
export const sectionsOf = (bytes: Uint8Array): Array<Section> => {
  const header = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00]
  if (header.some((b, i) => bytes[i] !== b)) throw new Error("wasm: not a version 1 module")
  const sections: Array<Section> = []
  let at = 8
  while (at < bytes.length) {
    const id = bytes[at]!
    const [size, payloadStart] = readU32(bytes, at + 1)
    const end = payloadStart + size
    if (end > bytes.length) throw new Error(`wasm: section ${id} runs past the end`)
    sections.push({ id, name: id === SECTION.custom ? name(bytes, payloadStart)[0] : "", start: at, payloadStart, end })
    at = end
  }
  return sections
}

/**
 * Skips one constant expression (global initialisers, segment offsets) up to its `end`; returns
 * the offset of the `end`. Accepts the MVP constants, global.get, ref.null/ref.func and the
 * extended-const arithmetic.
 */
const skipConstExpr = (bytes: Uint8Array, at: number): number => {
  for (;;) {
    const op = bytes[at++]
    if (op === 0x0b) return at - 1
    if (op === 0x41 || op === 0x42 || op === 0x23 || op === 0xd2) at = skipLeb(bytes, at) // i32/i64.const, global.get, ref.func
    else if (op === 0x43) at += 4 // f32.const
    else if (op === 0x44) at += 8 // f64.const
    else if (op === 0xd0) at += 1 // ref.null <type>
    else if (op === 0x6a || op === 0x6b || op === 0x6c || op === 0x7c || op === 0x7d || op === 0x7e) continue // extended-const
    else throw new Error(`wasm: unsupported opcode 0x${op?.toString(16)} in a constant expression at ${at - 1}`)
  }
}

const payloadOf = (sections: ReadonlyArray<Section>, id: number): Section | undefined => sections.find((s) => s.id === id)

/** How many functions, globals and memories the module imports (they come first in their index spaces). */
export const importCounts = (bytes: Uint8Array): { functions: number; globals: number; memories: number } => {
  const counts = { functions: 0, globals: 0, memories: 0 }
  const found = payloadOf(sectionsOf(bytes), SECTION.import)
  if (found === undefined) return counts
  let [n, at] = readU32(bytes, found.payloadStart)
  for (; n > 0; n--) {
    at = name(bytes, at)[1] // module
    at = name(bytes, at)[1] // field
    const kind = bytes[at++]
    if (kind === EXTERNAL.function) {
      at = skipLeb(bytes, at) // type index
      counts.functions++
    } else if (kind === EXTERNAL.table) {
      at = limitsEnd(bytes, at + 1) // reftype, limits
    } else if (kind === EXTERNAL.memory) {
      at = limitsEnd(bytes, at)
      counts.memories++
    } else if (kind === EXTERNAL.global) {
      at += 2 // valtype, mutability
      counts.globals++
    } else throw new Error(`wasm: unknown import kind ${kind}`)
  }
  return counts
}

/** Limits: flag (bit 0: has maximum), minimum, optional maximum. */
const limitsEnd = (bytes: Uint8Array, at: number): number => {
  const flags = bytes[at]!
  at = skipLeb(bytes, at + 1)
  return (flags & 1) !== 0 ? skipLeb(bytes, at) : at
}

/**
 * The entries of a section that is a vector (a count, then the entries), or none when the module
 * has no such section; `entry` parses the i-th at `at` and returns it with where the next starts.
 */
const readVector = <T>(bytes: Uint8Array, section: number, entry: (at: number, i: number) => readonly [T, number]): Array<T> => {
  const found = payloadOf(sectionsOf(bytes), section)
  if (found === undefined) return []
  let [n, at] = readU32(bytes, found.payloadStart)
  const entries: Array<T> = []
  for (let i = 0; i < n; i++) {
    const [value, next] = entry(at, i)
    entries.push(value)
    at = next
  }
  return entries
}

/** The globals the module defines itself (not imported ones). */
export const globalsOf = (bytes: Uint8Array): Array<GlobalDef> => {
  const first = importCounts(bytes).globals
  return readVector(bytes, SECTION.global, (at, i) => {
    const end = skipConstExpr(bytes, at + 2)
    return [{ index: first + i, valueType: bytes[at]!, mutable: bytes[at + 1] === 1, init: bytes.slice(at + 2, end) }, end + 1]
  })
}

export const exportsOf = (bytes: Uint8Array): Array<ExportDef> =>
  readVector(bytes, SECTION.export, (at) => {
    const [exportName, next] = name(bytes, at)
    const [index, after] = readU32(bytes, next + 1)
    return [{ name: exportName, kind: bytes[next]!, index }, after]
  })

export const dataSegmentsOf = (bytes: Uint8Array): Array<DataSegment> =>
  readVector(bytes, SECTION.data, (at) => {
    let flags: number
    ;[flags, at] = readU32(bytes, at)
    let memory = 0
    let offset = new Uint8Array(0)
    if (flags === 2) [memory, at] = readU32(bytes, at)
    if (flags === 0 || flags === 2) {
      const end = skipConstExpr(bytes, at)
      offset = bytes.slice(at, end)
      at = end + 1
    } else if (flags !== 1) throw new Error(`wasm: unknown data segment flags ${flags}`)
    const [length, start] = readU32(bytes, at)
    return [{ active: flags !== 1, memory, offset, bytesStart: start, bytesEnd: start + length }, start + length]
  })

/** A piece of the output: a view into the input or a few new bytes. */
type Part = Uint8Array | ReadonlyArray<number>

const sizeOf = (parts: ReadonlyArray<Part>): number => parts.reduce((n, p) => n + p.length, 0)

/**
 * One copy into one new buffer. Allocating and filling a buffer of the module's size costs a
 * page fault per 4 KiB (~170 ms for 21 MB on a loaded sandbox), so nothing is copied twice.
 */
const concat = (parts: ReadonlyArray<Part>): Uint8Array => {
  const out = new Uint8Array(sizeOf(parts))
  let at = 0
  for (const p of parts) {
    out.set(p, at)
    at += p.length
  }
  return out
}
const section = (id: number, payload: ReadonlyArray<Part>): Array<Part> => [[id, ...encodeU32(sizeOf(payload))], ...payload]

/** A vector section's payload with `extra` entries appended (the count is rewritten). */
const appendToVector = (bytes: Uint8Array, s: Section, extra: ReadonlyArray<Part>): Array<Part> => {
  const [n, at] = readU32(bytes, s.payloadStart)
  return [encodeU32(n + extra.length), bytes.subarray(at, s.end), ...extra]
}

export interface ResetOptions {
  /** Name of the added export; must not clash with an existing one. */
  readonly exportName: string
  /** Custom sections to leave out (e.g. DWARF the runtime never reads; V8 keeps all wire bytes). */
  readonly dropCustom?: (name: string) => boolean
}

/**
 * The module with every active data segment made passive and an exported function `() -> ()`
 * that resets mutable globals and memory (see the file comment). Call it once after
 * instantiation (memory is all zeros until then) and before every later use of the instance.
 */
export const addResetExport = (bytes: Uint8Array, options: ResetOptions): Uint8Array => {
  const sections = sectionsOf(bytes)
  const only = (id: number) => {
    const found = sections.filter((s) => s.id === id)
    if (found.length > 1) throw new Error(`wasm: section ${id} appears twice`)
    return found[0]
  }
  if (only(SECTION.start) !== undefined) throw new Error("wasm: a start function cannot be reset")
  const imports = importCounts(bytes)
  if (imports.memories > 0) throw new Error("wasm: imported memory is not the module's to reset")
  const exports = exportsOf(bytes)
  if (exports.some((e) => e.name === options.exportName)) throw new Error(`wasm: export ${options.exportName} exists already`)
  const segments = dataSegmentsOf(bytes)
  if (segments.some((s) => s.active && s.memory !== 0)) throw new Error("wasm: data for a second memory is not supported")
  // A passive segment the program drops (data.drop) could not be brought back.
  if (segments.some((s) => !s.active)) throw new Error("wasm: passive data segments are not supported")
  const typeSection = only(SECTION.type)
  const functionSection = only(SECTION.function)
  if (typeSection === undefined || functionSection === undefined || only(SECTION.code) === undefined || only(SECTION.export) === undefined || only(SECTION.data) === undefined) {
    throw new Error("wasm: a module without types, functions, code, exports or data is not supported")
  }
  // The added type and function go after the existing ones: their indices are the old counts.
  const typeIndex = readU32(bytes, typeSection.payloadStart)[0]
  const functionIndex = imports.functions + readU32(bytes, functionSection.payloadStart)[0]

  // Body of the reset function: no locals; globals, then memory.
  const body: Array<number> = [0]
  for (const g of globalsOf(bytes).filter((g) => g.mutable)) body.push(...g.init, 0x24, ...encodeU32(g.index)) // global.set
  // memory.fill(0, 0, size): in two halves of size × 32 KiB, because 65536 pages × 64 KiB
  // (the wasm32 maximum) does not fit in an i32.
  const halfPages = [0x3f, 0x00, 0x41, 15, 0x74] // memory.size; i32.const 15; i32.shl
  body.push(0x41, 0, 0x41, 0, ...halfPages, 0xfc, 0x0b, 0x00)
  body.push(...halfPages, 0x41, 0, ...halfPages, 0xfc, 0x0b, 0x00)
  segments.forEach((s, k) => {
    // memory.init k: (destination, source offset 0, length)
    body.push(...s.offset, 0x41, 0, 0x41, ...encodeS32(s.bytesEnd - s.bytesStart), 0xfc, 0x08, ...encodeU32(k), 0x00)
  })
  body.push(0x0b)

  // The data section again, every segment passive (flag 1, no memory, no offset).
  const data: Array<Part> = [encodeU32(segments.length), ...segments.flatMap((s) => [[1, ...encodeU32(s.bytesEnd - s.bytesStart)], bytes.subarray(s.bytesStart, s.bytesEnd)])]
  const exportName = new TextEncoder().encode(options.exportName)

  const out: Array<Part> = [bytes.subarray(0, 8)]
  let hasDataCount = false
  for (const s of sections) {
    if (s.id === SECTION.custom && options.dropCustom?.(s.name) === true) continue
    if (s.id === SECTION.dataCount) hasDataCount = true
    if (s.id === SECTION.code) {
      // memory.init needs a data count section (bulk memory), placed right before the code.
      if (!hasDataCount) out.push(...section(SECTION.dataCount, [encodeU32(segments.length)]))
      out.push(...section(SECTION.code, appendToVector(bytes, s, [[...encodeU32(body.length), ...body]])))
    } else if (s.id === SECTION.type) out.push(...section(s.id, appendToVector(bytes, s, [[0x60, 0, 0]]))) // () -> ()
    else if (s.id === SECTION.function) out.push(...section(s.id, appendToVector(bytes, s, [encodeU32(typeIndex)])))
    else if (s.id === SECTION.export) {
      out.push(...section(s.id, appendToVector(bytes, s, [[...encodeU32(exportName.length), ...exportName, EXTERNAL.function, ...encodeU32(functionIndex)]])))
    } else if (s.id === SECTION.data) out.push(...section(s.id, data))
    else out.push(bytes.subarray(s.start, s.end))
  }
  return concat(out)
}
