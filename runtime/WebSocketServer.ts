/**
 * The uWS side of the WebSocket text-to-speech endpoints (SPEC 4.2; ElevenLabs' multi-context
 * protocol): upgrade checks, and a socket object that feeds a TtsSession actor and carries its
 * messages back under backpressure. The session's behaviour lives in actors/TtsSession.ts, the
 * wire in protocol/ws/: client frames are decoded into the session's messages here, in the
 * socket callback, and its outputs encoded into frames as they are sent.
 *
 * Upgrade (uWS UpgradeAsync pattern): headers, query, voice id and the Sec-WebSocket-* values are
 * copied before anything else (the request object dies when the callback returns), `onAborted`
 * is registered before going async, and the upgrade happens in a fiber only if the client is
 * still there; when admission needs no I/O the fiber finishes inside the callback and the
 * upgrade is synchronous (see the upgrade handler for why that matters). Refusals are HTTP answers with the SPEC 2.1 body: 503 when WS_ENABLED is off,
 * 401 (with WWW-Authenticate) for a missing or wrong key, 404 for unknown presets and clone ids,
 * 400 for an unknown language or a bad `inactivity_timeout`, 415 for an `output_format` that
 * multi-stream-input cannot send.
 *
 * Inbound frames over 64 KiB get an error frame and close 1009 (uWS's own limit is set higher so
 * that we see them).
 *
 * Revocation: open sessions are indexed by the API key they authenticated with; ApiKeys reports
 * deleted keys (`watchRevocations`: at once for deletes it hears of, within shortTtlMs otherwise)
 * and each of their sessions gets an error frame `key_revoked`, close 1008, and its fiber
 * interrupted, which stops its synthesis and debits.
 *
 * Backpressure: a frame is written only while the socket holds at most SEND_LOW_WATER bytes;
 * otherwise the sender waits for uWS's `drain`. Since each frame is at most one chunk of audio
 * (240 characters: about 2.5 MB of base64 at speed 0.5), the buffer stays far below
 * `maxBackpressure`, so uWS never drops a frame (send status 2). If it ever did, the socket is
 * closed with 1011: audio is never lost silently.
 */
import uWS from "@based/uws"
import { Cause, Effect, FiberSet, type Fiber, type Scope } from "effect"
import type { Synthesizer } from "../actors/Synthesizer.ts"
import { runTtsSession, type SessionMode, type SessionOptions } from "../actors/TtsSession.ts"
import { resolveSessionVoice, type SessionDefaultLanguage } from "../actors/SessionVoice.ts"
import { Inbox, type SessionEnd, type SessionOutput, type SessionSocket, SocketGone } from "../actors/TtsSessionMessages.ts"
import type { ResolvedVoice } from "../actors/Synthesizer.ts"
import { ApiError, errorBody, statusText, toApiError } from "../protocol/ApiError.ts"
import { type Authenticate, authenticateChallenge, bearerToken, insufficientScope, presentedCredential, socketCredentialRequired } from "../protocol/Authorization.ts"
import { CLOSE_INVALID_DATA, CLOSE_POLICY, CLOSE_SERVER_ERROR, CLOSE_TOO_BIG, closeCode } from "../protocol/ws/CloseCodes.ts"
import { inactivityTimeoutMs, sessionFormat } from "../protocol/ws/SessionQuery.ts"
import { binaryFrame, decodeClientFrame, encodeOutput, errorFrame, textFramePayload } from "../protocol/ws/TtsFrames.ts"
import { type ConsumeSocketToken, presentedSocketToken } from "../protocol/SingleUseToken.ts"
import { ApiKeys, type Principal } from "../storage/ApiKeys.ts"
import type { Credits } from "../storage/Credits.ts"

export interface TtsWebSocketOptions {
  /** "/api/v1". */
  readonly apiBase: string
  /** WS_ENABLED: when false every upgrade is refused with 503. */
  readonly enabled: boolean
  /** WS_IDLE_TIMEOUT_S in ms. */
  readonly idleTimeoutMs: number
  /** WS_DEFAULT_LANGUAGE: a language code, or "preset" (each preset's own); the SPEC's "et" when absent. */
  readonly defaultLanguage?: SessionDefaultLanguage
  readonly authenticate: Authenticate
  /** A `tts_websocket` single-use token in the query (`?token=`), used when no key is presented. */
  readonly consumeToken?: ConsumeSocketToken
  /** Where a 401's WWW-Authenticate points (HttpServerOptions.resourceMetadataUrl). */
  readonly resourceMetadataUrl?: () => string | undefined
}

