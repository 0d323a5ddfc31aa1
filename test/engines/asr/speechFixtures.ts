/**
 * Speech made by Flite for the speech-to-text tests: English sentences in the four 16 kHz
 * voices (slt, rms, awb, kal16; both lists live in bench/speechText.ts, which bench/stt.ts
 * shares), with Flite's own word timings as the reference, plus helpers to
 * write WAV files and run the npm ffmpeg binary. One Flite instance per test process.
 */
import { execFileSync } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import * as os from "node:os"
import * as path from "node:path"
import { floatToInt16 } from "../../../engines/audio/Pcm.ts"
import { encodeWav } from "../../../engines/audio/Wav.ts"
import { ffmpegBinary } from "../../../engines/media/MediaDecoder.ts"
import { FliteTts } from "../../../engines/tts/FliteTts.ts"
import type { WordTiming } from "../../../engines/tts/TtsEngine.ts"
import type { FliteVoice } from "../../../bench/speechText.ts"

export { type FliteVoice, SENTENCES, VOICES } from "../../../bench/speechText.ts"

export interface Utterance {
  readonly text: string
  readonly voice: FliteVoice
  /** 16 kHz mono. */
  readonly pcm: Int16Array
  readonly words: ReadonlyArray<WordTiming>
}

let flite: Promise<FliteTts> | undefined

export const fliteEngine = (): Promise<FliteTts> => (flite ??= FliteTts.load())

export const disposeFlite = async (): Promise<void> => {
  if (flite !== undefined) (await flite).dispose()
  flite = undefined
}

export const speak = async (text: string, voice: FliteVoice = "slt"): Promise<Utterance> => {
  const engine = await fliteEngine()
  const r = await engine.synthesize({ text, voice: { engine: "flite", language: "en", variant: voice, pitch: 1, rate: 1 }, speed: 1 })
  if (r.sampleRate !== 16000) throw new Error(`Flite voice ${voice} spoke at ${r.sampleRate} Hz`)
  return { text, voice, pcm: floatToInt16(r.samples), words: r.words }
}

/** A scratch directory removed at teardown. */
export const scratchDir = (t: { teardown: (fn: () => void) => void }, prefix = "speech-asr-test-"): string => {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

export const writeWav = (file: string, pcm: Int16Array, sampleRate = 16000): string => {
  writeFileSync(file, encodeWav(pcm, sampleRate))
  return file
}

/**
 * The ffmpeg that writes fixtures: npm's static build when installed (it has encoders Debian's
 * lacks, AMR among them), else the one the service decodes with.
 */
const fixtureFfmpeg = (): string => {
  try {
    return (createRequire(import.meta.url)("@ffmpeg-installer/ffmpeg") as { path: string }).path
  } catch {
    return ffmpegBinary()
  }
}

/** Runs the fixtures' ffmpeg with `args` (quiet, overwriting); throws with its stderr on failure. */
export const ffmpeg = (args: ReadonlyArray<string>): void => {
  execFileSync(fixtureFfmpeg(), ["-nostdin", "-hide_banner", "-loglevel", "error", "-y", ...args], { stdio: ["ignore", "ignore", "pipe"] })
}
