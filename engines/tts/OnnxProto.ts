/**
 * Just enough of the protobuf wire format and the ONNX schema (onnx.proto3) to (a) build small
 * ONNX graphs — the tests build their Piper-contract model with it — and (b) rewrite a Piper
 * model so that its output is deterministic (`makeRandomOpsDeterministic`).
 *
 * Why (b): VITS exports draw noise with RandomNormalLike; onnxruntime seeds those kernels once
 * per session (from the clock unless the node has a `seed`) and advances the generator on every
 * run, so the same text never gives the same samples twice. Each Random* node of the main graph
 * is replaced by a lookup into a fixed bank of 2^20 pseudo-random values stored in the model:
 *   Shape(x) → ReduceProd → Range(offset, offset + count) → Mod(bank size) → Gather(bank)
 *   → Reshape(shape) → × scale + mean (normal) or × (high − low) + low (uniform) [→ Cast].
 * The bank comes from a seeded PRNG (mulberry32 + Box–Muller), so a seed fixes the voice's
 * "randomness" for good; noise repeats only after 2^20 values (~60 s of a 192-channel latent at
 * 86 frames/s). Subgraphs (If/Loop bodies) are left alone; Piper exports have none.
 */
import { mulberry32 } from "../audio/Prng.ts"

// ---------------------------------------------------------------------------------------------
// Wire format

const Wire = { Varint: 0, Fixed64: 1, Len: 2, Fixed32: 5 } as const
type Wire = (typeof Wire)[keyof typeof Wire]

export class ProtoWriter {
  private chunks: Array<Uint8Array> = []
  private size = 0

  private push(b: Uint8Array) {
    this.chunks.push(b)
    this.size += b.length
  }

  private varintBytes(value: number | bigint): Uint8Array {
    let v = BigInt.asUintN(64, BigInt(value))
    const out: Array<number> = []
    do {
      let byte = Number(v & 0x7fn)
      v >>= 7n
      if (v !== 0n) byte |= 0x80
      out.push(byte)
    } while (v !== 0n)
    return Uint8Array.from(out)
  }

  private key(field: number, wire: Wire) {
    this.push(this.varintBytes((field << 3) | wire))
  }

  varint(field: number, value: number | bigint): this {
    this.key(field, Wire.Varint)
    this.push(this.varintBytes(value))
    return this
  }

  float(field: number, value: number): this {
    this.key(field, Wire.Fixed32)
    const b = new Uint8Array(4)
    new DataView(b.buffer).setFloat32(0, value, true)
    this.push(b)
    return this
  }

  bytes(field: number, value: Uint8Array): this {
    this.key(field, Wire.Len)
    this.push(this.varintBytes(value.length))
    this.push(value)
    return this
  }

  string(field: number, value: string): this {
    return this.bytes(field, new TextEncoder().encode(value))
  }

  /** A field copied verbatim (key included), as returned by `readFields`. */
  raw(encoded: Uint8Array): this {
    this.push(encoded)
    return this
  }

  packedVarints(field: number, values: ReadonlyArray<number | bigint>): this {
    const inner = new ProtoWriter()
    for (const v of values) inner.push(inner.varintBytes(v))
    return this.bytes(field, inner.finish())
  }

  finish(): Uint8Array {
    const out = new Uint8Array(this.size)
    let o = 0
    for (const c of this.chunks) {
      out.set(c, o)
      o += c.length
    }
    return out
  }
}

export interface ProtoField {
  readonly field: number
  readonly wire: number
  /** Varint value (as bigint), or the payload of a length-delimited / fixed field. */
  readonly value: bigint | Uint8Array
  /** The whole encoded field, key included, for verbatim copies. */
  readonly encoded: Uint8Array
}

export class ProtoError extends Error {
  readonly _tag = "ProtoError"
}

