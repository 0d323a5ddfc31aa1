/**
 * One text-to-speech request, from decoded input to encoded audio: checks, credits, sentence
 * segmentation, ordered synthesis with look-ahead, and the output container (WAV, raw PCM,
 * µ-law). The HTTP routes choose between `whole` (sync) and `stream`; both share this code.
 *
 * Credits: the text's characters are reserved while the first segment is synthesized, before any
 * audio is delivered, and the reservation is settled when the request ends: all of them on
 * success, the characters delivered otherwise (nothing when the first segment fails). A process
 * that dies in between charges nothing (its reservation is given back at the next start-up).
 */
import { Effect, Fiber } from "effect"
import { mulawEncode } from "../engines/audio/Mulaw.ts"
import { type OutputFormat, parseOutputFormat } from "../engines/audio/OutputFormat.ts"
import { int16ToBytesLE, joinBlocks } from "../engines/audio/Pcm.ts"
import { wavHeader } from "../engines/audio/Wav.ts"
import { type Segment, segmentSentences } from "../engines/text/Segmenter.ts"
import { type ExpressivePart, expressiveSegments, hasExpressiveTags, parseExpressive } from "../engines/tts/ExpressiveTags.ts"
import type { SynthesizeOutput } from "../engines/tts/tasks.ts"
import type { Priority } from "../engines/Inference.ts"
import { Credits, type Reservation } from "../storage/Credits.ts"
import { CreditPurpose, ttsCredits } from "./CreditPolicy.ts"
import { streamInOrder } from "./SentenceStream.ts"
import { SpeechError } from "../engines/tts/SpeechError.ts"
import { asOneBlock, type ResolvedVoice, speakingIn, Synthesizer } from "./Synthesizer.ts"
import { countCharacters } from "../engines/text/TextLength.ts"

/** SPEC 8. */
export const MAX_TEXT_CHARS = 8000
/** Rate of bare `wav` and of the WebSocket audio, Hz. */
export const DEFAULT_SAMPLE_RATE = 24000

export interface SpeechInput {
  readonly voiceId: string
  readonly text: string
  readonly speed: number
  readonly outputFormat: string | undefined
  /** Null for anonymous calls (none of the TTS routes allow them today). */
  readonly userId: string | null
  readonly chunking: boolean
  /**
   * ISO 639-1 the voice should speak (already resolved, `Synthesizer.requestedLanguage`), or
   * undefined for the voice's own language (a clone's may come from its sample).
   */
  readonly language?: string | undefined
}

export interface PreparedSpeech {
  readonly voice: ResolvedVoice
  readonly format: OutputFormat
  readonly segments: ReadonlyArray<Segment>
  readonly text: string
  readonly speed: number
  readonly userId: string | null
  /** False when the caller asked for one synthesis (`sentence_chunking: false`). */
  readonly chunked: boolean
  /** Tagged text (SPEC 2.4) only: the parts of each segment, by segment index. */
  readonly expressive?: ReadonlyArray<ReadonlyArray<ExpressivePart>>
}

/** Characters are code points (engines/text/TextLength.ts): 4,000 emoji are 4,000 characters. */
export const checkText = (text: string) => {
  if (text.trim().length === 0) {
    return Effect.fail(new SpeechError({ reason: "InvalidRequest", message: "text must contain at least one non-blank character" }))
  }
  // Code points never outnumber UTF-16 units: only long texts need counting.
  const chars = text.length > MAX_TEXT_CHARS ? countCharacters(text) : text.length
  return chars > MAX_TEXT_CHARS
    ? Effect.fail(new SpeechError({ reason: "TextTooLong", message: `text is ${chars} characters; the limit is ${MAX_TEXT_CHARS}. Split it into several requests.` }))
    : Effect.void
}

/** The whole text as one segment, its offsets at the first and after the last non-blank. */
const wholeText = (text: string) => {
  const charStart = text.length - text.trimStart().length
  const charEnd = text.trimEnd().length
  return { text: text.slice(charStart, charEnd), charStart, charEnd }
}

