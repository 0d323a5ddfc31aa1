/**
 * One realtime speech-to-text session (`GET /v1/speech-to-text/realtime`): an Effect fiber that
 * takes the socket's audio chunks in order, pays for them (RealtimeCharge.ts), hands them to a
 * streaming recognizer held for the session's life (engines/asr/StreamingRecognizer.ts), decides
 * commits (the client's `commit: true`, or Silero VAD: RealtimeVad.ts) and answers in the SDK's
 * messages (RealtimeMessages.ts). The wire is protocol/ws/SttRealtimeFrames.ts; the socket
 * and its inbox are runtime/SttRealtimeSocket.ts.
 *
 * Order of a session: the decoder is placed (SessionsFull: resource_exhausted; an unknown
 * language: input_error), `session_started` echoes the configuration, then per chunk:
 * pay (quota_exceeded when the balance cannot) → push → VAD → commit when due. Partials go out
 * from the recognizer's callback as they come. Every second of audio the fiber waits for the
 * decoder to have taken what it was sent (a `stats` round trip on the session's port, which
 * queues behind the audio), so audio arriving faster than the decoder decodes waits in the
 * socket's inbox, whose bound is queue_overflow.
 *
 * Commit latency in `vad` mode: a commit decodes its utterance again as a whole (the final pass,
 * PocketSphinxStreaming.ts), 0.5-1 s of CPU for 3-7 s of speech. So when the VAD says a pause
 * began, the session asks the worker to PREPARE that pass (`rec.prepare`, in order after the
 * audio pushed so far) while the silence threshold runs; the VAD's commit then takes the
 * prepared words if no frame at or above vad_threshold came since (`commitPrepared`), else the
 * plain commit. Audio arriving meanwhile goes on to the live decoder as always; a pause that
 * ends in speech costs its prepared pass's CPU and nothing else.
 *
 * Ends: the client closes (interrupt), or a RealtimeRefusal (sent, then the close). Either way
 * the scope's finalizers free the decoder and settle the credits of the accepted audio. A client
 * that closes right after its last chunks (the SDK's `url` option does: last chunk with
 * `commit: true`, then close) is charged for all it sent: on an interruption the chunks still in
 * the inbox are admitted (charged) before the settlement, without being decoded: the close
 * handshake has ended the socket, so no transcript could reach the client anyway. A chunk
 * leaves the inbox only in the same uninterruptible step that paid for it, so none is charged
 * twice or slips through. A refusal charges none of them (the client was told to stop).
 */
import { Effect, Exit } from "effect"
import { InputPcm } from "../engines/audio/InputPcm.ts"
import { StreamingRecognizer, type StreamCommitted } from "../engines/asr/StreamingRecognizer.ts"
import { Credits } from "../storage/Credits.ts"
import { type AudioChunk, echoConfig, type RealtimeConfig, RealtimeRefusal, timestampedWords } from "./RealtimeMessages.ts"
import { makeRealtimeCharge } from "./RealtimeCharge.ts"
import { makeRealtimeVad } from "./RealtimeVad.ts"

/** What the session writes to its client. */
export interface RealtimeSocket {
  /** A message that must arrive (session_started, commits). */
  readonly send: (message: { readonly message_type: string } & Record<string, unknown>) => void
  /** A partial: may be dropped while the client is behind (the next one supersedes it). */
  readonly sendPartial: (text: string) => void
}

/** The socket's chunks in arrival order; a refusal the socket decided (bad frame, overflow) comes first. */
export interface RealtimeInbox {
  /** The oldest chunk, once there is one; it stays in the inbox until `drop`. */
  readonly peek: Effect.Effect<AudioChunk, RealtimeRefusal>
  /** Removes the oldest chunk (the session has paid for it, or it had no audio). */
  readonly drop: () => void
  /** The chunks received and not dropped yet (charged when the client leaves before the session took them). */
  readonly unread: () => ReadonlyArray<AudioChunk>
}

export interface RealtimeSessionOptions {
  readonly config: RealtimeConfig
  readonly sessionId: string
  readonly userId: string
  readonly socket: RealtimeSocket
  readonly inbox: RealtimeInbox
  /** session_time_limit_exceeded after this long, ms. */
  readonly maxSessionMs: number
  /**
   * Audio without a commit after which the session commits by itself, ms (STT_REALTIME_MAX_UTTERANCE_S).
   * A commit decodes its utterance again as a whole on the session's worker thread, between that
   * thread's other tasks: an outside attack streamed 238 s without a commit, and its commit held
   * the thread for 57 s while a TTS request on it timed out.
   */
  readonly maxUtteranceMs: number
}

/** Any failure of the session as the message its client gets. */
export const toRefusal = (e: unknown): RealtimeRefusal => {
  if (e instanceof RealtimeRefusal) return e
  const tag = (e as { _tag?: unknown })?._tag
  const reason = (e as { reason?: unknown })?.reason
  const message = String((e as { message?: unknown })?.message ?? e)
  if (tag === "AccountsError" && reason === "InsufficientCredits") return new RealtimeRefusal("quota_exceeded", message)
  if (tag === "TranscriptionError" && reason === "UnsupportedLanguage") return new RealtimeRefusal("input_error", message)
  if (tag === "EngineError" && (reason === "SessionsFull" || reason === "QueueFull")) {
    return new RealtimeRefusal("resource_exhausted", `every recognizer is busy (${message}); try again shortly`)
  }
  if (tag === "TranscriptionError" || tag === "EngineError") return new RealtimeRefusal("transcriber_error", message)
  return new RealtimeRefusal("error", `the session failed: ${message.split("\n", 1)[0]}`)
}