/** Bytes the socket may hold before the next frame waits for `drain`. */
export const SEND_LOW_WATER = 256 * 1024
/** uWS drops frames past this; our own gate keeps far below it. */
const MAX_BACKPRESSURE = 8 * 1024 * 1024
/** Largest inbound message, bytes; past it the session sends an error frame and closes with 1009. 8000 characters of JSON fit. */
export const MAX_FRAME_BYTES = 64 * 1024
/**
 * uWS's own limit, bytes: above MAX_FRAME_BYTES so that we, not uWS, refuse messages between the
 * two. uWS drops the TCP connection without a close frame (the client sees 1006) past its limit
 * and for text frames that are not UTF-8; neither can be changed in this build. 1 MiB bounds the
 * memory a socket may make uWS buffer, like the inbox's 1 Mi characters.
 */
const UWS_MAX_PAYLOAD = 1024 * 1024
/** uWS's own idle limit, s, with automatic pings: only reaps dead peers; sessions apply WS_IDLE_TIMEOUT_S. */
const UWS_IDLE_TIMEOUT_S = 120

const SEND_DROPPED = 2

interface Admitted {
  readonly principal: Principal
  readonly voice: ResolvedVoice
  readonly mode: SessionMode
  readonly format: SessionOptions["format"]
  readonly idleTimeoutMs: number
}

/**
 * uWS user data. Hazard: uWS copies the object given to `upgrade` property by property, so a
 * class instance loses its prototype; the instance travels inside this wrapper instead.
 */
interface SocketData {
  readonly conn: Connection
  /** Admission read the database (key cache miss): the key may have been deleted since. */
  readonly admittedAsync: boolean
}

/** One socket: the session's view of it, and the uWS handle while it is open. */
class Connection implements SessionSocket {
  ws: uWS.WebSocket<SocketData> | undefined = undefined
  fiber: Fiber.Fiber<unknown, unknown> | undefined = undefined
  readonly inbox = Inbox.make()
  /** uWS reported the close; the handle is invalid. */
  closed = false
  /** We called `end`; no more frames. */
  ending = false
  private waiters: Array<() => void> = []

  constructor(readonly admitted: Admitted) {}

  get waiting(): boolean {
    return this.waiters.length > 0
  }

  get bufferedBytes(): number {
    return this.closed || this.ws === undefined ? 0 : this.ws.getBufferedAmount()
  }

  readonly send = (output: SessionOutput): Effect.Effect<void, SocketGone> =>
    Effect.suspend(() => (this.closed || this.ending || this.ws === undefined ? Effect.fail(new SocketGone()) : this.sendFrame(encodeOutput(output))))

  private readonly sendFrame = (frame: string): Effect.Effect<void, SocketGone> =>
    Effect.suspend(() => {
      const ws = this.ws
      if (this.closed || this.ending || ws === undefined) return Effect.fail(new SocketGone())
      if (ws.getBufferedAmount() > SEND_LOW_WATER) return Effect.andThen(this.drained, this.sendFrame(frame))
      if (this.write(ws, frame) === SEND_DROPPED) {
        this.close(CLOSE_SERVER_ERROR, "frame dropped")
        return Effect.fail(new SocketGone())
      }
      return Effect.void
    })

  /** Resumes once the buffered bytes are at or under SEND_LOW_WATER (the gate `send` waits at), writing nothing. */
  readonly ready: Effect.Effect<void, SocketGone> = Effect.suspend(() => {
    const ws = this.ws
    if (this.closed || this.ending || ws === undefined) return Effect.fail(new SocketGone())
    return ws.getBufferedAmount() > SEND_LOW_WATER ? Effect.andThen(this.drained, this.ready) : Effect.void
  })

  /** Resumes on the next `drain` (or close); the caller re-checks. */
  private readonly drained = Effect.callback<void>((resume) => {
    const wake = () => resume(Effect.void)
    this.waiters.push(wake)
    return Effect.sync(() => {
      this.waiters = this.waiters.filter((w) => w !== wake)
    })
  })

  sendNow(output: SessionOutput): void {
    this.sendFrameNow(encodeOutput(output))
  }

