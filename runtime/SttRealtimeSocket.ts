/**
 * The uWS side of `GET /v1/speech-to-text/realtime` (ElevenLabs' realtime speech-to-text):
 * upgrade, authentication, the inbox of audio chunks and the writes of the session's messages.
 * The session itself is actors/RealtimeTranscription.ts; the wire protocol/ws/SttRealtimeFrames.ts.
 *
 * Admission differs from the text-to-speech sockets on purpose: the SDK's realtime client reports
 * problems as messages (`auth_error`, `input_error`: connection.js emits AUTH_ERROR / INPUT_ERROR
 * for them, and only a generic ERROR for an HTTP refusal), so every refusal but WS_ENABLED=false
 * (HTTP 503) upgrades, sends its message and closes 1008. The upgrade is therefore always
 * synchronous; the credential is checked first thing in the session's fiber, and chunks that
 * arrive meanwhile wait in the inbox. Credentials as on the TTS sockets:
 * xi-api-key header or query, Authorization: Bearer (an API key, or an OAuth token holding the
 * `tts` scope, which covers transcription), else a `realtime_scribe` single-use token `?token=`.
 *
 * Bounds: a frame over MAX_REALTIME_FRAME_BYTES or a chunk over 5 s of audio:
 * chunk_size_exceeded (1009). Chunks wait in the inbox while the session works; more than
 * MAX_BACKLOG_MS of audio waiting (audio sent faster than the decoder takes it, or a stalled
 * session) is queue_overflow. Partials are skipped while the client has not read PARTIAL_LOW_WATER
 * bytes; a client that leaves MAX_UNREAD_BYTES unread is closed (1008).
 * Revocation: a deleted key ends its sessions (`key_revoked` error, 1008), as on the TTS sockets.
 * Recognizer places are few (STT_SESSIONS_PER_WORKER a thread), so a session must pay and speak
 * to keep one: a user without a credit is refused at the start (quota_exceeded), and a session
 * that waits STT_REALTIME_IDLE_S for audio with nothing left to do ends with
 * insufficient_audio_activity (uWS's own idle timeout does not see it: the automatic pings keep
 * an idle socket alive).
 */
import { randomUUID } from "node:crypto"
import uWS from "@based/uws"
import { Cause, Effect, type Fiber, FiberSet, type Scope } from "effect"
import { runRealtimeTranscription, type RealtimeInbox, type RealtimeSocket } from "../actors/RealtimeTranscription.ts"
import { type StreamingRecognizer } from "../engines/asr/StreamingRecognizer.ts"
import type { Inference } from "../engines/Inference.ts"
import { ApiError, errorBody, statusText, toApiError } from "../protocol/ApiError.ts"
import { type Authenticate, insufficientScope, presentedCredential, socketCredentialRequired } from "../protocol/Authorization.ts"
import { type ConsumeSocketToken, presentedSocketToken } from "../protocol/SingleUseToken.ts"
import {
  type AudioChunk,
  encodeMessage,
  MAX_REALTIME_FRAME_BYTES,
  parseClientFrame,
  type RealtimeConfig,
  realtimeCloseCode,
  realtimeConfig,
  RealtimeRefusal
} from "../protocol/ws/SttRealtimeFrames.ts"
import { ApiKeys, type Principal } from "../storage/ApiKeys.ts"
import type { Credits } from "../storage/Credits.ts"

export interface SttRealtimeOptions {
  readonly apiBase: string
  /** WS_ENABLED. */
  readonly enabled: boolean
  readonly authenticate: Authenticate
  readonly consumeToken?: ConsumeSocketToken
  /** STT_REALTIME_MAX_SESSION_S in ms. */
  readonly maxSessionMs: number
  /** STT_REALTIME_MAX_UTTERANCE_S in ms. */
  readonly maxUtteranceMs: number
  /** STT_REALTIME_IDLE_S in ms: a session without audio this long ends (insufficient_audio_activity). */
  readonly idleMs: number
  /** The user's balance, credits: a session starts only with at least one. */
  readonly balance: (userId: string) => Effect.Effect<number, unknown>
}

/** How often sessions are checked for silence on the wire, ms (an idle one ends within idleMs plus this, at most). */
const IDLE_SWEEP_MS = 1_000