/** Audio pushed between two waits for the decoder, ms. */
const SYNC_EVERY_MS = 1000

export const runRealtimeTranscription = (o: RealtimeSessionOptions) =>
  Effect.scoped(Effect.gen(function*() {
    const { config } = o
    const charge = makeRealtimeCharge(yield* Credits, o.userId, o.sessionId)
    const admitUnread = Effect.gen(function*() {
      for (const ms of o.inbox.unread().map((c) => c.audioMs)) {
        // Stops at the first the balance cannot pay: the client is charged what it could pay.
        if (ms > 0 && !(yield* charge.admit(ms))) return
      }
    }).pipe(Effect.orElseSucceed(() => undefined))
    yield* Effect.addFinalizer((exit) => Effect.andThen(Exit.hasInterrupts(exit) ? admitUnread : Effect.void, charge.end))
    const recognizer = yield* StreamingRecognizer
    const rec = yield* recognizer.open(
      { audioFormat: config.audioFormat, language: config.languageCode },
      (partial) => o.socket.sendPartial(partial.text)
    )
    const vad = config.commitStrategy === "vad"
      ? yield* makeRealtimeVad({
        threshold: config.vadThreshold,
        minSpeechMs: config.minSpeechDurationMs,
        minSilenceMs: config.minSilenceDurationMs,
        silenceThresholdMs: config.vadSilenceThresholdSecs * 1000
      })
      : undefined
    // The VAD's own 16 kHz copy (the recognizer converts on its worker).
    const pcm = vad === undefined ? undefined : new InputPcm(config.audioFormat)
    o.socket.send({ message_type: "session_started", session_id: o.sessionId, config: echoConfig(config) })

    const sendCommitted = (c: StreamCommitted) => {
      o.socket.send({ message_type: "committed_transcript", text: c.text })
      if (config.includeTimestamps) {
        o.socket.send({ message_type: "committed_transcript_with_timestamps", text: c.text, language_code: c.language, words: timestampedWords(c.words) })
      }
    }
    /** The VAD's loud-frame count when the last prepare was sent; undefined: none for this utterance. */
    let preparedAt: number | undefined
    /** Audio pushed since the last commit, ms. */
    let utteranceMs = 0
    const commit = (prepared: boolean) =>
      Effect.gen(function*() {
        utteranceMs = 0
        const asked = performance.now()
        sendCommitted(yield* (prepared ? rec.commitPrepared : rec.commit))
        // The commit's latency from the moment it was due (the VAD's threshold, or the client's commit).
        yield* Effect.logDebug("realtime commit", { ms: Math.round(performance.now() - asked), prepared })
        preparedAt = undefined
        vad?.reset()
      })

    const loop = Effect.gen(function*() {
      let chunks = 0
      let sinceSyncMs = 0
      while (true) {
        const chunk = yield* o.inbox.peek
        if (chunk.audio.length === 0) o.inbox.drop()
        if (chunk.previousText !== undefined && chunks > 0) {
          return yield* Effect.fail(new RealtimeRefusal("input_error", "previous_text can only be sent with the first audio chunk"))
        }
        chunks++
        if (chunk.audio.length > 0) {
          // Paid and dropped in one step: an interruption finds it either unpaid in the inbox or gone.
          const admitted = yield* Effect.uninterruptible(Effect.tap(charge.admit(chunk.audioMs), (ok) => Effect.sync(() => ok && o.inbox.drop())))
          if (!admitted) {
            return yield* Effect.fail(new RealtimeRefusal("quota_exceeded", `the account's credits are spent: ${Math.ceil(charge.acceptedMs() / 1000)} s of audio were accepted and charged`))
          }
          yield* rec.push(chunk.audio)
          utteranceMs += chunk.audioMs
          if (vad !== undefined && pcm !== undefined) {
            if (yield* vad.push(pcm.push(chunk.audio))) {
              yield* commit(preparedAt !== undefined && preparedAt === vad.loudFrames())
            } else if (vad.paused() && preparedAt !== vad.loudFrames()) {
              // A pause began (or began again after speech): its final pass starts now.
              yield* rec.prepare
              preparedAt = vad.loudFrames()
            }
          }
          sinceSyncMs += chunk.audioMs
          if (sinceSyncMs >= SYNC_EVERY_MS) {
            sinceSyncMs = 0
            yield* rec.stats
          }
        }
        if (chunk.commit || utteranceMs >= o.maxUtteranceMs) yield* commit(false)
      }
    })
    const timeLimit = Effect.sleep(o.maxSessionMs).pipe(
      Effect.andThen(Effect.fail(new RealtimeRefusal("session_time_limit_exceeded", `a session lasts at most ${o.maxSessionMs / 1000} s; open a new one`)))
    )
    // `done` fails when the decoder's thread dies; it only succeeds once the scope closes it.
    const crashed = Effect.andThen(rec.done, Effect.never)
    return yield* Effect.raceAllFirst([loop, timeLimit, crashed])
  })).pipe(Effect.mapError(toRefusal))
