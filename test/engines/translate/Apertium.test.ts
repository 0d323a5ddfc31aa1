/**
 * The Apertium translator for real (Debian's apertium and pairs, installed by scripts/setup.sh):
 * the installed modes, the null-flush request format with every reserved character, one
 * long-lived pipeline serving many requests, and its failures: an aborted request, a pipeline
 * that dies (restarted at once), one that hangs past the timeout, a full queue, missing programs.
 * Start-up as its own phase (refused requests while starting): ApertiumStart.test.ts.
 */
import { Effect, Exit, Fiber, Stream } from "effect"
import fc from "fast-check"
import t from "tap"
import { listApertiumModes, nullFlushPipeline } from "../../../engines/translate/ApertiumModes.ts"
import { ApertiumProcess, type ApertiumProcessError, decodeAnswer, encodeRequest } from "../../../engines/translate/ApertiumProcess.ts"
import { followCase, makeApertiumTranslator } from "../../../engines/translate/ApertiumTranslator.ts"
import { normalizeLanguage } from "../../../engines/translate/LanguageCodes.ts"

const MODES = "/usr/share/apertium/modes"
const modes = listApertiumModes(MODES)
const engSpa = modes.find((m) => m.name === "eng-spa")!

const apertium = (pipeline: () => Promise<string>, options: { timeoutMs?: number; maxQueue?: number } = {}) =>
  new ApertiumProcess({ pipeline, timeoutMs: options.timeoutMs ?? 10_000, maxQueue: options.maxQueue ?? 16 })

/** A pipeline started and warm: requests to one that is not are refused with `Starting`. */
const started = async (p: ApertiumProcess) => {
  await p.start()
  return p
}

t.test("language codes: ISO 639-1, 639-3, 639-2/B and regional tags", async (t) => {
  t.equal(normalizeLanguage("en"), "eng")
  t.equal(normalizeLanguage("EN-us"), "eng")
  t.equal(normalizeLanguage("spa"), "spa")
  t.equal(normalizeLanguage("pt_BR"), "por")
  t.equal(normalizeLanguage("ger"), "deu")
  t.equal(normalizeLanguage("xx"), undefined)
  t.equal(normalizeLanguage("english"), undefined)
  t.equal(normalizeLanguage(""), undefined)
})

t.test("the installed modes: three-letter names, legacy two-letter ones mapped, variants skipped", async (t) => {
  const names = modes.map((m) => `${m.source}-${m.target}`)
  for (const pair of ["eng-spa", "spa-eng", "eng-cat", "cat-eng", "spa-cat", "cat-spa", "spa-por", "por-spa"]) t.ok(names.includes(pair), pair)
  t.equal(modes.find((m) => m.source === "spa" && m.target === "por")?.name, "es-pt", "the legacy es-pt mode serves spa-por")
  t.notOk(modes.some((m) => m.path.includes("_")), "no orthographic variants")
  t.same(listApertiumModes("/nonexistent"), [], "no directory, no pairs")
})

t.test("request format: reserved characters survive the round trip through a real pipeline", async (t) => {
  t.equal(encodeRequest("a\0b\u0007c"), "abc[]\0", "controls are removed, \\0 above all")
  t.equal(encodeRequest("x\r\n\ny"), "x[\n\n]y[]\0", "line breaks become one superblank")
  t.equal(decodeAnswer(" Hola[\n]\\[x\\] \\\\ 5\\$[[t:b:123]]y[]"), " Hola\n[x] \\ 5$y")
  const p = await started(apertium(() => nullFlushPipeline(engSpa)))
  t.teardown(() => p.close())
  const out = await p.translate("The [cat] costs $5 <b> {x} ^y/z @home \\ #1 a*b")
  for (const kept of ["[", "]", "$5", "<", ">", "{", "}", "^", "/", "@", "\\", "#1", "*"]) t.ok(out.includes(kept), `${JSON.stringify(kept)} in ${JSON.stringify(out)}`)
  t.match(await p.translate("hello\n\nworld"), /^hola\n\n\S+$/u, "line breaks come back where they were")
  t.equal(await p.translate(""), "", "an empty request answers empty")
})

