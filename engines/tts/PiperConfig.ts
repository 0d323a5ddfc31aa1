/**
 * Reading Piper voice files (`<stem>.onnx` + `<stem>.onnx.json`) without loading any engine, so
 * the main thread can list a deployment's voices and the worker can load them.
 */
import { readdirSync, readFileSync } from "node:fs"
import * as path from "node:path"

/** Piper's control symbols: pad, beginning and end of sentence. */
export const CONTROL = new Set(["_", "^", "$"])

export interface PiperVoiceConfig {
  readonly stem: string
  readonly modelPath: string
  /** Hz. */
  readonly sampleRate: number
  readonly espeakVoice: string
  /** ISO 639-1. */
  readonly language: string
  readonly noiseScale: number
  readonly lengthScale: number
  readonly noiseW: number
  readonly idMap: ReadonlyMap<string, ReadonlyArray<number>>
  readonly numSpeakers: number
  readonly speakerIds: Readonly<Record<string, number>>
}


export const readConfig = (directory: string, file: string): PiperVoiceConfig => {
  const modelPath = path.join(directory, file)
  const raw = JSON.parse(readFileSync(`${modelPath}.json`, "utf8")) as {
    audio?: { sample_rate?: number }
    espeak?: { voice?: string }
    language?: { code?: string }
    inference?: { noise_scale?: number; length_scale?: number; noise_w?: number }
    phoneme_type?: string
    phoneme_id_map?: Record<string, Array<number>>
    num_speakers?: number
    speaker_id_map?: Record<string, number>
  }
  const sampleRate = raw.audio?.sample_rate
  const espeakVoice = raw.espeak?.voice
  if (!Number.isInteger(sampleRate) || sampleRate! <= 0) throw new Error("config has no audio.sample_rate")
  if (typeof espeakVoice !== "string") throw new Error("config has no espeak.voice")
  if ((raw.phoneme_type ?? "espeak") !== "espeak") throw new Error(`phoneme_type ${raw.phoneme_type} is not supported (espeak only)`)
  const idMap = new Map(Object.entries(raw.phoneme_id_map ?? {}))
  for (const s of CONTROL) if (!idMap.has(s)) throw new Error(`phoneme_id_map lacks "${s}"`)
  const language = (raw.language?.code ?? espeakVoice).toLowerCase().split(/[-_]/)[0]!
  return {
    stem: file.slice(0, -".onnx".length),
    modelPath,
    sampleRate: sampleRate!,
    espeakVoice: espeakVoice.toLowerCase(),
    language,
    noiseScale: raw.inference?.noise_scale ?? 0.667,
    lengthScale: raw.inference?.length_scale ?? 1,
    noiseW: raw.inference?.noise_w ?? 0.8,
    idMap,
    numSpeakers: raw.num_speakers ?? 1,
    speakerIds: raw.speaker_id_map ?? {}
  }
}


/** Every readable voice config in a directory, sorted by stem; unreadable ones are reported. */
export const listPiperConfigs = (directory: string): { configs: Array<PiperVoiceConfig>; skipped: Array<{ file: string; reason: string }> } => {
  const configs: Array<PiperVoiceConfig> = []
  const skipped: Array<{ file: string; reason: string }> = []
  for (const file of readdirSync(directory).filter((f) => f.endsWith(".onnx")).sort()) {
    try {
      configs.push(readConfig(directory, file))
    } catch (e) {
      skipped.push({ file, reason: e instanceof Error ? e.message : String(e) })
    }
  }
  return { configs, skipped }
}
