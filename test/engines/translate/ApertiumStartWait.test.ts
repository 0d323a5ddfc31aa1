/**
 * A request for a pair that is not running starts it and waits a bounded time for the start
 * (ApertiumTranslator's `startWaitMs`), outside its own timeout: a start that ends within the wait
 * lets the request through (a quiet machine's first chunk of a pair is a 200, not a 503 and a
 * retry), one that does not is `Starting` (503 + Retry-After). The start is held on a FIFO
 * (test/support/heldApertium.ts), so nothing here depends on how fast the machine is.
 */
import { Effect, Exit, Fiber, Scope, Stream } from "effect"
import t from "tap"
import { makeApertiumTranslator } from "../../../engines/translate/ApertiumTranslator.ts"
import type { TranslatorError } from "../../../engines/translate/Translator.ts"
import { holdApertiumStarts, realLtProc } from "../../support/heldApertium.ts"

const MODES_DIR = "/usr/share/apertium/modes"

const translatorWith = async (t: { teardown: (fn: () => unknown) => void }, startWaitMs: number) => {
  const scope = Effect.runSync(Scope.make())
  t.teardown(() => Effect.runPromise(Scope.close(scope, Exit.void)))
  return Effect.runPromise(makeApertiumTranslator({ modesDir: MODES_DIR, warm: "none", startWaitMs }).pipe(Scope.provide(scope)))
}

const reasonOf = (e: Effect.Effect<unknown, TranslatorError>) =>
  Effect.runPromise(e.pipe(Effect.match({ onSuccess: () => "ok", onFailure: (err) => err.reason })))

t.test("a start that ends within the wait lets the request through", { skip: realLtProc === "" && "Apertium is not installed" }, async (t) => {
  const { openGate } = holdApertiumStarts(t)
  const translator = await translatorWith(t, 600_000)
  t.equal(translator.status().find((s) => s.mode === "eng-spa")?.state, "idle", "nothing started before the request")
  const check = Effect.runFork(translator.check("eng", "spa"))
  // The gate opens only once the request's check has started the pipeline (its held stage opened the FIFO).
  await openGate()
  t.ok(Exit.isSuccess(await Effect.runPromise(Fiber.await(check))), "the check waited for the start and passed")
  const text = await Effect.runPromise(Stream.runCollect(translator.translate({ source: "eng", target: "spa", text: "The cat is black.", context: "" })))
  t.same(text.join(""), "El gato es negro.")
  t.equal(translator.status().find((s) => s.mode === "eng-spa")?.starts, 1, "one start")
})

t.test("a start that outlasts the wait is Starting, and goes on in the background", { skip: realLtProc === "" && "Apertium is not installed" }, async (t) => {
  const { openGate } = holdApertiumStarts(t)
  const translator = await translatorWith(t, 0)
  t.equal(await reasonOf(translator.check("eng", "spa")), "Starting")
  t.equal(translator.status().find((s) => s.mode === "eng-spa")?.state, "starting", "the refused request started the pair")
  await openGate()
  await Effect.runPromise(translator.warm("eng", "spa"))
  t.equal(await reasonOf(translator.check("eng", "spa")), "ok", "ready afterwards")
  t.equal(translator.status().find((s) => s.mode === "eng-spa")?.starts, 1, "the refused request's start was the one that finished")
})