t.test("no character in any position wedges any installed pair (a trailing ^ once did)", async (t) => {
  const specials = [..."\\[]^$@*/<>{}#~+|\"'`&%_=;:-", "[[", "]]", "^$", "$^", "\\^", "^^", "{^", "<$", "\ue05e"]
  for (const mode of modes) {
    const p = await started(apertium(() => nullFlushPipeline(mode), { timeoutMs: 3000, maxQueue: 1000 }))
    const wedged: Array<string> = []
    for (const c of specials) {
      for (const text of [c, `a ${c}`, `dog${c}`, `${c} dog`, `the ${c}dog is big.`, `the dog. ${c}`, `${c}\n`, `x ${c} \n\n`]) {
        await p.translate(text).catch((e: ApertiumProcessError) => wedged.push(`${JSON.stringify(text)}: ${e.reason}`))
      }
    }
    p.close()
    t.same(wedged, [], `${mode.name}: every request answered`)
  }
  const p = await started(apertium(() => nullFlushPipeline(engSpa)))
  t.teardown(() => p.close())
  t.match(await p.translate("dog^"), /\^$/u, "a caret comes back as a caret")
  t.notMatch(await p.translate("a \ue05e b"), /\^/u, "the stand-in itself is not smuggled in")
})

t.test("one pipeline, many requests in order; a queued request that is aborted is dropped", async (t) => {
  const p = await started(apertium(() => nullFlushPipeline(engSpa)))
  t.teardown(() => p.close())
  const words = ["house", "dog", "cat", "book", "friend"]
  const answers = await Promise.all(words.map((w) => p.translate(`the ${w}`)))
  t.same(answers.map((a) => a.trim().toLowerCase()), ["la casa", "el perro", "el gato", "el libro", "el amigo"], "answers in request order")
  const pid = p.pid
  t.ok(pid !== undefined && p.running)
  const controller = new AbortController()
  const first = p.translate("the cat", controller.signal)
  const second = p.translate("the dog", controller.signal)
  const third = p.translate("the house")
  controller.abort()
  const results = await Promise.allSettled([first, second, third])
  t.equal(results[1]!.status, "rejected")
  t.equal((results[1] as PromiseRejectedResult).reason.reason, "Aborted")
  t.same((results[2] as PromiseFulfilledResult<string>).value.trim().toLowerCase(), "la casa", "the one after it still runs")
  t.equal(p.pid, pid, "the same pipeline throughout")
})

t.test("a pipeline that dies is restarted at once, before any request asks", async (t) => {
  const states: Array<string> = []
  let restarted: () => void = () => {}
  const ready = new Promise<void>((resolve) => (restarted = resolve))
  const p = new ApertiumProcess({
    pipeline: () => nullFlushPipeline(engSpa),
    timeoutMs: 10_000,
    maxQueue: 16,
    onStateChange: (state) => {
      states.push(state)
      if (state === "ready" && states.length > 2) restarted()
    }
  })
  t.teardown(() => p.close())
  await p.start()
  t.equal((await p.translate("the cat")).trim().toLowerCase(), "el gato")
  const pid = p.pid!
  process.kill(-pid, "SIGKILL")
  await ready
  t.same(states, ["starting", "ready", "starting", "ready"], "the death started a new pipeline")
  t.equal(p.starts, 2)
  t.equal((await p.translate("the dog")).trim().toLowerCase(), "el perro")
  t.not(p.pid, pid)
})

