/**
 * Text-to-speech routes (SPEC endpoints 4 and 5, plus ElevenLabs' with-timestamps variants that
 * Pipecat and the SDKs call). Handlers decode, call the speech actors, encode. The /voices
 * routes (list, get, settings, preview) are in voices.ts.
 */
import { Effect } from "effect"
import { characterAlignment } from "../../actors/Alignment.ts"
import { concatBytes } from "../../engines/audio/Pcm.ts"
import {
  encodeBody,
  prepareSpeech,
  runSegments,
  streamingHeader,
  synthesizeWhole
} from "../../actors/SpeechRequest.ts"
import { requestedLanguage, Synthesizer } from "../../actors/Synthesizer.ts"
import type { Credits } from "../../storage/Credits.ts"
import { decodeJsonBody, decodeQuery } from "../decode.ts"
import { Reply, type RequestContext, type Route } from "../Http.ts"
import { ErrorBody } from "../schemas/ErrorBody.ts"
import { AudioWithTimestamps, TextToSpeechRequest, TtsQuery } from "../schemas/Tts.ts"

export interface TtsRouteOptions {
  readonly apiBase: string
  readonly maxJsonBodyBytes: number
  /** Syntheses in flight per request: the next sentences are made while one is sent. */
  readonly ahead: number
}

type Services = Synthesizer | Credits

const audioErrors = {
  400: { description: "malformed request or text_too_long", schema: ErrorBody },
  402: { description: "out of credits", schema: ErrorBody },
  404: { description: "unknown voice", schema: ErrorBody },
  415: { description: "unsupported output_format (MP3, Opus, ...)", schema: ErrorBody },
  502: { description: "synthesis failed", schema: ErrorBody }
}

