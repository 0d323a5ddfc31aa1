/**
 * Worker-side task kinds of speaker analysis.
 *
 * `speaker.embed`: one speaker embedding per window of a 16 kHz mono buffer (Int16 or Float32,
 * moved to the worker by the caller: `transfer: [pcm.buffer]`). Windows are ms in recording
 * time; `offsetMs` says where `pcm[0]` sits in the recording, so a long recording can be cut
 * into chunks (each chunk must contain its windows: what lies outside is clamped away). The
 * vectors come back moved, not copied, one buffer each. Overlapping windows share their analysis
 * frames, so many windows cost little more than the audio they cover (≈ 7 ms per second).
 * Clustering (Diarizer.ts) is cheap and pure and runs wherever the caller likes.
 */
import { int16ToFloat } from "../audio/Pcm.ts"
import { defineTasks, perThread, TaskError, transfer } from "../tasks.ts"
import { MfccEmbedding } from "./MfccEmbedding.ts"
import { fromSpeakerEmbedding, loadOnnxEmbedding, type WindowEmbedder } from "./OnnxEmbedding.ts"
import { SpeakerEmbeddingError, type EmbeddingWindow } from "./SpeakerEmbedding.ts"
import { SpeakerModelError } from "./SpeakerModel.ts"
import { bicCluster } from "./BicClustering.ts"
import { type SpeechUnit, speechUnits, STATS_WIDTH, UNIT_DIMENSION } from "./SpeechUnits.ts"

/** Bound on windows per task: 20 000 windows at 0.75 s hop is over 4 h of speech. */
export const MAX_WINDOWS_PER_TASK = 20_000

export interface SpeakerEmbedInput {
  /** Mono at 16 kHz: s16le samples, or floats in [-1, 1]. */
  readonly pcm: Int16Array | Float32Array
  /** ms in recording time, end exclusive. */
  readonly windows: ReadonlyArray<EmbeddingWindow>
  /** Recording time of `pcm[0]`, ms; default 0. */
  readonly offsetMs?: number
  /** A neural model's directory (SpeakerModel.ts); absent: the classical embedding. */
  readonly modelDirectory?: string
}

export interface SpeakerEmbedOutput {
  /** One per window, in input order; all zeros where a window holds no speech. */
  readonly embeddings: Array<Float32Array>
  readonly dimension: number
  /** Implementation and calibration that made the vectors; compare only vectors of one name. */
  readonly name: string
  /** Wall time of the analysis in the worker, ms. */
  readonly engineMs: number
}

export interface SpeakerUnitsInput {
  /** Mono at 16 kHz, as for `speaker.embed`. */
  readonly pcm: Int16Array | Float32Array
  /** Speech segments inside this chunk, ms in recording time. */
  readonly segments: ReadonlyArray<SpeechUnit>
  /** Recording time of `pcm[0]`, ms; default 0. */
  readonly offsetMs?: number
}

export interface SpeakerUnitsOutput {
  /** Units between pauses, ms in recording time, in time order (SpeechUnits.ts). */
  readonly units: Array<SpeechUnit>
  /** units × STATS_WIDTH Gaussian statistics of their cepstra. */
  readonly stats: Float64Array
  readonly dimension: number
}

export interface SpeakerClusterInput {
  /** All units' statistics of one recording, in time order. */
  readonly stats: Float64Array
  readonly units: number
  readonly numSpeakers?: number
}

const invalid = (message: string) => new TaskError("InvalidInput", message, "SpeakerEmbeddingError")

const classical = fromSpeakerEmbedding(MfccEmbedding)
/** Loaded once per thread and directory (a service has one; tests may use several). */
const neural = new Map<string, () => Promise<WindowEmbedder>>()
const embedderFor = (directory: string | undefined): Promise<WindowEmbedder> => {
  if (directory === undefined) return Promise.resolve(classical)
  let load = neural.get(directory)
  if (load === undefined) neural.set(directory, (load = perThread(() => loadOnnxEmbedding(directory))))
  return load()
}