/** Splits a message into its top-level fields (no schema needed). */
export const readFields = (bytes: Uint8Array): Array<ProtoField> => {
  const fields: Array<ProtoField> = []
  let o = 0
  const varint = (): bigint => {
    let result = 0n
    let shift = 0n
    for (;;) {
      if (o >= bytes.length) throw new ProtoError("truncated varint")
      const b = bytes[o++]!
      result |= BigInt(b & 0x7f) << shift
      if ((b & 0x80) === 0) return result
      shift += 7n
      if (shift > 63n) throw new ProtoError("varint too long")
    }
  }
  while (o < bytes.length) {
    const start = o
    const key = Number(varint())
    const field = key >>> 3
    const wire = key & 7
    let value: bigint | Uint8Array
    if (wire === Wire.Varint) value = varint()
    else if (wire === Wire.Fixed64) value = bytes.subarray(o, (o += 8))
    else if (wire === Wire.Fixed32) value = bytes.subarray(o, (o += 4))
    else if (wire === Wire.Len) {
      const n = Number(varint())
      value = bytes.subarray(o, (o += n))
    } else throw new ProtoError(`unsupported wire type ${wire}`)
    if (o > bytes.length) throw new ProtoError("truncated field")
    fields.push({ field, wire, value, encoded: bytes.subarray(start, o) })
  }
  return fields
}

const text = (f: ProtoField): string => new TextDecoder().decode(f.value as Uint8Array)

// ---------------------------------------------------------------------------------------------
// ONNX messages (field numbers from onnx.proto3)

export const DataType = { FLOAT: 1, INT64: 7, FLOAT16: 10, DOUBLE: 11 } as const

export type AttrValue = { readonly f: number } | { readonly i: number } | { readonly ints: ReadonlyArray<number> } | { readonly s: string }

export interface NodeSpec {
  readonly op: string
  readonly inputs: ReadonlyArray<string>
  readonly outputs: ReadonlyArray<string>
  readonly name?: string
  readonly attrs?: Readonly<Record<string, AttrValue>>
}

export const encodeAttribute = (name: string, a: AttrValue): Uint8Array => {
  const w = new ProtoWriter().string(1, name)
  if ("f" in a) w.float(2, a.f).varint(20, 1)
  else if ("i" in a) w.varint(3, a.i).varint(20, 2)
  else if ("s" in a) w.string(4, a.s).varint(20, 3)
  else w.packedVarints(8, a.ints).varint(20, 7)
  return w.finish()
}

export const encodeNode = (n: NodeSpec): Uint8Array => {
  const w = new ProtoWriter()
  for (const i of n.inputs) w.string(1, i)
  for (const o of n.outputs) w.string(2, o)
  if (n.name !== undefined) w.string(3, n.name)
  w.string(4, n.op)
  for (const [k, v] of Object.entries(n.attrs ?? {})) w.bytes(5, encodeAttribute(k, v))
  return w.finish()
}

/** Float32 or Int64 tensor with raw little-endian data. */
export const encodeTensor = (name: string, dims: ReadonlyArray<number>, data: Float32Array | BigInt64Array): Uint8Array => {
  const raw = new Uint8Array(data.byteLength)
  const view = new DataView(raw.buffer)
  if (data instanceof Float32Array) data.forEach((v, i) => view.setFloat32(i * 4, v, true))
  else data.forEach((v, i) => view.setBigInt64(i * 8, v, true))
  return new ProtoWriter()
    .packedVarints(1, dims)
    .varint(2, data instanceof Float32Array ? DataType.FLOAT : DataType.INT64)
    .string(8, name)
    .bytes(9, raw)
    .finish()
}

/** ValueInfoProto of a tensor; a string dim is symbolic (dim_param). */
export const encodeValueInfo = (name: string, elemType: number, dims: ReadonlyArray<number | string>): Uint8Array => {
  const shape = new ProtoWriter()
  for (const d of dims) shape.bytes(1, typeof d === "number" ? new ProtoWriter().varint(1, d).finish() : new ProtoWriter().string(2, d).finish())
  const tensorType = new ProtoWriter().varint(1, elemType).bytes(2, shape.finish()).finish()
  return new ProtoWriter().string(1, name).bytes(2, new ProtoWriter().bytes(1, tensorType).finish()).finish()
}

export interface GraphSpec {
  readonly name: string
  readonly nodes: ReadonlyArray<NodeSpec>
  readonly initializers: ReadonlyArray<Uint8Array>
  readonly inputs: ReadonlyArray<Uint8Array>
  readonly outputs: ReadonlyArray<Uint8Array>
}