/** Audio that may wait for the session, ms: beyond it, queue_overflow. */
export const MAX_BACKLOG_MS = 10_000
/** Frames that may wait (bare commits carry no audio but cost a commit each). */
const MAX_BACKLOG_FRAMES = 1000
const PARTIAL_LOW_WATER = 64 * 1024
const MAX_UNREAD_BYTES = 1024 * 1024
/** uWS's own limit, above ours so that we answer oversized frames ourselves. */
const UWS_MAX_PAYLOAD = 2 * MAX_REALTIME_FRAME_BYTES
const UWS_IDLE_TIMEOUT_S = 120

/** Chunks in arrival order, bounded by their audio; a refusal overtakes them. */
export class ChunkInbox implements RealtimeInbox {
  private items: Array<AudioChunk> = []
  private queuedMs = 0
  private refusal: RealtimeRefusal | undefined
  private wake: (() => void) | undefined
  /**
   * The client's silence, as the idle rule counts it: the time the session has waited on an
   * empty inbox since the last audio arrived. The clock runs only while the session waits
   * (`waitingSince`), so time spent decoding or answering a commit queued behind the service's
   * backlog is not silence (the bench saw 2 of 10 sessions cut while their commits waited); only
   * audio sets it back to 0, so bare commits cannot hold a place (an outside check held one for
   * good with a commit every 25 s).
   */
  private silentMs = 0
  /** Since when the session has waited on an empty inbox, ms since the epoch; undefined while it works. */
  private waitingSince: number | undefined = Date.now()

  offer(chunk: AudioChunk): void {
    if (this.queuedMs + chunk.audioMs > MAX_BACKLOG_MS || this.items.length >= MAX_BACKLOG_FRAMES) {
      return this.refuse(new RealtimeRefusal("queue_overflow", `audio arrives faster than it is transcribed: more than ${MAX_BACKLOG_MS / 1000} s wait; send at most real time`))
    }
    this.items.push(chunk)
    this.queuedMs += chunk.audioMs
    const now = Date.now()
    if (this.waitingSince !== undefined) this.silentMs += now - this.waitingSince
    this.waitingSince = undefined // the session has work until it asks for more
    if (chunk.audio.byteLength > 0) this.silentMs = 0
    this.notify()
  }

  /** The client's silence at `now`, ms (see `silentMs`). */
  idleFor(now: number): number {
    return this.silentMs + (this.waitingSince === undefined ? 0 : now - this.waitingSince)
  }

  refuse(refusal: RealtimeRefusal): void {
    this.refusal ??= refusal
    this.notify()
  }

  readonly unread = (): ReadonlyArray<AudioChunk> => [...this.items]

  private notify() {
    const wake = this.wake
    this.wake = undefined
    wake?.()
  }

  readonly drop = (): void => {
    const chunk = this.items.shift()
    if (chunk !== undefined) this.queuedMs -= chunk.audioMs
  }

  readonly peek: Effect.Effect<AudioChunk, RealtimeRefusal> = Effect.suspend(() => {
    if (this.refusal !== undefined) return Effect.fail(this.refusal)
    const chunk = this.items[0]
    if (chunk !== undefined) return Effect.succeed(chunk)
    this.waitingSince ??= Date.now()
    return Effect.andThen(
      Effect.callback<void>((resume) => {
        this.wake = () => resume(Effect.void)
        return Effect.sync(() => {
          this.wake = undefined
        })
      }),
      this.peek
    )
  })
}

/** What the upgrade decided without I/O: the configuration, or why the session cannot start. */
type Admission =
  | { readonly _tag: "Configured"; readonly config: RealtimeConfig; readonly headers: Record<string, string>; readonly query: URLSearchParams }
  | { readonly _tag: "Refused"; readonly refusal: RealtimeRefusal }

/** uWS copies user data property by property: the class instance travels in this wrapper. */
interface SocketData {
  readonly conn: Connection
}

class Connection implements RealtimeSocket {
  ws: uWS.WebSocket<SocketData> | undefined
  fiber: Fiber.Fiber<unknown, unknown> | undefined
  readonly inbox = new ChunkInbox()
  readonly sessionId = randomUUID().replaceAll("-", "")
  done = false
  /** Set once the credential was accepted (the revocation index reads it). */
  principal: Principal | undefined

  constructor(readonly admission: Admission) {}

  readonly send = (message: { readonly message_type: string } & Record<string, unknown>) => {
    const ws = this.ws
    if (this.done || ws === undefined) return
    if (ws.getBufferedAmount() > MAX_UNREAD_BYTES) return this.end(1008, "client does not read")
    ws.cork(() => ws.send(encodeMessage(message), false, false))
  }

