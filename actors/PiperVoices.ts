/**
 * A deployment's Piper voices as presets: each `<stem>.onnx` with its `.onnx.json` in
 * PIPER_VOICES_DIR becomes `<name>-<language>` (e.g. `en_US-lessac-medium` → `lessac-en`), where
 * name is the stem's speaker part reduced to lowercase letters. Read once at start-up; only the
 * JSON files are read here, the models load in the workers on first use.
 */
import { listPiperConfigs } from "../engines/tts/PiperConfig.ts"
import type { PresetVoice } from "../engines/tts/Voices.ts"

export const piperPresets = (directory: string, taken: ReadonlySet<string>): { voices: Array<PresetVoice>; skipped: Array<string> } => {
  const { configs, skipped } = listPiperConfigs(directory)
  const voices: Array<PresetVoice> = []
  const problems = skipped.map((s) => `${s.file}: ${s.reason}`)
  const used = new Set(taken)
  for (const c of configs) {
    // Piper's naming: <lang>_<REGION>-<speaker>-<quality>; otherwise use the whole stem.
    const parts = c.stem.split("-")
    const speaker = parts.length >= 3 ? parts.slice(1, -1).join("") : c.stem
    const name = speaker.toLowerCase().replace(/[^a-z]/g, "") || "piper"
    let voiceId = `${name}-${c.language}`
    for (let n = 2; used.has(voiceId); n++) voiceId = `${name}${"abcdefghij"[n % 10]}-${c.language}`
    used.add(voiceId)
    voices.push({
      voiceId,
      name: name.charAt(0).toUpperCase() + name.slice(1),
      category: "premade",
      description: `${c.stem}: Piper neural voice (VITS, ONNX), ${c.sampleRate} Hz, supplied by this deployment.`,
      labels: { gender: "unknown", accent: c.espeakVoice, language: c.language, engine: "piper" },
      engineVoice: { engine: "piper", language: c.language, variant: c.stem, pitch: 1, rate: 1 }
    })
  }
  return { voices, skipped: problems }
}