export const encodeModel = (graph: GraphSpec, opset: number, producer = "speech-service"): Uint8Array => {
  const g = new ProtoWriter()
  for (const n of graph.nodes) g.bytes(1, encodeNode(n))
  g.string(2, graph.name)
  for (const t of graph.initializers) g.bytes(5, t)
  for (const i of graph.inputs) g.bytes(11, i)
  for (const o of graph.outputs) g.bytes(12, o)
  return new ProtoWriter()
    .varint(1, 8) // IR version 8 (onnxruntime 1.30 reads 3..11)
    .string(2, producer)
    .bytes(7, g.finish())
    .bytes(8, new ProtoWriter().string(1, "").varint(2, opset).finish())
    .finish()
}

// ---------------------------------------------------------------------------------------------
// Determinism rewrite

export const NOISE_BANK_SIZE = 1 << 20

const RANDOM_OPS = new Set(["RandomNormalLike", "RandomUniformLike", "RandomNormal", "RandomUniform"])

interface ParsedNode {
  readonly op: string
  readonly inputs: Array<string>
  readonly outputs: Array<string>
  readonly attrs: Map<string, { f?: number; i?: number; ints?: Array<number> }>
}

const parseNode = (bytes: Uint8Array): ParsedNode => {
  const node: ParsedNode = { op: "", inputs: [], outputs: [], attrs: new Map() }
  let op = ""
  for (const f of readFields(bytes)) {
    if (f.field === 1) node.inputs.push(text(f))
    else if (f.field === 2) node.outputs.push(text(f))
    else if (f.field === 4) op = text(f)
    else if (f.field === 5) {
      let name = ""
      const a: { f?: number; i?: number; ints?: Array<number> } = {}
      for (const af of readFields(f.value as Uint8Array)) {
        if (af.field === 1) name = text(af)
        // The field's own 4 bytes: `.slice().buffer` is the whole file when the model came from
        // readFileSync (Buffer#slice is a view), so it read the file's first bytes instead.
        else if (af.field === 2) {
          const v = af.value as Uint8Array
          a.f = new DataView(v.buffer, v.byteOffset, 4).getFloat32(0, true)
        }
        else if (af.field === 3) a.i = Number(BigInt.asIntN(64, af.value as bigint))
        else if (af.field === 8) {
          a.ints ??= []
          if (af.wire === 0) a.ints.push(Number(BigInt.asIntN(64, af.value as bigint)))
          else for (const v of readVarints(af.value as Uint8Array)) a.ints.push(Number(BigInt.asIntN(64, v)))
        }
      }
      node.attrs.set(name, a)
    }
  }
  return { ...node, op }
}

const readVarints = (packed: Uint8Array): Array<bigint> => {
  // A packed run is a sequence of varints; reuse the field reader by faking keys is awkward, so decode directly.
  const out: Array<bigint> = []
  let o = 0
  while (o < packed.length) {
    let v = 0n
    let shift = 0n
    for (;;) {
      const b = packed[o++]!
      v |= BigInt(b & 0x7f) << shift
      if ((b & 0x80) === 0) break
      shift += 7n
    }
    out.push(v)
  }
  return out
}


const noiseBank = (seed: number, kind: "normal" | "uniform"): Float32Array => {
  const next = mulberry32(seed)
  const bank = new Float32Array(NOISE_BANK_SIZE)
  for (let i = 0; i < bank.length; i += 2) {
    if (kind === "uniform") {
      bank[i] = next()
      bank[i + 1] = next()
      continue
    }
    const u1 = Math.max(next(), 1e-12)
    const u2 = next()
    const r = Math.sqrt(-2 * Math.log(u1))
    bank[i] = r * Math.cos(2 * Math.PI * u2)
    bank[i + 1] = r * Math.sin(2 * Math.PI * u2)
  }
  return bank
}

/**
 * Replaces every Random* node of the main graph by a deterministic noise-bank lookup.
 * Returns the rewritten model and how many nodes were replaced (0: bytes returned unchanged).
 */