/**
 * Validates and resolves; nothing is synthesized or billed yet (runSegments bills). Untraced, as
 * the Synthesizer's per-request calls are: it runs before every request's first audio, and a traced
 * `Effect.fn` captures a stack and builds a span per call.
 */
export const prepareSpeech = Effect.fnUntraced(function*(input: SpeechInput) {
  yield* checkText(input.text)
  const synthesizer = yield* Synthesizer
  const voice = yield* speakingIn(yield* synthesizer.resolveVoice(input.voiceId, input.userId), input.language)
  const expressive = hasExpressiveTags(input.text) ? yield* planExpressive(input, voice.language) : undefined
  const format = expressive?.format ?? (yield* Effect.try({
    try: () => parseOutputFormat(input.outputFormat, DEFAULT_SAMPLE_RATE),
    catch: (e) => e
  }))
  const segments = expressive?.segments ?? (input.chunking
    ? segmentSentences(input.text, { locale: voice.language })
    : [wholeText(input.text)])
  return {
    voice,
    format,
    segments,
    text: input.text,
    speed: input.speed,
    userId: input.userId,
    chunked: expressive !== undefined || input.chunking,
    ...(expressive !== undefined ? { expressive: expressive.segments.map((s) => s.parts) } : {})
  } satisfies PreparedSpeech
})

const settle = (reservation: Reservation | undefined, charged: number) =>
  reservation === undefined ? Effect.void : Effect.flatMap(Credits, (c) => c.settle(reservation, charged)).pipe(Effect.ignore)

/** Audio bytes of one piece of PCM in the response's container (no header). */
export const encodeBody = (format: OutputFormat, pcm: Int16Array): Uint8Array =>
  format.container === "ulaw" ? mulawEncode(pcm) : int16ToBytesLE(pcm)

export interface SegmentAudio {
  readonly segment: Segment
  readonly index: number
  readonly output: SynthesizeOutput
  /** Where this segment starts in the whole response, ms. */
  readonly offsetMs: number
}

/** What `runSegments` hands on: audio blocks as they come, and/or whole segments. */
export interface SegmentHandlers<E, R> {
  /**
   * Each block of PCM as the engine makes it (`blocks: true`), or each segment's PCM as one
   * block; `index` is the segment's.
   */
  readonly block?: (pcm: Int16Array, index: number) => Effect.Effect<void, E, R>
  /** Each segment once all its audio is in, with its PCM joined. */
  readonly segment?: (audio: SegmentAudio) => Effect.Effect<void, E, R>
}

/**
 * Synthesizes the segments in order with `ahead` in flight and hands their audio on. Charges
 * only the characters of segments whose audio started to go out when anything fails or the
 * client goes away.
 */
