/**
 * The OpenAI-compatible client against a chat server written here (test/support/fakeOpenAi.ts):
 * streamed and plain answers, 429 and 5xx retried before the first content (Retry-After obeyed),
 * a stream broken after content is final, stalls and slow answers time out, a refused address
 * never connects, and interrupting the stream aborts the upstream request. Then the two LLM
 * engines on top: the translator's messages and pieces, the summarizer's JSON with cited units.
 */
import { Effect, Exit, Fiber, Stream } from "effect"
import t from "tap"
import { type ChatEndpoint, chatStream, chatText, retryAfterMs } from "../../../engines/llm/ChatCompletions.ts"
import { makeLlmSummarizer, parseSummary, unitsWithinBudget } from "../../../engines/summary/LlmSummarizer.ts"
import { sentenceUnits } from "../../../engines/summary/Sentences.ts"
import { findTemplate } from "../../../engines/summary/SummaryTemplates.ts"
import { makeLlmTranslator } from "../../../engines/translate/LlmTranslator.ts"
import { makeOutboundGuard } from "../../../storage/OutboundAddress.ts"
import { startFakeOpenAi } from "../../support/fakeOpenAi.ts"

const fake = await startFakeOpenAi()
t.teardown(() => fake.close())

const open = makeOutboundGuard({ allowPrivate: true })
const endpoint = (over: Partial<ChatEndpoint> = {}): ChatEndpoint => ({
  baseUrl: new URL(fake.url),
  model: "fake-model",
  apiKey: "sk-test",
  timeoutMs: 5000,
  idleMs: 2000,
  maxRetries: 3,
  pin: (host) => Effect.runPromise(open.check(host).pipe(Effect.map((x) => x.lookup))),
  ...over
})
const messages = [{ role: "user" as const, content: "hi" }]
const collect = (e: ChatEndpoint) => Effect.runPromise(Effect.exit(Stream.runCollect(chatStream(e, messages))))
const failure = (exit: Exit.Exit<unknown, unknown>) => (Exit.isFailure(exit) ? JSON.stringify(exit.cause) : "succeeded")

t.beforeEach(() => void fake.requests.splice(0))

t.test("a streamed answer arrives piece by piece; model, key and stream flag are sent", async (t) => {
  fake.script({ pieces: ["Hola", ", ", "mundo"] })
  const exit = await collect(endpoint())
  t.same(Exit.isSuccess(exit) ? exit.value : failure(exit), ["Hola", ", ", "mundo"])
  t.equal(fake.requests[0]!.body.model, "fake-model")
  t.equal(fake.requests[0]!.body.stream, true)
  t.equal(fake.requests[0]!.authorization, "Bearer sk-test")
})

t.test("a plain JSON answer to a stream request is one piece", async (t) => {
  fake.script({ pieces: ["all ", "at once"], plainJson: true })
  t.equal(await Effect.runPromise(chatText(endpoint(), messages)), "all at once")
})

t.test("429 then success: retried after Retry-After; 5xx likewise", async (t) => {
  fake.script({ status: 429, retryAfter: "0" }, { status: 503 }, { pieces: ["fine"] })
  t.equal(await Effect.runPromise(chatText(endpoint(), messages)), "fine")
  t.equal(fake.requests.length, 3)
  t.equal(retryAfterMs("2"), 2000)
  t.equal(retryAfterMs(new Date(Date.now() + 5000).toUTCString())! > 3000, true, "an HTTP date")
  t.equal(retryAfterMs("soon"), undefined)
})

t.test("still 429 after the retries: RateLimited; 400 is not retried", async (t) => {
  fake.script({ status: 429, retryAfter: "0" }, { status: 429, retryAfter: "0" })
  t.match(failure(await collect(endpoint({ maxRetries: 1 }))), /RateLimited.*429/)
  t.equal(fake.requests.length, 2)
  fake.requests.splice(0)
  fake.script({ status: 400 })
  t.match(failure(await collect(endpoint())), /"Failed".*HTTP 400: scripted 400/)
  t.equal(fake.requests.length, 1, "a client error is final")
  fake.script({ status: 401 })
  t.match(failure(await collect(endpoint())), /Unavailable/)
})

t.test("a stream broken after content fails (no retry would repeat it); before content it is retried", async (t) => {
  fake.script({ pieces: ["Hola", " mundo"], breakAfter: 1 })
  const exit = await collect(endpoint())
  t.match(failure(exit), /Failed/)
  t.equal(fake.requests.length, 1)
  fake.requests.splice(0)
  fake.script({ pieces: ["x"], breakAfter: 0 }, { pieces: ["again"] })
  t.equal(await Effect.runPromise(chatText(endpoint(), messages)), "again")
  t.equal(fake.requests.length, 2)
})

t.test("a stalled stream times out on idleMs; a slow one on timeoutMs", async (t) => {
  fake.script({ pieces: ["a", "b"], stallAfter: 1 })
  t.match(failure(await collect(endpoint({ idleMs: 300 }))), /TimedOut.*sent nothing/)
  fake.script({ pieces: ["a", "b", "c", "d"], delayMs: 150 })
  t.match(failure(await collect(endpoint({ timeoutMs: 300, idleMs: 5000 }))), /TimedOut.*longer than/)
})