export const makeRandomOpsDeterministic = (model: Uint8Array, seed: number): { model: Uint8Array; replaced: number } => {
  const top = readFields(model)
  const graphField = top.find((f) => f.field === 7)
  if (graphField === undefined) throw new ProtoError("ONNX model has no graph")
  const graphFields = readFields(graphField.value as Uint8Array)
  const g = new ProtoWriter()
  const extraInitializers: Array<Uint8Array> = []
  const banks = new Set<"normal" | "uniform">()
  let replaced = 0
  for (const f of graphFields) {
    if (f.field !== 1) {
      g.raw(f.encoded)
      continue
    }
    const node = parseNode(f.value as Uint8Array)
    if (!RANDOM_OPS.has(node.op)) {
      g.raw(f.encoded)
      continue
    }
    const k = replaced++
    const p = `__det${k}_`
    const kind = node.op.startsWith("RandomNormal") ? "normal" : "uniform"
    banks.add(kind)
    const nodes: Array<NodeSpec> = []
    let shapeName: string
    if (node.op.endsWith("Like")) {
      shapeName = `${p}shape`
      nodes.push({ op: "Shape", inputs: [node.inputs[0]!], outputs: [shapeName] })
    } else {
      const dims = node.attrs.get("shape")?.ints ?? []
      shapeName = `${p}shape_const`
      extraInitializers.push(encodeTensor(shapeName, [dims.length], BigInt64Array.from(dims.map(BigInt))))
    }
    // Distinct, well-spread starting offsets per node (golden-ratio stride).
    const offset = Math.floor(((k + 1) * 0.6180339887 * NOISE_BANK_SIZE) % NOISE_BANK_SIZE)
    extraInitializers.push(encodeTensor(`${p}offset`, [], BigInt64Array.of(BigInt(offset))))
    const a = node.attrs
    const [scale, shift] =
      kind === "normal"
        ? [a.get("scale")?.f ?? 1, a.get("mean")?.f ?? 0]
        : [(a.get("high")?.f ?? 1) - (a.get("low")?.f ?? 0), a.get("low")?.f ?? 0]
    extraInitializers.push(encodeTensor(`${p}scale`, [], Float32Array.of(scale)))
    extraInitializers.push(encodeTensor(`${p}shift`, [], Float32Array.of(shift)))
    const dtype = a.get("dtype")?.i ?? DataType.FLOAT
    const out = node.outputs[0]!
    const last = dtype === DataType.FLOAT ? out : `${p}float`
    nodes.push(
      { op: "ReduceProd", inputs: [shapeName], outputs: [`${p}count`], attrs: { keepdims: { i: 0 } } },
      { op: "Add", inputs: [`${p}offset`, `${p}count`], outputs: [`${p}limit`] },
      { op: "Range", inputs: [`${p}offset`, `${p}limit`, "__det_one"], outputs: [`${p}index`] },
      { op: "Mod", inputs: [`${p}index`, "__det_bank_size"], outputs: [`${p}wrapped`] },
      { op: "Gather", inputs: [`__det_bank_${kind}`, `${p}wrapped`], outputs: [`${p}values`], attrs: { axis: { i: 0 } } },
      { op: "Reshape", inputs: [`${p}values`, shapeName], outputs: [`${p}shaped`] },
      { op: "Mul", inputs: [`${p}shaped`, `${p}scale`], outputs: [`${p}scaled`] },
      { op: "Add", inputs: [`${p}scaled`, `${p}shift`], outputs: [last] }
    )
    if (last !== out) nodes.push({ op: "Cast", inputs: [last], outputs: [out], attrs: { to: { i: dtype } } })
    for (const n of nodes) g.bytes(1, encodeNode({ ...n, name: `${p}${n.op}_${n.outputs[0]}` }))
  }
  if (replaced === 0) return { model, replaced }
  extraInitializers.push(encodeTensor("__det_one", [], BigInt64Array.of(1n)))
  extraInitializers.push(encodeTensor("__det_bank_size", [], BigInt64Array.of(BigInt(NOISE_BANK_SIZE))))
  for (const kind of banks) extraInitializers.push(encodeTensor(`__det_bank_${kind}`, [NOISE_BANK_SIZE], noiseBank(seed + (kind === "normal" ? 0 : 1), kind)))
  for (const t of extraInitializers) g.bytes(5, t)
  const m = new ProtoWriter()
  for (const f of top) {
    if (f.field === 7) m.bytes(7, g.finish())
    else m.raw(f.encoded)
  }
  return { model: m.finish(), replaced }
}
