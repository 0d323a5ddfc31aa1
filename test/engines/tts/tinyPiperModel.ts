/**
 * Builds a tiny ONNX model that honours Piper's inference contract, plus its .onnx.json, so the
 * real PiperTts loading and inference path runs in tests without downloaded voices.
 *
 * Contract: inputs `input` int64 [1, N] phoneme ids, `input_lengths` int64 [1], `scales` float
 * [3] (noise_scale, length_scale, noise_w), optional `sid` int64 [1]; output float [1, 1, T].
 * The graph turns each id into HOP samples of a sine whose frequency depends on the id, stretches
 * the result by length_scale (Resize, nearest) so T ≈ N × HOP × length_scale, scales amplitude by
 * (1 + sid) when multi-speaker, and adds RandomNormalLike noise like a VITS export does, so the
 * determinism rewrite is exercised too.
 */
import { mkdirSync, writeFileSync } from "node:fs"
import * as path from "node:path"
import { DataType, encodeModel, encodeTensor, encodeValueInfo, type NodeSpec } from "../../../engines/tts/OnnxProto.ts"

export const HOP = 256
export const SAMPLE_RATE = 16000

/** IPA symbols espeak-ng produces for English and Estonian, plus Piper's specials. */
const SYMBOLS = [..."_^$ !'(),-.:;?", ..."abcdefghijklmnopqrstuvwxyz", ..."æçðøħŋœǀǁǂǃɐɑɒɓɔɕɖɗɘəɚɛɜɝɞɟɠɡɢɣɤɥɦɧɨɪɫɬɭɮɯɰɱɲɳɴɵɶɸɹɺɻɽɾʀʁʂʃʄʈʉʊʋʌʍʎʏʐʑʒʔʕʘʙʛʜʝʟʡʢʲˈˌːˑ˞βθχᵻⱱ", "\u0303", "\u0329", "\u032a", "\u0361"]

export const phonemeIdMap = (): Record<string, Array<number>> => Object.fromEntries(SYMBOLS.map((s, i) => [s, [i]]))

export const buildModelBytes = (speakers: number): Uint8Array => {
  const t = Float32Array.from({ length: HOP }, (_, i) => (2 * Math.PI * i) / SAMPLE_RATE)
  const nodes: Array<NodeSpec> = [
    { op: "Cast", inputs: ["input"], outputs: ["ids_f"], attrs: { to: { i: DataType.FLOAT } } },
    { op: "Unsqueeze", inputs: ["ids_f", "axis2"], outputs: ["ids_col"] },
    { op: "Mul", inputs: ["ids_col", "hz_per_id"], outputs: ["hz_part"] },
    { op: "Add", inputs: ["hz_part", "base_hz"], outputs: ["hz"] },
    { op: "Mul", inputs: ["hz", "t"], outputs: ["phase"] },
    { op: "Sin", inputs: ["phase"], outputs: ["wave"] },
    { op: "Mul", inputs: ["wave", "amp"], outputs: ["wave_amp"] }
  ]
  let voiced = "wave_amp"
  if (speakers > 1) {
    nodes.push(
      { op: "Cast", inputs: ["sid"], outputs: ["sid_f"], attrs: { to: { i: DataType.FLOAT } } },
      { op: "Add", inputs: ["sid_f", "one_f"], outputs: ["sid_gain"] },
      { op: "Mul", inputs: ["wave_amp", "sid_gain"], outputs: ["wave_sid"] }
    )
    voiced = "wave_sid"
  }
  nodes.push(
    { op: "Reshape", inputs: [voiced, "flat_shape"], outputs: ["flat"] },
    { op: "Slice", inputs: ["scales", "one_i", "two_i"], outputs: ["length_scale"] },
    { op: "Concat", inputs: ["ones2", "length_scale"], outputs: ["resize_scales"], attrs: { axis: { i: 0 } } },
    { op: "Resize", inputs: ["flat", "", "resize_scales"], outputs: ["stretched"], attrs: { mode: { s: "nearest" } } },
    { op: "RandomNormalLike", inputs: ["stretched"], outputs: ["noise"], attrs: { scale: { f: 0.01 } } },
    { op: "Add", inputs: ["stretched", "noise"], outputs: ["output"] }
  )
  const inputs = [
    encodeValueInfo("input", DataType.INT64, [1, "phonemes"]),
    encodeValueInfo("input_lengths", DataType.INT64, [1]),
    encodeValueInfo("scales", DataType.FLOAT, [3])
  ]
  if (speakers > 1) inputs.push(encodeValueInfo("sid", DataType.INT64, [1]))
  return encodeModel(
    {
      name: "tiny-piper",
      nodes,
      initializers: [
        encodeTensor("axis2", [1], BigInt64Array.of(2n)),
        encodeTensor("hz_per_id", [], Float32Array.of(7)),
        encodeTensor("base_hz", [], Float32Array.of(180)),
        encodeTensor("t", [1, 1, HOP], t),
        encodeTensor("amp", [], Float32Array.of(0.3)),
        ...(speakers > 1 ? [encodeTensor("one_f", [], Float32Array.of(1))] : []),
        encodeTensor("flat_shape", [3], BigInt64Array.of(1n, 1n, -1n)),
        encodeTensor("one_i", [1], BigInt64Array.of(1n)),
        encodeTensor("two_i", [1], BigInt64Array.of(2n)),
        encodeTensor("ones2", [2], Float32Array.of(1, 1))
      ],
      inputs,
      outputs: [encodeValueInfo("output", DataType.FLOAT, [1, 1, "samples"])]
    },
    15
  )
}

/** Writes `<name>.onnx` and `<name>.onnx.json` into `dir` (created if missing). */
export const writeTinyVoice = (dir: string, name: string, options: { speakers?: number; espeakVoice?: string; languageCode?: string } = {}) => {
  const speakers = options.speakers ?? 1
  mkdirSync(dir, { recursive: true })
  writeFileSync(path.join(dir, `${name}.onnx`), buildModelBytes(speakers))
  const config = {
    audio: { sample_rate: SAMPLE_RATE, quality: "x_low" },
    espeak: { voice: options.espeakVoice ?? "en-us" },
    language: { code: options.languageCode ?? "en_US" },
    inference: { noise_scale: 0.667, length_scale: 1, noise_w: 0.8 },
    phoneme_type: "espeak",
    phoneme_map: {},
    phoneme_id_map: phonemeIdMap(),
    num_symbols: SYMBOLS.length,
    num_speakers: speakers,
    speaker_id_map: speakers > 1 ? Object.fromEntries(Array.from({ length: speakers }, (_, i) => [`speaker${i}`, i])) : {},
    piper_version: "1.0.0"
  }
  writeFileSync(path.join(dir, `${name}.onnx.json`), JSON.stringify(config, null, 2))
}