  readonly sendPartial = (text: string) => {
    if (this.ws !== undefined && !this.done && this.ws.getBufferedAmount() <= PARTIAL_LOW_WATER) {
      this.send({ message_type: "partial_transcript", text })
    }
  }

  /** The refusal's message, then its close. */
  refuse(refusal: RealtimeRefusal): void {
    this.send({ message_type: refusal.type, error: refusal.message })
    this.end(realtimeCloseCode(refusal.type), refusal.type)
  }

  end(code: number, reason: string): void {
    if (this.done || this.ws === undefined) return
    this.done = true
    this.ws.end(code, reason)
  }
}

const refuseHttp = (res: uWS.HttpResponse, error: ApiError) =>
  res.cork(() => {
    res.writeStatus(`${error.status} ${statusText[error.status] ?? ""}`)
    res.writeHeader("content-type", "application/json")
    res.end(errorBody(error))
  })

export const makeSttRealtimeSocket = (options: SttRealtimeOptions) => {
  const open = new Set<Connection>()
  const keyOf = (conn: Connection) => conn.principal?.keyId ?? null

  const authenticate = (headers: Record<string, string>, query: URLSearchParams) => {
    const credential = presentedCredential(headers) ?? nonEmpty(query.get("xi_api_key")) ?? nonEmpty(query.get("xi-api-key"))
    const token = presentedSocketToken(query)
    return credential !== undefined
      ? options.authenticate(credential)
      : token !== undefined && options.consumeToken !== undefined
      ? options.consumeToken(token, "realtime_scribe")
      : Effect.fail<unknown>(socketCredentialRequired())
  }

  /** The session's user, or the refusal (auth_error; a database outage: the generic error). */
  const authorize = (headers: Record<string, string>, query: URLSearchParams): Effect.Effect<Principal, RealtimeRefusal> =>
    authenticate(headers, query).pipe(
      Effect.mapError((e) => {
        const { error, kind } = toApiError(e)
        return new RealtimeRefusal(kind === "outage" || kind === "defect" ? "error" : "auth_error", error.message)
      }),
      // An OAuth token must hold the scope transcription uses; API keys hold every scope.
      Effect.filterOrFail((p) => p.scopes.includes("tts"), () => new RealtimeRefusal("auth_error", insufficientScope("tts").message)),
      // A session holds a scarce recognizer place from its start: one that could never pay
      // for a second of audio is not given one (an outside attack held every place with a
      // 0-credit key).
      Effect.tap((p) =>
        options.balance(p.userId).pipe(
          Effect.mapError((e) => new RealtimeRefusal("error", toApiError(e).error.message)),
          Effect.filterOrFail((credits) => credits >= 1, () => new RealtimeRefusal("quota_exceeded", "the account has no credits left for speech-to-text (one credit per started second of audio)"))
        )
      )
    )

  const register = (app: uWS.TemplatedApp) =>
    Effect.gen(function*() {
      const runFork = yield* FiberSet.makeRuntime<StreamingRecognizer | Inference | Credits>()
      const revocations = yield* (yield* ApiKeys).watchRevocations({
        keyIds: () => new Set([...open].map(keyOf).filter((k): k is string => k !== null)),
        revoked: (keyIds) => {
          for (const conn of open) {
            const key = keyOf(conn)
            if (key === null || !keyIds.includes(key)) continue
            conn.fiber?.interruptUnsafe()
            conn.send({ message_type: "auth_error", error: "the API key this session authenticated with was deleted (key_revoked)" })
            conn.end(1008, "key revoked")
          }
        }
      })
      const sweep = setInterval(() => {
        const now = Date.now()
        for (const conn of open) {
          if (conn.inbox.idleFor(now) > options.idleMs) {
            conn.inbox.refuse(new RealtimeRefusal("insufficient_audio_activity", `no audio for ${options.idleMs / 1000} s: the session ended to free its recognizer; send audio continuously (silence too) to keep a session`))
          }
        }
      }, Math.min(IDLE_SWEEP_MS, options.idleMs))
      sweep.unref()
      yield* Effect.addFinalizer(() => Effect.sync(() => clearInterval(sweep)))
      app.ws<SocketData>(`${options.apiBase}/speech-to-text/realtime`, {
        compression: uWS.DISABLED,
        maxPayloadLength: UWS_MAX_PAYLOAD,
        maxBackpressure: 8 * MAX_UNREAD_BYTES,
        closeOnBackpressureLimit: false,
        idleTimeout: UWS_IDLE_TIMEOUT_S,
        sendPingsAutomatically: true,

        upgrade: (res, req, context) => {
          // Copy everything now: `req` is invalid once this callback returns.
          const headers: Record<string, string> = {}
          req.forEach((k, v) => {
            headers[k] = v
          })
          const query = new URLSearchParams(req.getQuery() ?? "")
          const key = headers["sec-websocket-key"] ?? ""
          const protocol = headers["sec-websocket-protocol"] ?? ""
          const extensions = headers["sec-websocket-extensions"] ?? ""
          if (!options.enabled) {
            refuseHttp(res, new ApiError({ status: 503, code: "websocket_disabled", message: "WebSocket sessions are switched off on this server (WS_ENABLED=false); use POST /v1/speech-to-text" }))
            return
          }
          // Always upgraded at once, inside this callback: refusals are messages on the socket, and
          // the credential is checked in the session's fiber. (An upgrade after async work needs
          // res.cork, which in this uWS build can close the new socket: WebSocketServer.ts.)
          let admission: Admission
          try {
            admission = { _tag: "Configured", config: realtimeConfig(query), headers, query }
          } catch (e) {
            admission = { _tag: "Refused", refusal: e instanceof RealtimeRefusal ? e : new RealtimeRefusal("input_error", String(e)) }
          }
          res.upgrade<SocketData>({ conn: new Connection(admission) }, key, protocol, extensions, context)
        },

        open: (ws) => {
          const conn = ws.getUserData().conn
          conn.ws = ws
          const admission = conn.admission
          if (admission._tag === "Refused") return conn.refuse(admission.refusal)
          open.add(conn)
          conn.fiber = runFork(authorize(admission.headers, admission.query).pipe(
            Effect.flatMap((principal) => {
              conn.principal = principal
              // The key may have been deleted between its read and now: check once.
              revocations.recheck()
              return runRealtimeTranscription({
                config: admission.config,
                sessionId: conn.sessionId,
                userId: principal.userId,
                socket: conn,
                inbox: conn.inbox,
                maxSessionMs: options.maxSessionMs,
                maxUtteranceMs: options.maxUtteranceMs
              })
            }),
            Effect.catchCause((cause) => {
              if (Cause.hasInterruptsOnly(cause)) return Effect.void
              const failure = Cause.squash(cause)
              if (failure instanceof RealtimeRefusal) {
                return Effect.andThen(
                  Effect.sync(() => conn.refuse(failure)),
                  failure.type === "transcriber_error" || failure.type === "error" ? Effect.logWarning("realtime transcription failed", { type: failure.type, reason: failure.message }) : Effect.void
                )
              }
              return Effect.andThen(Effect.sync(() => conn.end(1011, "session failed")), Effect.logError("realtime session died", { cause: Cause.pretty(cause) }))
            }),
            Effect.ensuring(Effect.sync(() => conn.end(1000, "session ended")))
          ))
        },

        message: (ws, message, isBinary) => {
          const conn = ws.getUserData().conn
          if (conn.admission._tag === "Refused" || conn.done) return
          if (message.byteLength > MAX_REALTIME_FRAME_BYTES) {
            return conn.inbox.refuse(new RealtimeRefusal("chunk_size_exceeded", `a frame holds at most ${MAX_REALTIME_FRAME_BYTES} bytes; this one had ${message.byteLength}`))
          }
          if (isBinary) return conn.inbox.refuse(new RealtimeRefusal("input_error", "frames are JSON text (input_audio_chunk), not binary"))
          // Copied out now: uWS neuters the ArrayBuffer when this callback returns.
          const text = Buffer.from(message).toString("utf8")
          try {
            conn.inbox.offer(parseClientFrame(text, conn.admission.config.audioFormat))
          } catch (e) {
            conn.inbox.refuse(e instanceof RealtimeRefusal ? e : new RealtimeRefusal("input_error", String(e)))
          }
        },

        close: (ws) => {
          const conn = ws.getUserData().conn
          conn.done = true
          open.delete(conn)
          // The client left: stop transcribing; the session's finalizers settle its credits.
          conn.fiber?.interruptUnsafe()
        }
      })
    })

  return { register, activeSessions: () => open.size }
}

const nonEmpty = (v: string | null | undefined): string | undefined => (v === null || v === undefined || v.trim() === "" ? undefined : v.trim())

export type SttRealtimeSocket = ReturnType<typeof makeSttRealtimeSocket>
export type SttRealtimeRegister = (app: uWS.TemplatedApp) => Effect.Effect<void, never, StreamingRecognizer | Inference | Credits | ApiKeys | Scope.Scope>
