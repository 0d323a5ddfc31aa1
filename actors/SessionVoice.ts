/**
 * The voice a WebSocket session speaks with (checked before the upgrade, so failures are HTTP
 * statuses), and the operator's default language for sessions that name none.
 */
import { Effect } from "effect"
import { resolveLanguage } from "../engines/tts/Voices.ts"
import { SpeechError } from "../engines/tts/SpeechError.ts"
import { revoice, Synthesizer } from "./Synthesizer.ts"

/**
 * Language of a session that names none (WS_DEFAULT_LANGUAGE): an ISO 639-1 code (SPEC 4.2's
 * Estonian, "et", by default), or "preset": each preset's own language (what clients that send no
 * language but pick English voices, such as LiveKit's plugin, expect).
 */
export type SessionDefaultLanguage = string
export const PRESET_LANGUAGE = "preset"
export const WS_DEFAULT_LANGUAGE: SessionDefaultLanguage = "et"

/**
 * Clone ids are refused (SPEC 4.2). `language` is the query/header value or undefined; without
 * one the session speaks `defaultLanguage` ("preset": the preset's own).
 *
 * With a language other than the preset's, the same preset speaks it with its own timbre, distinct
 * from every other preset's in that language (Synthesizer.revoice, engines/tts/PresetTimbres.ts).
 * An unknown language is a 400 before the upgrade.
 */
export const resolveSessionVoice = Effect.fn("TtsSession.resolveVoice")(function*(
  voiceId: string,
  language: string | undefined,
  defaultLanguage: SessionDefaultLanguage = WS_DEFAULT_LANGUAGE
) {
  if (voiceId.startsWith("vc_")) {
    return yield* new SpeechError({
      reason: "CloneNotAllowed",
      message: `voice clones cannot be used on the WebSocket endpoint; synthesize with POST /v1/text-to-speech/${voiceId} instead`
    })
  }
  const synthesizer = yield* Synthesizer
  const voice = yield* synthesizer.resolveVoice(voiceId)
  const given = language !== undefined && language.trim() !== ""
  if (!given && defaultLanguage === PRESET_LANGUAGE) return voice
  const code = given ? resolveLanguage(language) : defaultLanguage
  if (code === undefined) {
    return yield* new SpeechError({
      reason: "InvalidRequest",
      message: `unknown language "${language}"; give an ISO 639-1 code or an English name, e.g. "et" or "Estonian"`
    })
  }
  return code === voice.language ? voice : revoice(voice, code, synthesizer.findVoice(voiceId)?.labels.gender)
})
