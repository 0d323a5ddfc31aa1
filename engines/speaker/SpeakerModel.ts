/**
 * Which speaker embedding the service runs, and the two thresholds that belong to it: distances
 * and similarities mean different things for different embeddings, so they travel together.
 *
 * Default: the classical MFCC-statistics embedding (MfccEmbedding.ts), built in. Optional: a
 * neural model from a directory (`SPEAKER_EMBEDDING_DIR`), which nothing here downloads; the
 * operator puts it there. The directory holds the ONNX file and `speaker-embedding.json`:
 *
 *   {
 *     "name": "wespeaker-resnet34-v1",      // stored with every voiceprint; only equal names compare
 *     "model": "model.onnx",                // relative to the directory
 *     "melBins": 80,                        // Kaldi fbank bins the model was trained on (default 80)
 *     "diarizationThreshold": 0.55,         // cosine distance at which clusters stop merging
 *     "matchThreshold": 0.5                 // cosine similarity that names a saved speaker
 *   }
 *
 * The model takes fbank features [1, frames, melBins] (mean-normalised over the window, as
 * WeSpeaker and 3D-Speaker exports expect) on its first input and gives one embedding on its
 * first output (any shape; flattened). OnnxEmbedding.ts runs it on the worker threads.
 */
import { existsSync, readFileSync, statSync } from "node:fs"
import * as path from "node:path"
import { DIARIZE_DEFAULTS } from "./Diarizer.ts"
import { MfccEmbedding } from "./MfccEmbedding.ts"

export const MANIFEST_FILE = "speaker-embedding.json"

export interface SpeakerModelProfile {
  /** Stored with voiceprints: `SpeakerEmbedOutput.name` of the worker that made them. */
  readonly name: string
  /** Directory of a neural model; undefined for the built-in classical embedding. */
  readonly directory: string | undefined
  /** Largest average cosine distance at which two diarization clusters still merge. */
  readonly diarizationThreshold: number
  /** Cosine similarity of voiceprints at or above which a saved speaker is named. */
  readonly matchThreshold: number
}

/**
 * The classical embedding. Match threshold measured on real speech from pocketsphinx-testdata,
 * 3-7 s per print: the same speaker in different utterances scored 0.868 (LibriVox reader, two
 * halves) and 0.941 (cards speaker); different speakers 0.61-0.85. The margin is thin: a wrong
 * name is likelier than with a neural embedding. The diarization threshold is unused: with the
 * classical embedding the labeller clusters by BIC (BicClustering.ts), not by this distance.
 */
export const CLASSICAL_SPEAKER_MODEL: SpeakerModelProfile = {
  name: MfccEmbedding.name,
  directory: undefined,
  diarizationThreshold: DIARIZE_DEFAULTS.threshold,
  matchThreshold: 0.86
}

export interface OnnxSpeakerManifest {
  readonly name: string
  /** Absolute path of the .onnx file. */
  readonly modelPath: string
  readonly melBins: number
  readonly diarizationThreshold: number
  readonly matchThreshold: number
}

export class SpeakerModelError extends Error {
  override readonly name = "SpeakerModelError"
}

const numberIn = (value: unknown, field: string, low: number, high: number): number => {
  if (typeof value !== "number" || !Number.isFinite(value) || value < low || value > high) {
    throw new SpeakerModelError(`${MANIFEST_FILE}: "${field}" must be a number in [${low}, ${high}], got ${JSON.stringify(value)}`)
  }
  return value
}

/** Reads and checks a model directory's manifest; every problem is a `SpeakerModelError` naming it. */
export const readSpeakerManifest = (directory: string): OnnxSpeakerManifest => {
  const file = path.join(directory, MANIFEST_FILE)
  if (!existsSync(file)) throw new SpeakerModelError(`SPEAKER_EMBEDDING_DIR ${directory} has no ${MANIFEST_FILE}`)
  let raw: unknown
  try {
    raw = JSON.parse(readFileSync(file, "utf8"))
  } catch (e) {
    throw new SpeakerModelError(`${file} is not JSON: ${e instanceof Error ? e.message : String(e)}`)
  }
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw new SpeakerModelError(`${file} must hold a JSON object`)
  const m = raw as Record<string, unknown>
  if (typeof m.name !== "string" || !/^[A-Za-z0-9._/-]{1,100}$/.test(m.name)) {
    throw new SpeakerModelError(`${MANIFEST_FILE}: "name" must be 1-100 characters of A-Z a-z 0-9 . _ / -`)
  }
  if (m.name === CLASSICAL_SPEAKER_MODEL.name) throw new SpeakerModelError(`${MANIFEST_FILE}: "name" must differ from the built-in embedding's`)
  if (typeof m.model !== "string" || m.model === "") throw new SpeakerModelError(`${MANIFEST_FILE}: "model" must name the .onnx file`)
  const modelPath = path.resolve(directory, m.model)
  if (!existsSync(modelPath) || !statSync(modelPath).isFile()) throw new SpeakerModelError(`${MANIFEST_FILE}: model file ${modelPath} does not exist`)
  return {
    name: m.name,
    modelPath,
    melBins: m.melBins === undefined ? 80 : Math.round(numberIn(m.melBins, "melBins", 8, 256)),
    diarizationThreshold: numberIn(m.diarizationThreshold, "diarizationThreshold", 0.01, 2),
    matchThreshold: numberIn(m.matchThreshold, "matchThreshold", -1, 1)
  }
}

/** The profile for `SPEAKER_EMBEDDING_DIR` (undefined: the classical embedding). Throws on a bad directory. */
export const speakerModelProfile = (directory: string | undefined): SpeakerModelProfile => {
  if (directory === undefined) return CLASSICAL_SPEAKER_MODEL
  const m = readSpeakerManifest(directory)
  return { name: m.name, directory: path.resolve(directory), diarizationThreshold: m.diarizationThreshold, matchThreshold: m.matchThreshold }
}
