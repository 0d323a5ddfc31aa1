/**
 * Query parameters of the WebSocket text-to-speech upgrade that shape the session (SPEC 4.2;
 * ElevenLabs' `output_format` and `inactivity_timeout`). Checked before the upgrade, so a bad
 * value is an HTTP answer (thrown ApiError), not a close code.
 */
import { type SessionMode, type SessionOptions, WS_SAMPLE_RATE } from "../../actors/TtsSession.ts"
import { OUTPUT_SAMPLE_RATES, OutputFormatError, parseOutputFormat } from "../../engines/audio/OutputFormat.ts"
import { ApiError, badRequest } from "../ApiError.ts"

/** ElevenLabs' ceiling for `inactivity_timeout`, s. */
export const MAX_INACTIVITY_TIMEOUT_S = 180

/** stream-input always, and multi-stream-input without output_format (SPEC 4.2). */
const DEFAULT_FORMAT: SessionOptions["format"] = { container: "pcm", sampleRate: WS_SAMPLE_RATE }

/**
 * `output_format` of multi-stream-input, parsed by the HTTP endpoints' parser: `pcm_<rate>` and
 * `ulaw_8000`. `wav_*` is refused too (frames are bare chunks; there is nowhere for a header), as
 * are mp3 and opus: 415 before the upgrade, like HTTP TTS. stream-input ignores the parameter
 * (SPEC 4.2).
 */
export const sessionFormat = (mode: SessionMode, value: string | undefined): SessionOptions["format"] => {
  if (mode === "single" || value === undefined || value === "") return DEFAULT_FORMAT
  const unsupported = () =>
    new ApiError({
      status: 415,
      code: "unsupported_output_format",
      message: `unsupported output_format "${value}" on the WebSocket; supported: pcm_<rate> with rate in ${OUTPUT_SAMPLE_RATES.join(", ")}, and ulaw_8000`
    })
  try {
    const format = parseOutputFormat(value, WS_SAMPLE_RATE)
    if (format.container === "wav") throw unsupported()
    return { container: format.container, sampleRate: format.sampleRate }
  } catch (e) {
    if (e instanceof OutputFormatError) throw unsupported()
    throw e
  }
}

/**
 * ElevenLabs' `inactivity_timeout` query parameter: seconds without a frame before the session
 * closes; positive, clamped to 180 (a larger wish gets the most there is); absent: the server's
 * WS_IDLE_TIMEOUT_S. Returns ms.
 */
export const inactivityTimeoutMs = (value: string | undefined, defaultMs: number): number => {
  if (value === undefined || value.trim() === "") return defaultMs
  // Plain decimal seconds only (Number() would also take "0x10" and "1e-300"); at least 1 s, so a
  // session cannot be asked to close the moment it opens.
  const seconds = /^\s*\d+(\.\d+)?\s*$/.test(value) ? Number(value) : NaN
  if (!(seconds >= 1)) {
    throw badRequest(`inactivity_timeout must be a number of seconds from 1 (values over ${MAX_INACTIVITY_TIMEOUT_S} are taken as ${MAX_INACTIVITY_TIMEOUT_S}), got "${value.slice(0, 40)}"`)
  }
  return Math.round(Math.min(seconds, MAX_INACTIVITY_TIMEOUT_S) * 1000)
}
