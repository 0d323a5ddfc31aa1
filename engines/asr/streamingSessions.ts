/**
 * Worker-side session kind `asr.stream`: one realtime recognition (engines/sessions.ts hosts it,
 * engines/Inference.ts has the contract, StreamingRecognizer.ts is its main-thread face).
 *
 * A session converts its client's audio (`audioFormat`: InputPcm.ts, no ffmpeg) to 16 kHz s16
 * and feeds a streaming layer (StreamingAsr.ts) chosen by `engine`; a partial hypothesis that
 * changed goes back as an event, `commit` answers the utterance's final words.
 *
 * Messages (in order, one at a time):
 *  - send `{ type: "audio", audio }`: bytes in the session's format (a Uint8Array; moving its
 *    buffer saves a copy). May emit `{ type: "partial", text }`.
 *  - call `{ type: "commit", prepared? }` → `StreamCommitted` (`prepared`: only silence came since
 *    the last `prepare`, whose words may be answered: StreamingAsr.ts).
 *  - send `{ type: "prepare" }`: a pause began, the commit's words are computed now.
 *  - send `{ type: "reset" }`: drops the utterance in progress.
 *  - call `{ type: "stats" }` → `StreamStats` (tests, the bench).
 */
import { isInputAudioFormat, InputPcm, type InputAudioFormat } from "../audio/InputPcm.ts"
import { defineSessions, type SessionContext, type SessionHandler, sessionsOnThisThread } from "../sessions.ts"
import { TaskError } from "../tasks.ts"
import { AsrError, type AsrEngineId, type AsrWord } from "./AsrEngine.ts"
import type { PocketSphinxOptions } from "./PocketSphinxAsr.ts"
import { pocketSphinxDecoderStats, pocketSphinxStreaming } from "./PocketSphinxStreaming.ts"
import type { StreamingAsrEngine } from "./StreamingAsr.ts"

export interface StreamInit {
  readonly audioFormat: InputAudioFormat
  /** ISO 639-1; undefined: the engine's own. */
  readonly language?: string | undefined
  /** Default "pocketsphinx": the one layer so far. */
  readonly engine?: AsrEngineId
  readonly pocketsphinx?: PocketSphinxOptions
  /** Audio between two partial hypotheses, ms (PocketSphinxStreaming.ts). */
  readonly partialEveryMs?: number
  /** Spare decoders unused this long are freed, ms. */
  readonly releaseAfterMs?: number
  /** PocketSphinx: "full" (default) decodes each committed utterance again as a whole (PocketSphinxStreaming.ts, FINAL PASS). */
  readonly finalPass?: "full" | "live"
}

export type StreamMessage =
  | { readonly type: "audio"; readonly audio: Uint8Array }
  | { readonly type: "commit"; readonly prepared?: boolean }
  | { readonly type: "prepare" }
  | { readonly type: "reset" }
  | { readonly type: "stats" }

export interface StreamPartial {
  readonly type: "partial"
  /** The hypothesis of the utterance so far (a guess: it may change or shrink). */
  readonly text: string
}

export interface StreamCommitted {
  readonly language: string
  readonly text: string
  /** Times in ms since the session's first sample (the session's audio clock). */
  readonly words: ReadonlyArray<AsrWord>
  /** Session-clock span of the committed audio, ms. */
  readonly startMs: number
  readonly endMs: number
}

export interface StreamStats {
  readonly threadId: number
  /** Sessions this thread hosts now. */
  readonly sessionsOnThread: number
  /** PocketSphinx decoders built on this thread, and those an utterance holds now. */
  readonly decodersLive: number
  readonly decodersInUse: number
}

const engineFor = (init: StreamInit) => {
  const engine = init.engine ?? "pocketsphinx"
  if (engine !== "pocketsphinx") throw new TaskError("InvalidInput", `no streaming engine "${String(engine)}"`, "AsrError")
  return pocketSphinxStreaming({
    ...(init.pocketsphinx === undefined ? {} : { pocketsphinx: init.pocketsphinx }),
    ...(init.partialEveryMs === undefined ? {} : { partialEveryMs: init.partialEveryMs }),
    ...(init.releaseAfterMs === undefined ? {} : { releaseAfterMs: init.releaseAfterMs }),
    ...(init.finalPass === undefined ? {} : { finalPass: init.finalPass })
  })
}

const asTaskError = (e: unknown): unknown => (AsrError.is(e) ? new TaskError(e.reason, e.message, "AsrError") : e)

const openStream = async (init: StreamInit, ctx: SessionContext): Promise<SessionHandler> => {
  if (!isInputAudioFormat(init.audioFormat)) throw new TaskError("InvalidInput", `unknown audio format ${String(init.audioFormat)}`, "AsrError")
  let engine: StreamingAsrEngine & { readonly warm: () => Promise<void> }
  try {
    engine = engineFor(init)
    // A spare decoder before the first words (≈ 0.6 s to build), not under them.
    await engine.warm()
  } catch (e) {
    throw asTaskError(e)
  }
  const input = new InputPcm(init.audioFormat)
  let decoder
  try {
    decoder = engine.open({ sampleRate: 16000, language: init.language })
  } catch (e) {
    throw asTaskError(e)
  }
  let lastPartial = ""
  return {
    message: async (m: StreamMessage) => {
      try {
        switch (m.type) {
          case "audio": {
            if (!(m.audio instanceof Uint8Array)) throw new TaskError("InvalidInput", "audio must be a Uint8Array", "AsrError")
            const text = await decoder.push(input.push(m.audio))
            if (text !== lastPartial) {
              lastPartial = text
              if (text !== "") ctx.emit({ type: "partial", text } satisfies StreamPartial)
            }
            return undefined
          }
          case "commit": {
            const committed = await decoder.commit({ prepared: m.prepared === true })
            lastPartial = ""
            return { ...committed, text: committed.words.map((w) => w.text).join(" ") } satisfies StreamCommitted
          }
          case "prepare":
            await decoder.prepare()
            return undefined
          case "reset":
            decoder.reset()
            lastPartial = ""
            return undefined
          case "stats": {
            const d = pocketSphinxDecoderStats()
            return { threadId: ctx.threadId, sessionsOnThread: sessionsOnThisThread(), decodersLive: d.live, decodersInUse: d.inUse } satisfies StreamStats
          }
          default:
            throw new TaskError("InvalidInput", `unknown message ${JSON.stringify((m as { type?: unknown }).type)}`, "AsrError")
        }
      } catch (e) {
        throw asTaskError(e)
      }
    },
    close: () => decoder.close()
  }
}

export const asrSessions = defineSessions({
  "asr.stream": openStream
})
