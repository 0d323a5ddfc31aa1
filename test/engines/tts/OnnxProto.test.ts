import t from "tap"
import { encodeAttribute, makeRandomOpsDeterministic, ProtoWriter, readFields } from "../../../engines/tts/OnnxProto.ts"
import { buildModelBytes } from "./tinyPiperModel.ts"

const opTypes = (model: Uint8Array): Array<string> => {
  const graph = readFields(model).find((f) => f.field === 7)!.value as Uint8Array
  return readFields(graph)
    .filter((f) => f.field === 1)
    .map((f) => new TextDecoder().decode(readFields(f.value as Uint8Array).find((x) => x.field === 4)!.value as Uint8Array))
}

t.test("wire format round trip", async (t) => {
  const bytes = new ProtoWriter().varint(1, 150).varint(2, -1).string(3, "õun").float(4, 1.5).packedVarints(5, [1, 300]).finish()
  t.same(Array.from(bytes.subarray(0, 3)), [0x08, 0x96, 0x01], "varint 150 as in the protobuf docs")
  const fields = readFields(bytes)
  t.same(fields.map((f) => f.field), [1, 2, 3, 4, 5])
  t.equal(fields[0]!.value, 150n)
  t.equal(BigInt.asIntN(64, fields[1]!.value as bigint), -1n, "negative int64 is 10 bytes of two's complement")
  t.equal(new TextDecoder().decode(fields[2]!.value as Uint8Array), "õun")
  t.equal(new DataView((fields[3]!.value as Uint8Array).slice().buffer).getFloat32(0, true), 1.5)
  t.same(Array.from(fields[4]!.value as Uint8Array), [1, 0xac, 0x02])
  t.same(Array.from(new ProtoWriter().raw(fields[2]!.encoded).finish()), Array.from(fields[2]!.encoded), "verbatim copy")
  t.throws(() => readFields(Uint8Array.of(0x08, 0x80)), /truncated/)
  t.ok(encodeAttribute("axis", { i: 0 }).length > 0)
})

t.test("Random* nodes are replaced; models without them are returned as they are", async (t) => {
  const model = buildModelBytes(1)
  t.ok(opTypes(model).includes("RandomNormalLike"))
  const { model: rewritten, replaced } = makeRandomOpsDeterministic(model, 7)
  t.equal(replaced, 1)
  t.notOk(opTypes(rewritten).some((op) => op.startsWith("Random")), "no random ops left")
  t.ok(opTypes(rewritten).includes("Gather"), "noise comes from the bank")
  const again = makeRandomOpsDeterministic(rewritten, 7)
  t.equal(again.replaced, 0)
  t.equal(again.model, rewritten, "unchanged bytes, same object")
  t.ok(Buffer.from(makeRandomOpsDeterministic(model, 7).model).equals(rewritten), "the rewrite itself is deterministic")
  t.notOk(Buffer.from(makeRandomOpsDeterministic(model, 8).model).equals(rewritten), "the seed picks the noise")
})
