/**
 * A tiny ONNX "speaker embedding" with the contract of published ones (fbank [1, frames, bins]
 * in, one vector out) and its speaker-embedding.json, so the real loading and inference path of
 * OnnxEmbedding.ts runs in tests without a downloaded model. The graph: the per-band mean of
 * squared (mean-normalised) fbank values, i.e. each band's variance over the window, projected
 * by a fixed pseudo-random 80 × 16 matrix. Not a speaker model; a deterministic function of the
 * spectrum's dynamics that differs between voices and is the same for the same audio.
 */
import { mkdirSync, writeFileSync } from "node:fs"
import * as path from "node:path"
import { mulberry32 } from "../../../engines/audio/Prng.ts"
import { DataType, encodeModel, encodeTensor, encodeValueInfo } from "../../../engines/tts/OnnxProto.ts"

export const TINY_DIMENSION = 16
const BINS = 80

export const tinySpeakerModelBytes = (): Uint8Array => {
  const random = mulberry32(12)
  const w = Float32Array.from({ length: BINS * TINY_DIMENSION }, () => random() - 0.5)
  return encodeModel(
    {
      name: "tiny-speaker",
      nodes: [
        { op: "Mul", inputs: ["feats", "feats"], outputs: ["squared"] },
        { op: "ReduceMean", inputs: ["squared"], outputs: ["variance"], attrs: { axes: { ints: [1] }, keepdims: { i: 0 } } },
        { op: "MatMul", inputs: ["variance", "w"], outputs: ["embs"] }
      ],
      initializers: [encodeTensor("w", [BINS, TINY_DIMENSION], w)],
      inputs: [encodeValueInfo("feats", DataType.FLOAT, [1, "frames", BINS])],
      outputs: [encodeValueInfo("embs", DataType.FLOAT, [1, TINY_DIMENSION])]
    },
    15
  )
}

/** Writes the model and its manifest to `dir`; `manifest` overrides fields. */
export const writeTinySpeakerModel = (dir: string, manifest: Record<string, unknown> = {}): string => {
  mkdirSync(dir, { recursive: true })
  writeFileSync(path.join(dir, "tiny.onnx"), tinySpeakerModelBytes())
  writeFileSync(
    path.join(dir, "speaker-embedding.json"),
    JSON.stringify({ name: "tiny-speaker-v1", model: "tiny.onnx", melBins: BINS, diarizationThreshold: 0.3, matchThreshold: 0.9, ...manifest })
  )
  return dir
}
