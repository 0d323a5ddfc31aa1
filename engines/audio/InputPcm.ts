/**
 * Streamed input audio of a realtime session → 16 kHz mono s16, what the recognizers take,
 * without ffmpeg: the formats ElevenLabs' realtime speech-to-text accepts (`audio_format`), raw
 * s16le PCM at six rates and G.711 µ-law at 8 kHz (telephony).
 *
 * One `InputPcm` per session, fed chunk by chunk in arrival order: it keeps what crosses a chunk
 * boundary, so the output of a stream equals the conversion of the whole stream at once:
 *  - an odd byte of s16le (a sample split between two chunks: clients cut base64 anywhere),
 *  - the resampler's window (Resampler.ts; it holds back ≈ 1-2 ms at these rates).
 * Nothing is ever flushed: the held-back tail belongs to audio that has not arrived yet, and the
 * session clock counts output samples, so times stay on one axis across commits.
 */
import { mulawToLinear } from "./Mulaw.ts"
import { Resampler } from "./Resampler.ts"

export const INPUT_AUDIO_FORMATS = ["pcm_8000", "pcm_16000", "pcm_22050", "pcm_24000", "pcm_44100", "pcm_48000", "ulaw_8000"] as const
export type InputAudioFormat = (typeof INPUT_AUDIO_FORMATS)[number]

export const isInputAudioFormat = (value: unknown): value is InputAudioFormat =>
  typeof value === "string" && (INPUT_AUDIO_FORMATS as ReadonlyArray<string>).includes(value)

/** Hz of a format's samples. */
export const inputSampleRate = (format: InputAudioFormat): number => Number(format.slice(format.indexOf("_") + 1))

/** Bytes per sample of a format (s16le 2, µ-law 1). */
export const inputBytesPerSample = (format: InputAudioFormat): number => (format.startsWith("ulaw") ? 1 : 2)

/** The rate every recognizer takes, Hz. */
export const RECOGNIZER_RATE = 16000

export class InputPcm {
  readonly inRate: number
  private readonly ulaw: boolean
  private readonly resampler: Resampler | undefined
  /** A byte of s16le whose partner is still to come; -1 when none. */
  private pendingByte = -1

  constructor(readonly format: InputAudioFormat) {
    if (!isInputAudioFormat(format)) throw new RangeError(`unknown input audio format ${String(format)}`)
    this.inRate = inputSampleRate(format)
    this.ulaw = format.startsWith("ulaw")
    this.resampler = this.inRate === RECOGNIZER_RATE ? undefined : new Resampler(this.inRate, RECOGNIZER_RATE)
  }

  /** The 16 kHz samples this chunk completes (possibly none: a lone byte, the resampler's window). */
  push(bytes: Uint8Array): Int16Array {
    const samples = this.ulaw ? ulawSamples(bytes) : this.s16Samples(bytes)
    return this.resampler === undefined ? samples : this.resampler.pushInt16(samples)
  }

  /** Little-endian pairs, carrying an odd byte over to the next chunk. */
  private s16Samples(bytes: Uint8Array): Int16Array {
    if (bytes.length === 0) return new Int16Array(0)
    const carried = this.pendingByte >= 0 ? 1 : 0
    const total = bytes.length + carried
    const out = new Int16Array(total >> 1)
    let at = 0
    if (carried === 1 && out.length > 0) {
      out[0] = ((bytes[0]! << 8) | this.pendingByte) << 16 >> 16
      at = 1
    }
    const base = carried === 1 ? 1 : 0
    for (let i = at; i < out.length; i++) {
      const j = base + (i - at) * 2
      out[i] = ((bytes[j + 1]! << 8) | bytes[j]!) << 16 >> 16
    }
    if (total % 2 === 1) this.pendingByte = bytes[bytes.length - 1]!
    else this.pendingByte = -1
    return out
  }
}

const ulawTable = Int16Array.from({ length: 256 }, (_, b) => mulawToLinear(b))

const ulawSamples = (bytes: Uint8Array): Int16Array => {
  const out = new Int16Array(bytes.length)
  for (let i = 0; i < bytes.length; i++) out[i] = ulawTable[bytes[i]!]!
  return out
}
