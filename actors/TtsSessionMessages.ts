/**
 * What a WebSocket text-to-speech session (actors/TtsSession.ts) takes in and gives out, as typed
 * messages. The wire (JSON frames, base64 audio, alignment in ms, close codes) is
 * protocol/ws/'s; runtime/WebSocketServer.ts decodes client frames into `SessionInput`, puts them
 * in the session's `Inbox`, and encodes each `SessionOutput` and the `SessionEnd` for the socket.
 */
import { Data, Effect, Queue } from "effect"
import type { WordTiming } from "../engines/tts/TtsEngine.ts"

/** Which context a message is for: undefined on stream-input (one context, frames carry no id). */
export type ContextId = string | undefined

/** One client frame that decoded: what to speak and what to do with it. */
export interface SessionRequest {
  readonly _tag: "Request"
  /** Absent or null on the wire when the frame carries no text. */
  readonly text: string | undefined
  readonly tryTrigger: boolean
  readonly flush: boolean
  /** Raw `voice_settings.speed`, not yet clamped. */
  readonly speed: number | undefined
  /** `context_id`; only meaningful on multi-stream-input. */
  readonly contextId: string | undefined
  readonly closeContext: boolean
  readonly closeSocket: boolean
  /** Our extension (SPEC 4.2 leaves its shape open): `{"cancel": true}`. */
  readonly cancel: boolean
}

/** A frame that did not decode (malformed, binary); the session refuses it in order. */
export interface UnreadableInput {
  readonly _tag: "Unreadable"
  /** Why, sent back in an `invalid_message` error. */
  readonly message: string
}

export type SessionInput = SessionRequest | UnreadableInput

/** Audio of one chunk of text, and what its alignment is computed from. */
export interface AudioOutput {
  readonly _tag: "Audio"
  readonly contextId: ContextId
  /** The chunk's audio in the session's format (s16le or µ-law), no header. */
  readonly audio: Uint8Array
  /** The chunk's text as the client sent it, surrounding whitespace included. */
  readonly text: string
  /** Characters of `text` before the synthesized text starts. */
  readonly lead: number
  /** Word timings of the synthesized text (offsets relative to it). */
  readonly words: ReadonlyArray<WordTiming>
  /** Length of the audio, ms. */
  readonly durationMs: number
}

export type SessionOutput =
  | AudioOutput
  /** A block of a chunk's audio sent before the chunk is done; alignment comes with its last frame. */
  | { readonly _tag: "AudioBlock"; readonly contextId: ContextId; readonly audio: Uint8Array }
  /** Everything queued before the flush has been sent. */
  | { readonly _tag: "FlushDone"; readonly contextId: ContextId }
  /** The context (or, on stream-input, the session) has no more audio. */
  | { readonly _tag: "Final"; readonly contextId: ContextId }
  /** Acknowledges a cancel: no audio of the cancelled speech follows it. */
  | { readonly _tag: "Cancelled"; readonly contextId: ContextId }
  /** An error frame: `code` is the error's `detail.status`-like code. */
  | { readonly _tag: "Error"; readonly code: string; readonly message: string; readonly contextId: ContextId }

/**
 * How a session ends: `Normal` (end of input, close_socket), `Violation` (a client fault, after an
 * error), `Failure` (synthesis failed or the session went idle, after an error). `reason` is the
 * close frame's reason text.
 */
export interface SessionEnd {
  readonly kind: "Normal" | "Violation" | "Failure"
  readonly reason: string
}

export class SocketGone extends Data.TaggedError("SocketGone")<{}> {}

/** The socket as the session sees it; runtime/WebSocketServer.ts implements it over uWS. */
export interface SessionSocket {
  /** Sends a message once the client has read enough of what is already queued. */
  readonly send: (output: SessionOutput) => Effect.Effect<void, SocketGone>
  /**
   * Resumes once the client has read enough of what is queued that a `sendNow` of a small frame
   * keeps within the backpressure bound. For markers whose sending must be one step with the
   * session's bookkeeping (a flushDone counted as sent): wait here, then `sendNow` in one sync.
   */
  readonly ready: Effect.Effect<void, SocketGone>
  /** Sends at once, for the last message before the end and for markers after `ready`; may exceed the backpressure bound by that frame. */
  readonly sendNow: (output: SessionOutput) => void
  /** Closes the socket; a no-op once closed. */
  readonly end: (end: SessionEnd) => void
}

/**
 * The bounded mailbox of a session. The socket callback decodes each inbound frame and offers the
 * message here with the frame's size in characters. Bounded twice: by messages and by the
 * characters of the frames they came from.
 */
export class Inbox {
  private chars = 0
  readonly take: Effect.Effect<SessionInput>

  private constructor(private readonly queue: Queue.Queue<readonly [SessionInput, number]>, private readonly maxChars: number) {
    this.take = Effect.map(Queue.take(queue), ([input, chars]) => {
      this.chars -= chars
      return input
    })
  }

  static make(capacity = 256, maxChars = 1024 * 1024): Inbox {
    return new Inbox(Effect.runSync(Queue.bounded<readonly [SessionInput, number]>(capacity)), maxChars)
  }

  /** False when full: the client is outrunning its own session, and the caller closes it. */
  offer(input: SessionInput, chars: number): boolean {
    if (this.chars + chars > this.maxChars || !Queue.offerUnsafe(this.queue, [input, chars])) return false
    this.chars += chars
    return true
  }
}