  sendFrameNow(frame: string): void {
    if (!this.closed && !this.ending && this.ws !== undefined) this.write(this.ws, frame)
  }

  end(end: SessionEnd): void {
    this.close(closeCode(end), end.reason)
  }

  close(code: number, reason: string): void {
    if (this.closed || this.ending || this.ws === undefined) return
    this.ending = true
    this.ws.end(code, reason)
  }

  /**
   * Ends the session from outside it (a frame uWS handed us that we refuse, a revoked key): the
   * error frame, the close, and the session's fiber interrupted, so it synthesizes and debits no
   * more. (A close the session starts itself needs no interrupt: it is finishing.)
   */
  abort(code: number, reason: string, frame: string): void {
    this.sendFrameNow(frame)
    this.close(code, reason)
    this.fiber?.interruptUnsafe()
  }

  private write(ws: uWS.WebSocket<SocketData>, frame: string): number {
    let status = 1
    ws.cork(() => {
      status = ws.send(frame, false, false)
    })
    return status
  }

  onDrain(): void {
    if (this.waiters.length > 0 && this.bufferedBytes <= SEND_LOW_WATER) this.wakeAll()
  }

  onClosed(): void {
    this.closed = true
    this.wakeAll()
    // A close we started comes from the session itself, which is finishing anyway.
    if (!this.ending) this.fiber?.interruptUnsafe()
  }

  private wakeAll(): void {
    const waiters = this.waiters
    this.waiters = []
    for (const w of waiters) w()
  }
}

export interface TtsWebSockets {
  /** Attaches both routes; for HttpServer's `configure` hook. */
  readonly register: (app: uWS.TemplatedApp) => Effect.Effect<void, never, Synthesizer | Credits | ApiKeys | Scope.Scope>
  readonly activeSessions: () => number
  /** Sessions whose next frame waits for the client to read. */
  readonly backpressuredSessions: () => number
  /** Bytes held in socket buffers for WebSocket clients. */
  readonly bufferedBytes: () => number
}

/** `tokenRefused`: the upgrade carried a bearer token (its 401 says invalid_token, RFC 6750 3.1). */
const refuse = (res: uWS.HttpResponse, error: ApiError, resourceMetadataUrl: string | undefined, tokenRefused = false) =>
  res.cork(() => {
    res.writeStatus(`${error.status} ${statusText[error.status] ?? ""}`)
    res.writeHeader("content-type", "application/json")
    if (error.status === 401) res.writeHeader("www-authenticate", authenticateChallenge(resourceMetadataUrl, tokenRefused))
    for (const [k, v] of Object.entries(error.headers ?? {})) res.writeHeader(k, v)
    res.end(errorBody(error))
  })

const describe = (failure: unknown) => {
  const { error } = toApiError(failure)
  return { code: error.code, message: error.message }
}

const decodeSegment = (s: string): string => {
  try {
    return decodeURIComponent(s)
  } catch {
    return s
  }
}

