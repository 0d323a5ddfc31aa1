/**
 * Synthetic speakers for the speaker tests: Flite and espeak-ng voices rendered at 16 kHz, plus
 * a dialogue builder with ground-truth turns. Engines load once per test process.
 */
import { concatFloat32, silence } from "../../../engines/audio/Pcm.ts"
import { resample } from "../../../engines/audio/Resampler.ts"
import { EspeakTts } from "../../../engines/tts/EspeakTts.ts"
import { FliteTts } from "../../../engines/tts/FliteTts.ts"
import type { EngineVoice, WordTiming } from "../../../engines/tts/TtsEngine.ts"

/** "flite:slt", "espeak:en+m3", "espeak:et+f2". */
export type VoiceName = `${"flite" | "espeak"}:${string}`

let flite: Promise<FliteTts> | undefined
let espeak: Promise<EspeakTts> | undefined

export const disposeSpeakers = async () => {
  if (flite !== undefined) (await flite).dispose()
}

const engineVoice = (name: VoiceName): EngineVoice => {
  const [engine, variant] = name.split(":") as ["flite" | "espeak", string]
  return { engine, language: variant.split(/[+-]/)[0]!, variant, pitch: 1, rate: 1 }
}

/** Float32 mono at 16 kHz, and the engine's word timings (ms). */
export const speakWithWords = async (voice: VoiceName, text: string): Promise<{ samples: Float32Array; words: ReadonlyArray<WordTiming> }> => {
  const v = engineVoice(voice)
  const engine = v.engine === "flite" ? await (flite ??= FliteTts.load()) : await (espeak ??= EspeakTts.load())
  const r = await engine.synthesize({ text, voice: v, speed: 1 })
  return { samples: r.sampleRate === 16000 ? r.samples : resample(r.samples, r.sampleRate, 16000), words: r.words }
}

/** Float32 mono at 16 kHz. */
export const speak = async (voice: VoiceName, text: string): Promise<Float32Array> => (await speakWithWords(voice, text)).samples

export interface Turn {
  readonly startMs: number
  readonly endMs: number
  readonly speaker: string
}

/**
 * Concatenates utterances with silences between them (gaps used in turn, cyclically), after
 * 300 ms of silence. Truth turns span each utterance's audio, engine padding included; words
 * carry their speaker and recording times.
 */
export const dialogue = async (
  lines: ReadonlyArray<{ readonly voice: VoiceName; readonly text: string }>,
  gapsMs: ReadonlyArray<number>
): Promise<{ pcm: Float32Array; turns: Array<Turn>; words: Array<Turn> }> => {
  const parts: Array<Float32Array> = [silence(300, 16000)]
  const turns: Array<Turn> = []
  const words: Array<Turn> = []
  let at = parts[0]!.length // samples
  for (const [k, line] of lines.entries()) {
    const spoken = await speakWithWords(line.voice, line.text)
    const offsetMs = (at * 1000) / 16000
    turns.push({ startMs: offsetMs, endMs: ((at + spoken.samples.length) * 1000) / 16000, speaker: line.voice })
    for (const w of spoken.words) words.push({ startMs: offsetMs + w.startMs, endMs: offsetMs + w.endMs, speaker: line.voice })
    const gap = silence(gapsMs[k % gapsMs.length]!, 16000)
    parts.push(spoken.samples, gap)
    at += spoken.samples.length + gap.length
  }
  return { pcm: concatFloat32(parts), turns, words }
}
