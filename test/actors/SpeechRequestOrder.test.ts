/**
 * runSegments with a scripted engine and a recording ledger: the credit reservation (a database
 * statement) starts right after the first segment's synthesis was handed to the pool, not before
 * it (building and writing the statement was ~0.3 ms of the main thread in front of the first
 * audio), and before any audio goes out; except when the balance hint covers the cost and blocks
 * are streamed, where it starts right after the first block is written (so that PostgreSQL does
 * not compete with the worker making that block). Either way it is settled with the whole cost,
 * and a client gone right after the first block is charged for what it got.
 */
import { Effect, Fiber, Layer } from "effect"
import t from "tap"
import { runSegments, type PreparedSpeech } from "../../actors/SpeechRequest.ts"
import { Synthesizer } from "../../actors/Synthesizer.ts"
import { parseOutputFormat } from "../../engines/audio/OutputFormat.ts"
import { segmentSentences } from "../../engines/text/Segmenter.ts"
import { Credits } from "../../storage/Credits.ts"

const text = "The first sentence of this request. The second one follows it here. And a third one ends it."

const run = (covers: boolean, blocks = true, onAudio: (index: number) => void = () => {}, events: Array<string> = []) =>
  Effect.gen(function*() {
    // Each segment's audio, one block of 100 ms, 5 ms after its dispatch.
    const scripted = <A>(request: { text: string }, done: (pcm: Int16Array) => A) =>
      Effect.suspend(() => {
        events.push(`dispatch ${request.text.split(" ")[1]}`)
        return Effect.callback<A>((resume) => {
          setTimeout(() => resume(Effect.succeed(done(new Int16Array(2400)))), 5)
        })
      })
    const synthesizer = {
      synthesizeStream: (request: { text: string }, onBlock: (pcm: Int16Array) => void) =>
        scripted(request, (pcm) => (onBlock(pcm), { samples: pcm.length, sampleRate: 24000, words: [] })),
      synthesize: (request: { text: string }) => scripted(request, (pcm) => ({ pcm, sampleRate: 24000, words: [] })),
      recycle: () => {}
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
    yield* runSegments(speech, { ahead: 2, priority: "realtime", blocks }, {
      block: (_pcm, index) => Effect.sync(() => (events.push(`audio ${index}`), onAudio(index)))
    }).pipe(Effect.provide(Layer.mergeAll(
      Layer.succeed(Synthesizer, synthesizer as never),
      Layer.succeed(Credits, credits as never)
    )))
    return events
  })

for (const [covers, blocks] of [[false, true], [false, false], [true, false]] as const) {
  t.test(`the reservation starts right after the first hand-off (balance ${covers ? "known to cover" : "unknown"}, ${blocks ? "streamed blocks" : "whole segments"})`, async (t) => {
    const events = await Effect.runPromise(run(covers, blocks))
    t.equal(events[0], "dispatch first", "the first segment goes to the pool first")
    t.match(events[1], /^reserve \d+$/, "then the reservation, before anything else")
    t.ok(events.indexOf("audio 0") > 1, "no audio before the reservation started")
    t.equal(events.filter((e) => e.startsWith("audio")).length, 3)
    t.equal(events.at(-1), `settle ${Number(events[1]!.split(" ")[1])}`, "settled with the whole cost")
  })
}

t.test("balance known to cover, streamed blocks: the reservation starts right after the first block is written", async (t) => {
  const events = await Effect.runPromise(run(true))
  t.equal(events[0], "dispatch first")
  t.equal(events[1], "audio 0", "the first block goes out before the statement starts")
  t.match(events[2], /^reserve \d+$/, "the reservation follows it, before anything else")
  t.equal(events.filter((e) => e.startsWith("audio")).length, 3)
  t.equal(events.at(-1), `settle ${Number(events[2]!.split(" ")[1])}`, "settled with the whole cost")
})

t.test("a client gone the moment its first block was written (hint, streamed) is charged for that block", async (t) => {
  const events: Array<string> = []
  const firstSentence = segmentSentences(text, { locale: "en" })[0]!
  const fiber: Fiber.Fiber<Array<string>, unknown> = Effect.runFork(run(true, true, (index) => {
    // As an HTTP abort does: the request's fiber is interrupted from outside, here mid-write.
    if (index === 0) fiber.interruptUnsafe()
  }, events))
  const exit = await Effect.runPromise(Fiber.await(fiber))
  t.equal(exit._tag, "Failure", "interrupted")
  t.same(events.slice(0, 2), ["dispatch first", "audio 0"])
  t.match(events[2], /^reserve \d+$/, "the reservation started all the same")
  t.equal(events.at(-1), `settle ${firstSentence.charEnd}`, "settled with the characters of the block that went out")
  t.notOk(events.includes("audio 1"), "nothing after the interruption")
})