t.test("timeouts, a full queue, and missing programs are errors with a reason", async (t) => {
  // A pipeline that answers its warm-up (4 bytes: "a[]\0"), then reads and never answers.
  const hung = await started(apertium(() => Promise.resolve("head -c 4 > /dev/null; printf '\\0'; cat > /dev/null"), { timeoutMs: 300, maxQueue: 2 }))
  t.teardown(() => hung.close())
  const slow = hung.translate("one")
  const queued = [hung.translate("two"), hung.translate("three")]
  const refused = await hung.translate("four").catch((e: ApertiumProcessError) => e.reason)
  t.equal(refused, "Busy", "one running and a queue of two refuse the fourth")
  t.equal(await slow.catch((e: ApertiumProcessError) => e.reason), "TimedOut")
  t.same(await Promise.all(queued.map((q) => q.catch((e: ApertiumProcessError) => e.reason))), ["TimedOut", "TimedOut"], "the next ones wait for a fresh pipeline, which hangs too")

  const missing = apertium(() => Promise.resolve("no-such-apertium-program"))
  t.teardown(() => missing.close())
  t.equal(await missing.start().catch((e: ApertiumProcessError) => e.reason), "Unavailable")
  t.equal(await missing.translate("x").catch((e: ApertiumProcessError) => e.reason), "Unavailable", "a request is told why")
  const noMode = apertium(() => nullFlushPipeline({ ...engSpa, path: "/nonexistent/eng-spa.mode" }))
  t.teardown(() => noMode.close())
  t.equal(await noMode.start().catch((e: ApertiumProcessError) => e.reason), "Failed")
})

t.test("property: any text gets an answer and the pipeline stays in step", async (t) => {
  const p = await started(apertium(() => nullFlushPipeline(engSpa)))
  t.teardown(() => p.close())
  await fc.assert(
    fc.asyncProperty(fc.string({ unit: "binary", maxLength: 60 }), async (text) => {
      const out = await p.translate(text)
      if (typeof out !== "string") return false
      // Still in step: a known sentence right after gets its own answer, not a stale one.
      return (await p.translate("the dog")).trim().toLowerCase() === "el perro"
    }),
    { numRuns: 60 }
  )
  t.pass("no desynchronisation")
})

t.test("the Translator: pairs, sentence-by-sentence pieces, the source's case, interruption", async (t) => {
  await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const translator = yield* makeApertiumTranslator({ modesDir: MODES, warm: ["eng-spa"] })
    yield* translator.warm("eng", "spa")
    const pairs = yield* translator.pairs
    t.ok(pairs.some((p) => p.source === "eng" && p.target === "spa" && p.engine === "apertium" && p.mode === "eng-spa"))
    const pieces = yield* Stream.runCollect(translator.translate({ text: "The cat is black. The dog is white!\nGood night.", source: "eng", target: "spa", context: "" }))
    t.same(pieces, ["El gato es negro. ", "El perro es blanco!\n", "Noche buena."], "one piece per sentence, each with the gap that followed it")
    const lower = yield* Stream.runCollect(translator.translate({ text: "we need to decide", source: "eng", target: "spa", context: "" }))
    t.equal(lower.join(""), "necesitamos decidir", "a chunk that starts in lower case is not capitalised")
    const token = "x".repeat(2500)
    const cut = (yield* Stream.runCollect(translator.translate({ text: token, source: "eng", target: "spa", context: "" }))).join("")
    t.equal(cut, token, "a run cut by the segmenter (no gap) is joined without a space")
    const unsupported = yield* Effect.exit(Stream.runCollect(translator.translate({ text: "x", source: "eng", target: "deu", context: "" })))
    t.ok(Exit.isFailure(unsupported))
    // Interrupting a long chunk drops the sentences not yet written.
    const long = Array.from({ length: 200 }, (_, i) => `Sentence number ${i} is here.`).join(" ")
    const fiber = yield* Effect.forkChild(Stream.runCollect(translator.translate({ text: long, source: "eng", target: "spa", context: "" })))
    yield* Fiber.interrupt(fiber)
    const after = yield* Stream.runCollect(translator.translate({ text: "the house", source: "eng", target: "spa", context: "" }))
    t.equal(after.join(""), "la casa", "the pipeline serves the next request (lower case as the source)")
  })))
  t.equal(followCase("and then", "Y entonces"), "y entonces")
  t.equal(followCase("And then", "Y entonces"), "Y entonces")
  t.equal(followCase("123 go", " ¡Vamos"), " ¡vamos")
})