export const runSegments = <E, R>(
  speech: PreparedSpeech,
  /**
   * `priority` applies to the first segment; the ones synthesized ahead run as batch work, so a
   * new stream's first audio does not queue behind other streams' look-ahead (they are needed
   * only when the audio before them has played). `blocks`: stream each engine block as it is
   * made (streamed routes); otherwise each segment comes back whole, in one transfer.
   */
  options: { readonly ahead: number; readonly priority: Priority; readonly blocks?: boolean },
  handlers: SegmentHandlers<E, R>
) =>
  Effect.gen(function*() {
    const synthesizer = yield* Synthesizer
    const priorityOf = (index: number): Priority => (index === 0 ? options.priority : "batch")
    let offsetMs = 0
    let deliveredChars = 0
    /** The current segment's blocks, kept only when whole segments are wanted. */
    let pending: Array<Int16Array> = []
    // The reservation (a database round trip) runs while the first segment is synthesized and
    // gates its delivery: out of credits still answers 402 before any audio, and the round trip
    // is off the time to first audio. `reserve` is uninterruptible, so once it ran its outcome
    // is known to the settle below.
    // When this process heard that the balance covers the cost (storage/BalanceHints.ts), the first
    // block does not wait for the round trip either; the reservation is awaited right after it,
    // so a refusal (the credits were spent by another process meanwhile) ends the stream after one
    // block (~100 ms of audio). Streamed blocks (`blocks`) then start the reservation only once
    // the first block is written: started beside the first segment's synthesis, the statement
    // woke PostgreSQL's backend, which took one of the two cores from the worker making that
    // block (first byte ~0.3 ms later, its engine time 1.15 -> 1.4 ms). Whole segments keep it
    // beside the synthesis, where the round trip is hidden by the time until a segment is done.
    const cost = ttsCredits(speech.text)
    const credits = yield* Credits
    let early = false
    let reservation: Fiber.Fiber<Reservation | undefined, Effect.Error<ReturnType<typeof credits.reserve>>> | undefined
    const reserve = Effect.map(
      Effect.forkChild(
        speech.userId === null ? Effect.succeed(undefined) : credits.reserve(speech.userId, cost, { purpose: CreditPurpose.tts }),
        { startImmediately: true }
      ),
      (fiber) => void (reservation = fiber)
    )
    // After the first segment's pool task was handed over: building and writing the statement
    // (~0.3 ms of the main thread) used to come before that hand-off, on the time to first audio.
    const afterFirstStart = Effect.suspend(() => {
      early = speech.userId !== null && credits.covers(speech.userId, cost)
      return early && options.blocks === true ? Effect.void : reserve
    })
    let joined = false
    const paid = Effect.suspend(() => {
      if (joined) return Effect.void
      joined = true
      return Effect.andThen(reservation === undefined ? reserve : Effect.void, Effect.suspend(() => Effect.asVoid(Fiber.join(reservation!))))
    })
    // A block written before its reservation started (early, streamed) starts it in the same
    // uninterruptible step: audio that went out always has its statement running, to be settled.
    const deliver = (pcm: Int16Array, index: number, write: (pcm: Int16Array, index: number) => Effect.Effect<void, E, R>) =>
      reservation === undefined ? Effect.uninterruptible(Effect.andThen(write(pcm, index), reserve)) : write(pcm, index)
    const run = streamInOrder(
      speech.segments,
      options.ahead,
      (segment, index, onBlock: (pcm: Int16Array) => void) => {
        const parts = speech.expressive?.[index]
        if (parts !== undefined) {
          const request = { voice: speech.voice, parts, speed: speech.speed, sampleRate: speech.format.sampleRate, priority: priorityOf(index) }
          return asOneBlock(synthesizer.synthesizeExpressive(request), onBlock)
        }
        const request = { voice: speech.voice, text: segment.text, speed: speech.speed, sampleRate: speech.format.sampleRate, priority: priorityOf(index) }
        return options.blocks === true ? synthesizer.synthesizeStream(request, onBlock) : asOneBlock(synthesizer.synthesize(request), onBlock)
      },
      (pcm, segment, index) =>
        Effect.gen(function*() {
          if (!early) yield* paid
          // Audio of this segment is going out: its characters are owed from now on.
          deliveredChars = segment.charEnd
          if (handlers.segment !== undefined) pending.push(pcm)
          if (handlers.block !== undefined) yield* deliver(pcm, index, handlers.block)
          yield* paid
        }),
      (summary, segment, index) =>
        Effect.gen(function*() {
          yield* paid // a segment with no audio at all
          deliveredChars = segment.charEnd
          if (handlers.segment !== undefined) {
            const { samples: _, ...rest } = summary
            const pcm = joinBlocks(pending)
            pending = []
            yield* handlers.segment({ segment, index, output: { ...rest, pcm }, offsetMs })
          }
          offsetMs += (summary.samples * 1000) / summary.sampleRate
        }),
      afterFirstStart
    )
    // Text some voices render as no audio at all (punctuation only, on some Flite voices) is
    // refused like other unspeakable text, not answered with an empty 200; nothing is charged.
    const spoken = Effect.andThen(run, Effect.suspend(() => {
      if (offsetMs > 0) return Effect.void
      deliveredChars = 0
      return Effect.fail(new SpeechError({ reason: "InvalidRequest", message: "the text holds nothing this voice can speak" }))
    }))
    return yield* spoken.pipe(
      Effect.onExit((exit) =>
        reservation === undefined ? Effect.void : Effect.flatMap(Fiber.await(reservation), (held) =>
          held._tag !== "Success"
            ? Effect.void
            : settle(held.value, exit._tag === "Success" ? cost : ttsCredits(speech.text.slice(0, deliveredChars)))))
    )
  })

