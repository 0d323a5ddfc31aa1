/**
 * What work costs, in credits: the one place for the rules of every way credits are spent.
 * The movements themselves (reserve, resize, settle, debit) are storage/Credits.ts; when each
 * caller takes them is described in its own header (actors/SpeechRequest.ts,
 * actors/TtsSession.ts, actors/Transcription.ts).
 *
 * - Text-to-speech: one credit per character, characters being Unicode code points
 *   (engines/text/TextLength.ts `countCharacters`: an emoji is one, expressive tags count too). No
 *   minimum, no rounding. HTTP (sync and stream) reserves the whole text and settles for the
 *   characters delivered; WebSocket debits each synthesized chunk (trimmed) as its audio is sent.
 * - Speech-to-text: one credit per started second of decoded audio (4.2 s costs 5; silence
 *   counts), at least `STT_MIN_CHARGE_CREDITS` (1), which is what a caller must hold to be let
 *   in (402 otherwise). Before decoding, the cost of the duration the file declares is reserved
 *   and the decode is bounded by what the caller can pay (actors/SttPrepay.ts); the charge is
 *   still the decoded duration's.
 * - Voice clones: creating, editing or deleting one is free (ElevenLabs does not charge an
 *   instant clone either), so actors/VoiceCloning.ts takes no credits; speaking with a clone
 *   costs what a preset costs.
 * - Summaries: one credit per started 100 characters of the transcript summarised, at least one,
 *   whichever engine writes it; charged when the summary is stored (a failed engine costs nothing).
 *   Summaries of anonymous jobs are free (there is no account to charge; the job itself was
 *   limited by the anonymous audio quota).
 * - Chunk translation: one credit per started 100 characters of `new_source`, at least one;
 *   reserved before the engine runs and settled when the translation is complete; a failed
 *   engine or a client that leaves before the end is not charged. `source == target` is free
 *   (no engine runs). Anonymous calls are free and held by the per-address rate limit.
 *
 * `1 credit = 1 character` is also what GET /v1/user reports as `character_limit`.
 */
import { AccountsError } from "../storage/AccountsError.ts"
import { countCharacters } from "../engines/text/TextLength.ts"

/** Ledger `purpose` of each way credits are spent (shown on the usage page). */
export const CreditPurpose = {
  /** HTTP text-to-speech, sync and stream alike. */
  tts: "tts",
  /** WebSocket text-to-speech. */
  ttsWebSocket: "tts_ws",
  stt: "stt",
  /** A queued recognition job (the reference is the job id). */
  sttJob: "stt_job",
  /** A realtime speech-to-text WebSocket session (the reference is the session id). */
  sttRealtime: "stt_realtime",
  summary: "summary",
  translate: "translate"
} as const

/** Credits of synthesizing `text`: its characters (code points). */
export const ttsCredits = (text: string): number => countCharacters(text)

/** The least a transcription costs: one credit (one started second). */
export const STT_MIN_CHARGE_CREDITS = 1

/** Credits of transcribing `durationMs` of decoded audio: started seconds, at least the minimum. */
export const sttCredits = (durationMs: number): number => Math.max(STT_MIN_CHARGE_CREDITS, Math.ceil(durationMs / 1000))

/** The 402 of a caller whose balance is below the minimum charge of speech-to-text. */
export const sttBelowMinimum = (balance: number) =>
  new AccountsError({
    reason: "InsufficientCredits",
    message: `speech-to-text costs at least ${STT_MIN_CHARGE_CREDITS} credit (one per started second of audio) and the account has ${balance}`
  })

/** Characters per credit of summaries and translation. */
export const TEXT_CREDIT_CHARACTERS = 100

/** Credits of summarising or translating `text`: started hundreds of characters, at least one. */
export const textCredits = (text: string): number => Math.max(1, Math.ceil(countCharacters(text) / TEXT_CREDIT_CHARACTERS))