export const ttsRoutes = (options: TtsRouteOptions): ReadonlyArray<Route<Services>> => {
  const { apiBase } = options

  const prepare = (ctx: RequestContext, chunkingAllowed: boolean) =>
    Effect.gen(function*() {
      const query = yield* decodeQuery(TtsQuery, ctx)
      const body = yield* decodeJsonBody(TextToSpeechRequest, ctx, options.maxJsonBodyBytes)
      const language = yield* requestedLanguage(
        nonEmpty(query.language) ?? nonEmpty(query.language_code) ?? nonEmpty(body.language_code) ?? nonEmpty(ctx.request.headers["x-speak-language"])
      )
      return yield* prepareSpeech({
        language,
        voiceId: ctx.params.voice_id!,
        text: body.text,
        speed: body.voice_settings?.speed ?? 1,
        outputFormat: query.output_format,
        userId: ctx.principal?.userId ?? null,
        chunking: chunkingAllowed ? body.sentence_chunking !== false : true
      })
    })

  const audioHeaders = (contentType: string, sampleRate: number) => ({
    "content-type": contentType,
    "x-audio-sample-rate": String(sampleRate)
  })

  return [
    {
      method: "POST",
      path: `${apiBase}/text-to-speech/{voice_id}`,
      auth: "key",
      operationId: "textToSpeech",
      summary: "Synthesize text; the whole audio in one response",
      tags: ["text-to-speech"],
      query: TtsQuery,
      requestBody: { contentType: "application/json", schema: TextToSpeechRequest },
      responses: {
        200: { description: "audio/wav, audio/pcm (s16le) or audio/basic (µ-law)", contentType: "audio/wav" },
        ...audioErrors
      },
      handler: (ctx) =>
        Effect.gen(function*() {
          const speech = yield* prepare(ctx, false)
          const result = yield* synthesizeWhole(speech, options.ahead)
          return Reply.bytes(200, result.parts, {
            ...audioHeaders(speech.format.contentType, speech.format.sampleRate),
            "x-audio-duration-ms": String(Math.round(result.durationMs))
          }, result.release)
        })
    },
    {
      method: "POST",
      path: `${apiBase}/text-to-speech/{voice_id}/stream`,
      auth: "key",
      operationId: "textToSpeechStream",
      summary: "Synthesize text sentence by sentence, streamed as it is made (WAV with 0xFFFFFFFF lengths, or raw PCM)",
      tags: ["text-to-speech"],
      query: TtsQuery,
      requestBody: { contentType: "application/json", schema: TextToSpeechRequest },
      responses: {
        200: { description: "streamed audio; x-streaming-mode sentence or single, x-sentence-count", contentType: "audio/wav" },
        ...audioErrors
      },
      handler: (ctx) =>
        Effect.gen(function*() {
          const speech = yield* prepare(ctx, true)
          const mode = speech.chunked ? "sentence" : "single"
          const headers: Record<string, string> = {
            ...audioHeaders(speech.format.contentType, speech.format.sampleRate),
            "x-streaming-mode": mode
          }
          if (mode === "sentence") headers["x-sentence-count"] = String(speech.segments.length)
          const synthesizer = yield* Synthesizer
          return Reply.stream(200, headers, (writer) =>
            Effect.suspend(() => {
              let first = true
              return runSegments(speech, { ahead: 2, priority: "realtime", blocks: true }, {
                block: (pcm) => {
                  const audio = encodeBody(speech.format, pcm)
                  // The header goes out with the first block of audio, so a failure before any
                  // audio still answers with a normal error status (SPEC 4.1 rule 3).
                  const bytes = first ? concatBytes(streamingHeader(speech.format), audio) : audio
                  first = false
                  // uWS has copied or queued the bytes once the write returns: the block's buffer
                  // can go back to the workers.
                  return Effect.map(writer.write(bytes), () => synthesizer.recycle(pcm))
                }
              })
            }))
        })
    },
    {
      method: "POST",
      path: `${apiBase}/text-to-speech/{voice_id}/with-timestamps`,
      auth: "key",
      operationId: "textToSpeechWithTimestamps",
      summary: "Synthesize text; audio as base64 with per-character timings (ElevenLabs alignment)",
      tags: ["text-to-speech"],
      query: TtsQuery,
      requestBody: { contentType: "application/json", schema: TextToSpeechRequest },
      responses: { 200: { description: "audio and alignment", schema: AudioWithTimestamps }, ...audioErrors },
      handler: (ctx) =>
        Effect.gen(function*() {
          const speech = yield* prepare(ctx, false)
          const result = yield* synthesizeWhole(speech, options.ahead)
          const words = result.audios.flatMap((a) =>
            a.output.words.map((w) => shiftWord(w, a.segment.charStart, a.offsetMs))
          )
          const alignment = characterAlignment(speech.text, words, result.durationMs)
          const audio = Buffer.concat(result.parts).toString("base64")
          result.release()
          return Reply.json(200, { audio_base64: audio, alignment, normalized_alignment: alignment }, {
            "x-audio-sample-rate": String(speech.format.sampleRate),
            "x-audio-duration-ms": String(Math.round(result.durationMs))
          })
        })
    },
    {
      method: "POST",
      path: `${apiBase}/text-to-speech/{voice_id}/stream/with-timestamps`,
      auth: "key",
      operationId: "textToSpeechStreamWithTimestamps",
      summary: "Streamed synthesis as newline-delimited JSON chunks of base64 audio with character alignment",
      tags: ["text-to-speech"],
      query: TtsQuery,
      requestBody: { contentType: "application/json", schema: TextToSpeechRequest },
      responses: { 200: { description: "application/x-ndjson of AudioWithTimestamps", schema: AudioWithTimestamps }, ...audioErrors },
      handler: (ctx) =>
        Effect.gen(function*() {
          const speech = yield* prepare(ctx, true)
          const encoder = new TextEncoder()
          // Lines of segments without audio wait for the first with audio: a text with none at all
          // then still answers 400 (runSegments), with nothing written yet.
          let waiting: Array<Uint8Array> | undefined = []
          return Reply.stream(200, {
            "content-type": "application/x-ndjson",
            "x-audio-sample-rate": String(speech.format.sampleRate),
            "x-streaming-mode": "sentence",
            "x-sentence-count": String(speech.segments.length)
          }, (writer) =>
            runSegments(speech, { ahead: 2, priority: "realtime" }, { segment: ({ index, output, segment, offsetMs }) => {
              const audio = encodeBody(speech.format, output.pcm)
              const bytes = index === 0 ? concatBytes(streamingHeader(speech.format), audio) : audio
              // Alignment covers the text between segments too, so concatenated chunks spell the input.
              const from = index === 0 ? 0 : segment.charStart
              const to = index === speech.segments.length - 1 ? speech.text.length : speech.segments[index + 1]!.charStart
              const alignment = characterAlignment(
                speech.text.slice(from, to),
                output.words.map((w) => shiftWord(w, segment.charStart - from, 0)),
                (output.pcm.length * 1000) / output.sampleRate,
                offsetMs
              )
              const line = encoder.encode(JSON.stringify({ audio_base64: Buffer.from(bytes).toString("base64"), alignment, normalized_alignment: alignment }) + "\n")
              if (waiting !== undefined && output.pcm.length === 0) return Effect.sync(() => void waiting!.push(line))
              const lines = [...(waiting ?? []), line]
              waiting = undefined
              return writer.write(lines.length === 1 ? line : concatBytes(...lines))
            } }))
        })
    }
  ]
}

/**
 * The language of a TTS request, first given wins: `?language=`, `?language_code=`, the body's
 * `language_code`, the `X-Speak-Language` header. The query beats the header as on the
 * WebSocket; the body, the request's own words, beats the header (often set per connection by a
 * proxy or client default). Blank values count as absent; a value that loses is never parsed.
 */
const nonEmpty = (value: string | null | undefined): string | undefined =>
  value === undefined || value === null || value.trim() === "" ? undefined : value

/** Moves segment-relative word timings into the coordinates of a larger text and timeline. */
const shiftWord = <W extends { charStart: number; charEnd: number; startMs: number; endMs: number }>(w: W, chars: number, ms: number): W => ({
  ...w,
  charStart: w.charStart + chars,
  charEnd: w.charEnd + chars,
  startMs: w.startMs + ms,
  endMs: w.endMs + ms
})