t.test("an address the guard refuses is never connected to", async (t) => {
  const strict = makeOutboundGuard({ allowPrivate: false })
  const exit = await collect(endpoint({ pin: (host) => Effect.runPromise(strict.check(host).pipe(Effect.map((x) => x.lookup))) }))
  t.match(failure(exit), /Unavailable.*not a public address/)
  t.equal(fake.requests.length, 0)
  const down = await collect(endpoint({ baseUrl: new URL("http://127.0.0.1:1/v1"), maxRetries: 1 }))
  t.match(failure(down), /Unavailable.*ECONNREFUSED/)
})

t.test("interrupting the stream aborts the upstream request", async (t) => {
  const before = fake.abandoned()
  fake.script({ pieces: Array.from({ length: 50 }, (_, i) => `${i} `), delayMs: 50 })
  await Effect.runPromise(Effect.gen(function*() {
    const fiber = yield* Effect.forkChild(Stream.runDrain(chatStream(endpoint(), messages)))
    yield* Effect.sleep("200 millis")
    yield* Fiber.interrupt(fiber)
  }))
  for (let i = 0; i < 50 && fake.abandoned() === before; i++) await new Promise((r) => setTimeout(r, 20))
  t.equal(fake.abandoned(), before + 1, "the server saw the client go")
})

t.test("the LLM translator: every pair of the language table, context in the prompt, pieces as they come", async (t) => {
  const translator = makeLlmTranslator(endpoint({ idleMs: 500 }))
  const pairs = await Effect.runPromise(translator.pairs)
  t.ok(pairs.some((p) => p.source === "eng" && p.target === "jpn" && p.engine === "llm" && p.mode === "fake-model"))
  fake.script({ pieces: ["y luego", " se fue"] })
  const out = await Effect.runPromise(Stream.runCollect(translator.translate({ text: "and then he left", source: "eng", target: "spa", context: "Llegó tarde." })))
  t.same(out, ["y luego", " se fue"])
  const sent = fake.requests[0]!.body.messages!
  t.match(sent[0]!.content, /from English to Spanish/)
  t.match(sent[1]!.content, /Llegó tarde\.[\s\S]*and then he left/)
  fake.script(...Array.from({ length: 4 }, () => ({ status: 500, retryAfter: "1" })))
  const failed = await Effect.runPromise(Effect.exit(Stream.runCollect(translator.translate({ text: "x", source: "eng", target: "spa", context: "" }))))
  t.match(failure(failed), /EngineFailed.*scripted 500.*TranslatorError/)
})

const spoken = (lines: ReadonlyArray<readonly [string, string]>) => {
  let at = 0
  return lines.flatMap(([speaker, line]) => {
    const ws = line.split(" ").map((text) => ({ text, start: at, end: (at += 0.3) - 0.05, speaker }))
    at += 1
    return ws
  })
}

t.test("the LLM summarizer: transcript as numbered units, JSON with cited units, times from the transcript", async (t) => {
  const words = spoken([["speaker_0", "we decided to ship on friday"], ["speaker_1", "i will write the release notes"], ["speaker_0", "thanks everyone"]])
  const summarizer = makeLlmSummarizer(endpoint())
  const answer = {
    sections: {
      overview: [{ text: "The team planned the release.", units: [0, 1] }],
      key_points: ["Shipping on Friday."],
      decisions: [{ text: "Ship on Friday.", units: [0] }],
      action_items: [{ text: "Write the release notes.", owner: "Ana", units: [1] }, { text: "" }, 42]
    }
  }
  fake.script({ pieces: ["```json\n", JSON.stringify(answer).slice(0, 40), JSON.stringify(answer).slice(40), "\n```"] })
  const out = await Effect.runPromise(summarizer.summarize({ words, language: "en", speakerNames: { speaker_1: "Ana" } }, findTemplate("meeting_notes")!))
  t.equal(out.engine, "llm:fake-model")
  t.same(out.sections.map((s) => s.items.length), [1, 1, 1, 1], "empty and malformed items are dropped")
  t.match(out.sections[0]!.items[0], { text: "The team planned the release.", start: 0, speaker: "speaker_0" })
  t.ok(out.sections[0]!.items[0]!.end! > 2, "the end of the last cited unit")
  t.match(out.sections[3]!.items[0], { owner: "Ana", speaker: "Ana" })
  const prompt = fake.requests[0]!.body.messages!
  t.match(prompt[0]!.content, /"action_items"/)
  t.match(prompt[1]!.content, /\[1\] Ana 0:02: i will write the release notes/)

  fake.script({ pieces: ["I cannot help with that."] })
  const refused = await Effect.runPromise(Effect.exit(summarizer.summarize({ words, language: "en" }, findTemplate("brief")!)))
  t.match(failure(refused), /EngineFailed.*JSON.*SummarizerError/)
  t.same(parseSummary("{\"sections\": 5}", { words, language: "en" }, findTemplate("brief")!, sentenceUnits(words)), undefined)
})

t.test("a long transcript is cut to its most central units within the budget, in order", async (t) => {
  const lines = Array.from({ length: 400 }, (_, i) => ["speaker_0", `point ${i} about the release budget and the servers ${i % 7 === 0 ? "release budget" : "lunch"}`] as const)
  const units = sentenceUnits(spoken(lines))
  const { units: kept, cut } = unitsWithinBudget(units, 4000)
  t.ok(cut)
  t.ok(kept.length > 10 && kept.length < units.length)
  t.same(kept.map((u) => u.index), [...kept.map((u) => u.index)].sort((a, b) => a - b), "in spoken order")
  t.equal(unitsWithinBudget(units.slice(0, 3), 4000).cut, false)
})
