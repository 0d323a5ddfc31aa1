/**
 * A neural speaker embedding from a model directory (SpeakerModel.ts describes the directory),
 * run with onnxruntime on a worker thread: Kaldi fbank of the buffer once (Fbank.ts), then per
 * window its frames, mean-normalised over the window, through the model; the output is
 * flattened and L2-normalised. Windows shorter than `MIN_FRAMES` (or silent) give the zero
 * vector, as the classical embedding does, so the diarizer leaves them out of clustering.
 *
 * Async where the classical embedding is not (onnxruntime runs off the JS thread), so it is a
 * `WindowEmbedder`, the form the worker task uses for both.
 */
import * as ort from "onnxruntime-node"
import { fbank, FBANK_HOP_SAMPLES } from "./Fbank.ts"
import { EMBEDDING_SAMPLE_RATE, type EmbeddingWindow, l2Normalise, type SpeakerEmbedding } from "./SpeakerEmbedding.ts"
import { readSpeakerManifest, SpeakerModelError } from "./SpeakerModel.ts"

/** Fewer frames than this (300 ms) and a window gets the zero vector. */
const MIN_FRAMES = 30

/** What the `speaker.embed` task runs: the classical embedding wrapped, or a neural model. */
export interface WindowEmbedder {
  readonly name: string
  readonly dimension: number
  readonly embedWindows: (pcm16k: Float32Array, windows: ReadonlyArray<EmbeddingWindow>) => Promise<Array<Float32Array>>
}

export const fromSpeakerEmbedding = (e: SpeakerEmbedding): WindowEmbedder => ({
  name: e.name,
  dimension: e.dimension,
  embedWindows: async (pcm, windows) => e.embedWindows(pcm, windows)
})

const isSilent = (v: Float32Array) => v.every((x) => x === 0)

export const loadOnnxEmbedding = async (directory: string): Promise<WindowEmbedder> => {
  const manifest = readSpeakerManifest(directory)
  let session: ort.InferenceSession
  try {
    session = await ort.InferenceSession.create(manifest.modelPath, { intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: "sequential" })
  } catch (e) {
    throw new SpeakerModelError(`speaker embedding model ${manifest.modelPath} could not be loaded: ${e instanceof Error ? e.message : String(e)}`)
  }
  const input = session.inputNames[0]
  const output = session.outputNames[0]
  if (input === undefined || output === undefined) throw new SpeakerModelError(`${manifest.modelPath} has no input or no output`)
  const bins = manifest.melBins
  const run = async (features: Float32Array, frames: number): Promise<Float32Array> => {
    const result = await session.run({ [input]: new ort.Tensor("float32", features, [1, frames, bins]) })
    const data = result[output]!.data
    if (!(data instanceof Float32Array)) throw new SpeakerModelError(`${manifest.modelPath}: output "${output}" is not float32`)
    return Float32Array.from(data)
  }
  // The dimension is what the model gives: one probe run on a second of silence-level noise.
  const probeFrames = 100
  const dimension = (await run(new Float32Array(probeFrames * bins).map((_, i) => Math.sin(i) * 1e-3), probeFrames)).length
  if (dimension === 0) throw new SpeakerModelError(`${manifest.modelPath} gives an empty embedding`)
  return {
    name: manifest.name,
    dimension,
    embedWindows: async (pcm, windows) => {
      const { frames, features } = fbank(pcm, bins)
      const out: Array<Float32Array> = []
      for (const w of windows) {
        const from = Math.max(0, Math.ceil((w.startMs * EMBEDDING_SAMPLE_RATE) / 1000 / FBANK_HOP_SAMPLES))
        const to = Math.min(frames, Math.floor((w.endMs * EMBEDDING_SAMPLE_RATE) / 1000 / FBANK_HOP_SAMPLES))
        const n = to - from
        if (n < MIN_FRAMES) {
          out.push(new Float32Array(dimension))
          continue
        }
        const slice = features.slice(from * bins, to * bins)
        for (let b = 0; b < bins; b++) {
          let mean = 0
          for (let i = 0; i < n; i++) mean += slice[i * bins + b]!
          mean /= n
          for (let i = 0; i < n; i++) slice[i * bins + b]! -= mean
        }
        const v = await run(slice, n)
        if (v.length !== dimension) throw new SpeakerModelError(`${manifest.modelPath} gave ${v.length} values, then ${dimension}`)
        out.push(isSilent(v) ? v : l2Normalise(v))
      }
      return out
    }
  }
}