export const speakerTasks = defineTasks({
  "speaker.embed": async (input: SpeakerEmbedInput) => {
    const { pcm, windows } = input
    if (!(pcm instanceof Int16Array || pcm instanceof Float32Array)) throw invalid("pcm must be an Int16Array or Float32Array at 16 kHz")
    if (!Array.isArray(windows)) throw invalid("windows must be an array of { startMs, endMs }")
    if (windows.length > MAX_WINDOWS_PER_TASK) throw invalid(`at most ${MAX_WINDOWS_PER_TASK} windows per task, got ${windows.length}`)
    const offsetMs = input.offsetMs ?? 0
    if (!(Number.isFinite(offsetMs) && offsetMs >= 0)) throw invalid(`bad offsetMs ${offsetMs}`)
    if (input.modelDirectory !== undefined && typeof input.modelDirectory !== "string") throw invalid("modelDirectory must be a string")
    const started = performance.now()
    const samples = pcm instanceof Int16Array ? int16ToFloat(pcm) : pcm
    let embedder: WindowEmbedder
    let embeddings: Array<Float32Array>
    try {
      // Windows that begin before this chunk are clamped to its start, like those past its end.
      const local = windows.map((w) => {
        if (typeof w !== "object" || w === null) throw invalid("each window must be { startMs, endMs }")
        return { startMs: Math.max(0, w.startMs - offsetMs), endMs: Math.max(0, w.endMs - offsetMs) }
      })
      embedder = await embedderFor(input.modelDirectory)
      embeddings = await embedder.embedWindows(samples, local)
    } catch (e) {
      if (e instanceof SpeakerEmbeddingError) throw new TaskError(e.reason, e.message, e.name)
      if (e instanceof SpeakerModelError) throw new TaskError("EngineUnavailable", e.message, e.name)
      throw e
    }
    const output: SpeakerEmbedOutput = { embeddings, dimension: embedder.dimension, name: embedder.name, engineMs: performance.now() - started }
    return transfer(output, embeddings.map((v) => v.buffer as ArrayBuffer))
  }
,
  "speaker.units": (input: SpeakerUnitsInput) => {
    const { pcm, segments } = input
    if (!(pcm instanceof Int16Array || pcm instanceof Float32Array)) throw invalid("pcm must be an Int16Array or Float32Array at 16 kHz")
    if (!Array.isArray(segments)) throw invalid("segments must be an array of { startMs, endMs }")
    const offsetMs = input.offsetMs ?? 0
    if (!(Number.isFinite(offsetMs) && offsetMs >= 0)) throw invalid(`bad offsetMs ${offsetMs}`)
    const local = segments.map((s) => {
      if (typeof s !== "object" || s === null || !Number.isFinite(s.startMs) || !Number.isFinite(s.endMs)) throw invalid("each segment must be { startMs, endMs }")
      return { startMs: Math.max(0, s.startMs - offsetMs), endMs: Math.max(0, s.endMs - offsetMs) }
    })
    const found = speechUnits(pcm instanceof Int16Array ? int16ToFloat(pcm) : pcm, local)
    const output: SpeakerUnitsOutput = {
      units: found.units.map((u) => ({ startMs: u.startMs + offsetMs, endMs: u.endMs + offsetMs })),
      stats: found.stats,
      dimension: UNIT_DIMENSION
    }
    return transfer(output, [found.stats.buffer as ArrayBuffer])
  },
  "speaker.cluster": (input: SpeakerClusterInput) => {
    if (!(input.stats instanceof Float64Array)) throw invalid("stats must be a Float64Array")
    if (!(Number.isInteger(input.units) && input.units >= 0 && input.stats.length === input.units * STATS_WIDTH)) throw invalid("stats must hold units × STATS_WIDTH values")
    if (input.numSpeakers !== undefined && !(Number.isInteger(input.numSpeakers) && input.numSpeakers >= 1)) throw invalid("numSpeakers must be a positive integer")
    const labels = bicCluster(input.stats, input.units, UNIT_DIMENSION, input.numSpeakers !== undefined ? { numSpeakers: input.numSpeakers } : {})
    return transfer({ labels }, [labels.buffer as ArrayBuffer])
  }
})
