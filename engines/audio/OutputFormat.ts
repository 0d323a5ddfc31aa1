/**
 * Parses the `output_format` query value of the TTS endpoints.
 *
 * Accepted: `wav` (the service's default rate, passed in by the caller), `wav_<rate>`,
 * `pcm_<rate>` (raw s16le mono, no header) and `ulaw_8000` (G.711 µ-law, audio/basic), with
 * <rate> one of 8000, 16000, 22050, 24000, 32000, 44100, 48000 Hz. Everything else — mp3_*,
 * opus_*, unknown codecs, unsupported rates, malformed values — is an `OutputFormatError`, which
 * the HTTP layer maps to 415. Values are matched case-sensitively, as the vendor SDKs send them.
 */

export const OUTPUT_SAMPLE_RATES = [8000, 16000, 22050, 24000, 32000, 44100, 48000] as const
export type OutputSampleRate = (typeof OUTPUT_SAMPLE_RATES)[number]

export type OutputContainer = "wav" | "pcm" | "ulaw"

export interface OutputFormat {
  /** Canonical name, e.g. `wav_24000` (bare `wav` is expanded to its rate). */
  readonly name: string
  readonly container: OutputContainer
  /** Hz. */
  readonly sampleRate: OutputSampleRate
  /** MIME type of the response body. Raw PCM has no registered little-endian type: `audio/pcm`. */
  readonly contentType: string
  /** Bytes per sample of the body's audio (2 for s16le, 1 for µ-law). */
  readonly bytesPerSample: 1 | 2
}

export type OutputFormatErrorReason = "UnsupportedCodec" | "UnsupportedSampleRate" | "Malformed"

/** Unsupported or malformed output_format; always HTTP 415. */
export class OutputFormatError extends Error {
  readonly _tag = "OutputFormatError"
  readonly httpStatus = 415
  constructor(readonly reason: OutputFormatErrorReason, readonly value: string) {
    super(`unsupported output_format "${value}" (${reason}); supported: wav, wav_<rate>, pcm_<rate>, ulaw_8000 with rate in ${OUTPUT_SAMPLE_RATES.join(", ")}`)
  }
}

const CONTENT_TYPES: Record<OutputContainer, string> = { wav: "audio/wav", pcm: "audio/pcm", ulaw: "audio/basic" }

const isRate = (n: number): n is OutputSampleRate => (OUTPUT_SAMPLE_RATES as ReadonlyArray<number>).includes(n)

const make = (container: OutputContainer, sampleRate: OutputSampleRate): OutputFormat => ({
  name: `${container}_${sampleRate}`,
  container,
  sampleRate,
  contentType: CONTENT_TYPES[container],
  bytesPerSample: container === "ulaw" ? 1 : 2
})

/**
 * @param value the raw query value; undefined means "not given" and yields `wav` at the default.
 * @param defaultWavRate Hz used for bare `wav` (service configuration, read at the edge).
 */
export const parseOutputFormat = (value: string | undefined, defaultWavRate: OutputSampleRate): OutputFormat => {
  if (value === undefined || value === "wav") return make("wav", defaultWavRate)
  const match = /^([a-z0-9]+)_(\d+)(?:_(\d+))?$/.exec(value)
  if (match === null) throw new OutputFormatError("Malformed", value)
  const codec = match[1]!
  const rate = Number(match[2])
  // mp3_44100_128, opus_48000_64 carry a bitrate; no accepted format has a third part.
  if (codec !== "wav" && codec !== "pcm" && codec !== "ulaw") throw new OutputFormatError("UnsupportedCodec", value)
  if (match[3] !== undefined) throw new OutputFormatError("Malformed", value)
  if (codec === "ulaw") {
    if (rate !== 8000) throw new OutputFormatError("UnsupportedSampleRate", value)
    return make("ulaw", 8000)
  }
  if (!isRate(rate) || match[2]!.startsWith("0")) throw new OutputFormatError("UnsupportedSampleRate", value)
  return make(codec, rate)
}