export const makeTtsWebSockets = (options: TtsWebSocketOptions): TtsWebSockets => {
  const refuseUpgrade = (res: uWS.HttpResponse, error: ApiError, tokenRefused = false) => refuse(res, error, options.resourceMetadataUrl?.(), tokenRefused)
  const open = new Set<Connection>()
  /** Open sessions by the API key they authenticated with, to close them when it is deleted. */
  const byKey = new Map<string, Set<Connection>>()
  const track = (conn: Connection) => {
    const keyId = conn.admitted.principal.keyId
    if (keyId === null) return
    let set = byKey.get(keyId)
    if (set === undefined) byKey.set(keyId, (set = new Set()))
    set.add(conn)
  }
  const untrack = (conn: Connection) => {
    const keyId = conn.admitted.principal.keyId
    const set = keyId === null ? undefined : byKey.get(keyId)
    if (set === undefined) return
    set.delete(conn)
    if (set.size === 0) byKey.delete(keyId!)
  }
  /** A deleted key ends its sessions: no more synthesis, no more debits (1008, `key_revoked`). */
  const revoked = (keyIds: ReadonlyArray<string>) => {
    for (const keyId of keyIds) {
      for (const conn of byKey.get(keyId) ?? []) {
        conn.abort(CLOSE_POLICY, "key revoked", errorFrame("key_revoked", "the API key this session authenticated with was deleted"))
      }
      byKey.delete(keyId)
    }
  }

  /** A key wins over a token in the same upgrade, which is then left unused. */
  const authenticate = (credential: string | undefined, token: string | undefined) =>
    credential !== undefined
      ? options.authenticate(credential)
      : token !== undefined && options.consumeToken !== undefined
      ? options.consumeToken(token, "tts_websocket")
      : socketCredentialRequired()

  /** An OAuth token must hold the synthesis scope; API keys hold every scope. */
  const withTtsScope = <P extends { readonly scopes: ReadonlyArray<string> }>(principal: P) =>
    principal.scopes.includes("tts") ? Effect.succeed(principal) : insufficientScope("tts")

  const admit = (voiceId: string, credential: string | undefined, language: string | undefined, mode: SessionMode, query: URLSearchParams) =>
    Effect.gen(function*() {
      const token = credential === undefined ? presentedSocketToken(query) : undefined
      // A key (or no credential at all) is judged first, as always; a single-use token is spent
      // last, once the rest of the upgrade is known to be admissible, so an upgrade refused for
      // its voice, format or parameters leaves the token usable (it can be spent only once).
      const keyed = token === undefined ? yield* Effect.flatMap(authenticate(credential, undefined), withTtsScope) : undefined
      const format = yield* Effect.try({ try: () => sessionFormat(mode, query.get("output_format") ?? undefined), catch: (e) => e })
      const idleTimeoutMs = yield* Effect.try({
        try: () => inactivityTimeoutMs(query.get("inactivity_timeout") ?? undefined, options.idleTimeoutMs),
        catch: (e) => e
      })
      const voice = yield* resolveSessionVoice(voiceId, language, options.defaultLanguage)
      const principal = keyed ?? (yield* Effect.flatMap(authenticate(undefined, token), withTtsScope))
      return { principal, voice, mode, format, idleTimeoutMs } satisfies Admitted
    })

  const register = (app: uWS.TemplatedApp) =>
    Effect.gen(function*() {
      const runFork = yield* FiberSet.makeRuntime<Synthesizer | Credits>()
      const revocations = yield* (yield* ApiKeys).watchRevocations({ keyIds: () => byKey.keys(), revoked })
      for (const [suffix, mode] of [["stream-input", "single"], ["multi-stream-input", "multi"]] as const) {
        app.ws<SocketData>(`${options.apiBase}/text-to-speech/:voice_id/${suffix}`, {
          compression: uWS.DISABLED,
          maxPayloadLength: UWS_MAX_PAYLOAD,
          maxBackpressure: MAX_BACKPRESSURE,
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
            const voiceId = decodeSegment(req.getParameter(0) ?? "")
            const key = headers["sec-websocket-key"] ?? ""
            const protocol = headers["sec-websocket-protocol"] ?? ""
            const extensions = headers["sec-websocket-extensions"] ?? ""
            if (!options.enabled) {
              refuseUpgrade(res, new ApiError({ status: 503, code: "websocket_disabled", message: "WebSocket sessions are switched off on this server (WS_ENABLED=false); use POST /v1/text-to-speech/{voice_id}/stream" }))
              return
            }
            let aborted = false
            let fiber: Fiber.Fiber<unknown, unknown> | undefined
            res.onAborted(() => {
              aborted = true
              fiber?.interruptUnsafe()
            })
            const credential = presentedCredential(headers) ?? nonEmpty(query.get("xi_api_key")) ?? nonEmpty(query.get("xi-api-key"))
            // Query wins over the header (SPEC 4.2); `language_code` is ElevenLabs' spelling.
            const language = nonEmpty(query.get("language")) ?? nonEmpty(query.get("language_code")) ?? nonEmpty(headers["x-speak-language"])
            // Admission usually completes synchronously (key cache hit, preset voice): the fiber
            // runs to its end inside `runFork`, still within this corked callback, and the upgrade
            // is uWS's synchronous one. Only a cache miss goes async and must cork itself; uWS's
            // cork() can then misread the freshly upgraded socket as an HTTP response and close
            // it (1006 right after open: uNetworking/uWebSockets#1928, fixed upstream by #1929,
            // not in this build). Measured with a raw client: cache hits never close; a miss
            // sometimes does. ApiKeys keeps keys in use warm, so misses are first uses.
            let insideHandler = true
            fiber = runFork(admit(voiceId, credential, language, mode, query).pipe(
              Effect.matchCauseEffect({
                onSuccess: (admitted) =>
                  Effect.sync(() => {
                    if (aborted) return
                    const admittedAsync = !insideHandler
                    const upgrade = () => res.upgrade<SocketData>({ conn: new Connection(admitted), admittedAsync }, key, protocol, extensions, context)
                    if (insideHandler) upgrade()
                    else res.cork(upgrade)
                  }),
                onFailure: (cause) => {
                  if (aborted || Cause.hasInterruptsOnly(cause)) return Effect.void
                  const failure = Cause.squash(cause)
                  const { error, kind } = toApiError(failure)
                  refuseUpgrade(res, error, bearerToken(headers["authorization"]) !== undefined || (credential === undefined && presentedSocketToken(query) !== undefined))
                  // As for HTTP requests (HttpExchange `failed`): only a defect gets a stack.
                  return kind === "defect"
                    ? Effect.logError("WebSocket upgrade failed", { cause: Cause.pretty(cause) })
                    : kind === "outage"
                    ? Effect.logWarning("WebSocket upgrade failed", { status: error.status, code: error.code, reason: String((failure as { message?: unknown })?.message ?? failure).split("\n", 1)[0] })
                    : Effect.void
                }
              })
            ))
            insideHandler = false
          },

          open: (ws) => {
            const conn = ws.getUserData().conn
            conn.ws = ws
            open.add(conn)
            track(conn)
            // A NOTIFY of its deletion may have come between that read and `track`: check once.
            if (ws.getUserData().admittedAsync) revocations.recheck()
            const { principal, voice, mode, format, idleTimeoutMs } = conn.admitted
            conn.fiber = runFork(runTtsSession({
              mode,
              voice,
              userId: principal.userId,
              format,
              idleTimeoutMs,
              socket: conn,
              inbox: conn.inbox,
              describe
            }).pipe(
              Effect.catchCause((cause) =>
                Cause.hasInterruptsOnly(cause) ? Effect.void : Effect.logError("WebSocket session died", { cause: Cause.pretty(cause) })
              ),
              Effect.ensuring(Effect.sync(() => conn.close(CLOSE_SERVER_ERROR, "session ended")))
            ))
          },

          message: (ws, message, isBinary) => {
            const conn = ws.getUserData().conn
            if (message.byteLength > MAX_FRAME_BYTES) {
              const error = errorFrame("message_too_big", `a frame holds at most 64 KiB (${MAX_FRAME_BYTES} bytes); this one had ${message.byteLength}`)
              return conn.abort(CLOSE_TOO_BIG, "frame over 64 KiB", error)
            }
            // Copy out of the ArrayBuffer now: uWS neuters it when this callback returns. The
            // session gets the decoded message; the inbox counts the frame's characters.
            const frame = isBinary ? undefined : textFramePayload(message)
            if (!isBinary && frame === undefined) {
              return conn.abort(CLOSE_INVALID_DATA, "invalid UTF-8", errorFrame("invalid_message", "a text frame must be UTF-8 (RFC 6455)"))
            }
            const input = frame === undefined ? binaryFrame : decodeClientFrame(frame)
            if (!conn.inbox.offer(input, frame?.length ?? 0)) {
              conn.abort(CLOSE_POLICY, "too many messages", errorFrame("too_many_messages", "frames arrive faster than the session reads them"))
            }
          },

          drain: (ws) => ws.getUserData().conn.onDrain(),

          close: (ws, code, message) => {
            const conn = ws.getUserData().conn
            open.delete(conn)
            untrack(conn)
            conn.onClosed()
            // 1006 with a reason: uWS dropped the connection itself (a text frame that is not
            // UTF-8, a message over UWS_MAX_PAYLOAD); the client saw no close frame, so say it here.
            if (code === 1006 && message.byteLength > 0) {
              runFork(Effect.logInfo("WebSocket dropped by uWS", { reason: Buffer.from(message).toString("utf8") }))
            }
          }
        })
      }
    })

  return {
    register,
    activeSessions: () => open.size,
    backpressuredSessions: () => {
      let n = 0
      for (const c of open) if (c.waiting) n++
      return n
    },
    bufferedBytes: () => {
      let n = 0
      for (const c of open) n += c.bufferedBytes
      return n
    }
  }
}

const nonEmpty = (v: string | null | undefined): string | undefined => (v === null || v === undefined || v.trim() === "" ? undefined : v)
