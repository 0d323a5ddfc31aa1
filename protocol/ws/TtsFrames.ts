/**
 * Wire shapes of the WebSocket text-to-speech endpoints (SPEC 4.2 `stream-input`, and
 * ElevenLabs' multi-context `multi-stream-input` used by LiveKit and Pipecat).
 *
 * Client frames are decoded by hand rather than through Schema: a frame arrives per LLM token, so
 * this is the hot path of a session, and the rules are few (types of six fields; every other
 * field, such as `generation_config` or `xi_api_key`, is accepted and ignored).
 *
 * Server frames are built here so the two protocols differ in one place: single-stream control
 * frames carry `audio: null` (SPEC 4.2); multi-context frames carry `contextId` and omit `audio`
 * on control frames, because clients there test `"audio" in frame` or `frame.audio` to find audio.
 *
 * The session actor (actors/TtsSession.ts) never sees a frame: runtime/WebSocketServer.ts turns
 * each client frame into a `SessionInput` with `decodeClientFrame` and each `SessionOutput` into a
 * frame with `encodeOutput`.
 */
import { characterAlignment } from "../../actors/Alignment.ts"
import type { ContextId, SessionInput, SessionOutput, UnreadableInput } from "../../actors/TtsSessionMessages.ts"
import type { WordTiming } from "../../engines/tts/TtsEngine.ts"

export type { ContextId } from "../../actors/TtsSessionMessages.ts"

/** Context ids longer than this are refused: they are echoed in every frame and kept as map keys. */
export const MAX_CONTEXT_ID_CHARS = 128

const optionalBoolean = (o: Record<string, unknown>, key: string): boolean | string => {
  const v = o[key]
  if (v === undefined || v === null) return false
  return typeof v === "boolean" ? v : `${key} must be a boolean`
}

const unreadable = (message: string): UnreadableInput => ({ _tag: "Unreadable", message })

/** A binary frame: the endpoints speak JSON text frames only. */
/** Fatal: invalid UTF-8 throws instead of becoming U+FFFD; a leading BOM is kept, as Buffer's decoding kept it. */
const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })

/**
 * A text frame's payload as a string, or undefined when it is not UTF-8 (RFC 6455 section 8.1:
 * the endpoint closes with 1007). The uWS build in use checks UTF-8 itself and drops such a
 * connection before any callback sees the frame (README, known issue), so this answers only
 * where a build hands the bytes over; decoding them leniently would turn them into U+FFFD text.
 */
export const textFramePayload = (bytes: ArrayBuffer | Uint8Array): string | undefined => {
  try {
    return strictUtf8.decode(bytes)
  } catch {
    return undefined
  }
}

export const binaryFrame: UnreadableInput = unreadable("binary frames are not accepted; send JSON text frames")

/** A decoded frame, or `Unreadable` with the reason it is malformed (sent back in an `invalid_message` error). */
export const decodeClientFrame = (raw: string): SessionInput => {
  const decoded = decodeFields(raw)
  return typeof decoded === "string" ? unreadable(decoded) : decoded
}