/**
 * The whole response at once (endpoint 4), as parts that go out one after another under one
 * Content-Length: the header, then each segment's encoded audio (a view of the PCM the worker
 * transferred, for s16le on a little-endian host). Joining them into one body doubled the
 * ArrayBuffer bytes the main thread allocates per response; V8 counts those against the old
 * generation's limit (engines/SpareBuffers.ts says what that cost and what else was done).
 */
export const synthesizeWhole = (speech: PreparedSpeech, ahead: number) =>
  Effect.gen(function*() {
    const audios: Array<SegmentAudio> = []
    let samples = 0
    yield* runSegments(speech, { ahead, priority: "realtime" }, {
      segment: (audio) =>
        Effect.sync(() => {
          audios.push(audio)
          samples += audio.output.pcm.length
        })
    })
    const bytesPerSample = speech.format.container === "ulaw" ? 1 : 2
    const parts: Array<Uint8Array> = speech.format.container === "wav"
      ? [wavHeader({ sampleRate: speech.format.sampleRate, dataBytes: samples * bytesPerSample })]
      : []
    for (const audio of audios) parts.push(encodeBody(speech.format, audio.output.pcm))
    const synthesizer = yield* Synthesizer
    return {
      parts,
      audios,
      durationMs: (samples * 1000) / speech.format.sampleRate,
      /** Once `parts` are written out: the segments' PCM goes back to the workers (Synthesizer.recycle). */
      release: () => {
        for (const audio of audios) synthesizer.recycle(audio.output.pcm)
      }
    }
  })

/** Streaming WAV header: lengths unknown, 0xFFFFFFFF placeholders (SPEC 4.1 rule 2). */
export const streamingHeader = (format: OutputFormat): Uint8Array =>
  format.container === "wav" ? wavHeader({ sampleRate: format.sampleRate }) : new Uint8Array(0)


// ---------------------------------------------------------------------------------------------
// Expressive path (SPEC 2.4 tags; parsing rules in engines/tts/ExpressiveTags.ts)

/**
 * Tagged text always answers WAV. A requested `wav` / `wav_<rate>` keeps its rate; any other
 * output_format (pcm_*, ulaw_8000, and even values the standard path refuses with 415, such as
 * mp3_*) is ignored and gives WAV at DEFAULT_SAMPLE_RATE (24000 Hz).
 */
export const expressiveFormat = (outputFormat: string | undefined): OutputFormat => {
  try {
    const requested = parseOutputFormat(outputFormat, DEFAULT_SAMPLE_RATE)
    if (requested.container === "wav") return requested
  } catch {
    // ignored, as every non-WAV format is
  }
  return parseOutputFormat("wav", DEFAULT_SAMPLE_RATE)
}

/**
 * Segments of tagged text: sentences within blocks, effects riding with the sentence before
 * them. Always segmented, whatever `sentence_chunking` says, so the stream endpoint answers in
 * sentence mode and the sync endpoint renders the same audio. Text that is nothing but tags is
 * refused (400), before any credit is taken.
 */
const planExpressive = (input: SpeechInput, locale: string) => {
  const segments = expressiveSegments(input.text, parseExpressive(input.text).parts, locale)
  return segments.length === 0
    ? Effect.fail(new SpeechError({ reason: "InvalidRequest", message: "the text holds expressive tags but nothing to say or perform" }))
    : Effect.succeed({ format: expressiveFormat(input.outputFormat), segments })
}
