/**
 * runSegments with a scripted engine and a recording ledger: the credit reservation (a database
 * statement) starts right after the first segment's synthesis was handed to the pool, not before
 * it (building and writing the statement was ~0.3 ms of the main thread in front of the first
 * audio); it still starts before any audio goes out, and is settled with the whole cost.
 */
import { Effect, Layer } from "effect"
import t from "tap"
import { runSegments, type PreparedSpeech } from "../../actors/SpeechRequest.ts"
import { Synthesizer } from "../../actors/Synthesizer.ts"
import { parseOutputFormat } from "../../engines/audio/OutputFormat.ts"
import { segmentSentences } from "../../engines/text/Segmenter.ts"
import { Credits } from "../../storage/Credits.ts"

const text = "The first sentence of this request. The second one follows it here. And a third one ends it."

const run = (covers: boolean) =>
  Effect.gen(function*() {
    const events: Array<string> = []
    const synthesizer = {
      synthesizeStream: (request: { text: string }, onBlock: (pcm: Int16Array) => void) =>
        Effect.suspend(() => {
          events.push(`dispatch ${request.text.split(" ")[1]}`)
          return Effect.callback<{ samples: number; sampleRate: number; words: [] }>((resume) => {
            setTimeout(() => {
              onBlock(new Int16Array(2400))
              resume(Effect.succeed({ samples: 2400, sampleRate: 24000, words: [] }))
            }, 5)
          })
        })
    }
    const credits = {
      covers: () => covers,
      reserve: (_userId: string, amount: number) => Effect.sync(() => (events.push(`reserve ${amount}`), { id: "r", userId: "u", amount })),
      settle: (_r: unknown, charged: number) => Effect.sync(() => (events.push(`settle ${charged}`), 0))
    }
    const speech: PreparedSpeech = {
      voice: { voiceId: "v", kind: "preset", language: "en", engineVoice: { engine: "espeak", language: "en", variant: "en" } as never },
      format: parseOutputFormat("pcm_24000", 24000),
      segments: segmentSentences(text, { locale: "en" }),
      text,
      speed: 1,
      userId: "u",
      chunked: true
    }
    yield* runSegments(speech, { ahead: 2, priority: "realtime", blocks: true }, {
      block: (_pcm, index) => Effect.sync(() => void events.push(`audio ${index}`))
    }).pipe(Effect.provide(Layer.mergeAll(
      Layer.succeed(Synthesizer, synthesizer as never),
      Layer.succeed(Credits, credits as never)
    )))
    return events
  })

for (const covers of [false, true]) {
  t.test(`the reservation starts right after the first hand-off (balance ${covers ? "known to cover" : "unknown"})`, async (t) => {
    const events = await Effect.runPromise(run(covers))
    t.equal(events[0], "dispatch first", "the first segment goes to the pool first")
    t.match(events[1], /^reserve \d+$/, "then the reservation, before anything else")
    t.ok(events.indexOf("audio 0") > 1, "no audio before the reservation started")
    t.equal(events.filter((e) => e.startsWith("audio")).length, 3)
    t.equal(events.at(-1), `settle ${Number(events[1]!.split(" ")[1])}`, "settled with the whole cost")
  })
}