const decodeFields = (raw: string): SessionInput | string => {
  let value: unknown
  try {
    value = JSON.parse(raw)
  } catch {
    return "frame is not valid JSON"
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return "frame must be a JSON object"
  const o = value as Record<string, unknown>
  const text = o.text
  if (text !== undefined && text !== null && typeof text !== "string") return "text must be a string"
  let speed: number | undefined
  const settings = o.voice_settings
  if (settings !== undefined && settings !== null) {
    if (typeof settings !== "object" || Array.isArray(settings)) return "voice_settings must be an object"
    const s = (settings as Record<string, unknown>).speed
    if (s !== undefined && s !== null) {
      if (typeof s !== "number" || !Number.isFinite(s)) return "voice_settings.speed must be a number"
      speed = s
    }
  }
  const contextId = o.context_id
  if (contextId !== undefined && contextId !== null) {
    if (typeof contextId !== "string" || contextId.length === 0 || contextId.length > MAX_CONTEXT_ID_CHARS) {
      return `context_id must be a string of 1 to ${MAX_CONTEXT_ID_CHARS} characters`
    }
  }
  const flags = {
    tryTrigger: optionalBoolean(o, "try_trigger_generation"),
    flush: optionalBoolean(o, "flush"),
    closeContext: optionalBoolean(o, "close_context"),
    closeSocket: optionalBoolean(o, "close_socket"),
    cancel: optionalBoolean(o, "cancel")
  }
  for (const f of Object.values(flags)) if (typeof f === "string") return f
  return {
    _tag: "Request",
    text: typeof text === "string" ? text : undefined,
    speed,
    contextId: typeof contextId === "string" ? contextId : undefined,
    ...(flags as { tryTrigger: boolean; flush: boolean; closeContext: boolean; closeSocket: boolean; cancel: boolean })
  }
}

/** ElevenLabs' WebSocket alignment: integer ms relative to the start of this chunk's audio. */
export interface WsAlignment {
  readonly chars: Array<string>
  readonly charStartTimesMs: Array<number>
  readonly charDurationsMs: Array<number>
}

/**
 * Alignment of `raw` (the chunk's text as the client sent it, surrounding whitespace included, so
 * the chars of all frames concatenate to the input) from word timings of the synthesized text,
 * which starts `lead` characters into `raw`.
 */
export const wsAlignment = (raw: string, lead: number, words: ReadonlyArray<WordTiming>, durationMs: number): WsAlignment => {
  const shifted = lead === 0 ? words : words.map((w) => ({ ...w, charStart: w.charStart + lead, charEnd: w.charEnd + lead }))
  const a = characterAlignment(raw, shifted, durationMs)
  const starts = a.character_start_times_seconds.map((s) => Math.round(s * 1000))
  return {
    chars: a.characters,
    charStartTimesMs: starts,
    charDurationsMs: a.character_end_times_seconds.map((e, i) => Math.max(0, Math.round(e * 1000) - starts[i]!))
  }
}

/**
 * Alignment of a block sent before its chunk is done: no characters (the chunk's last frame
 * carries them all). Empty rather than null, so clients that read `alignment.chars` on every
 * audio frame (as ours did) keep working, and concatenated frames still spell the text.
 */
const NO_CHARACTERS: WsAlignment = { chars: [], charStartTimesMs: [], charDurationsMs: [] }

export const audioFrame = (pcm: Uint8Array, alignment: WsAlignment, contextId: ContextId): string =>
  JSON.stringify({
    audio: Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength).toString("base64"),
    isFinal: false,
    alignment,
    normalizedAlignment: alignment,
    ...(contextId !== undefined ? { contextId } : {})
  })

const control = (fields: Record<string, unknown>, contextId: ContextId): string =>
  JSON.stringify(contextId === undefined ? { audio: null, ...fields } : { ...fields, contextId })

export const flushDoneFrame = (contextId: ContextId): string => control({ flushDone: true }, contextId)
export const finalFrame = (contextId: ContextId): string => control({ isFinal: true }, contextId)
/** Acknowledges a cancel: no audio of the cancelled speech follows it. */
export const cancelledFrame = (contextId: ContextId): string => control({ cancelled: true }, contextId)
export const errorFrame = (code: string, message: string, contextId?: ContextId): string =>
  JSON.stringify(contextId === undefined ? { error: { code, message } } : { error: { code, message }, contextId })

/** The frame of one message of the session. */
export const encodeOutput = (output: SessionOutput): string => {
  switch (output._tag) {
    case "Audio":
      return audioFrame(output.audio, wsAlignment(output.text, output.lead, output.words, output.durationMs), output.contextId)
    case "AudioBlock":
      return audioFrame(output.audio, NO_CHARACTERS, output.contextId)
    case "FlushDone":
      return flushDoneFrame(output.contextId)
    case "Final":
      return finalFrame(output.contextId)
    case "Cancelled":
      return cancelledFrame(output.contextId)
    case "Error":
      return errorFrame(output.code, output.message, output.contextId)
  }
}
