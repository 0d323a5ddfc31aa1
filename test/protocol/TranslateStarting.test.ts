/**
 * A translation pair whose Apertium pipeline is still starting, through the real server (issue
 * 38, item 2): the warm-up at start-up runs in the background (the instance is ready at once and
 * /readyz and /metrics show the pair starting), a chunk for the pair meanwhile gets 503
 * `engine_starting` with Retry-After in the spec's error body (JSON and SSE alike, before any
 * stream starts), and once the pipeline is up the same chunk is translated.
 *
 * The start is held deterministically: `lt-proc` is shadowed on PATH by a wrapper whose first
 * stage of the pipeline (the morphological analyser, `*.automorf.bin`) waits on a FIFO that only
 * the test opens; every other call runs the real program.
 */
import { Effect } from "effect"
import t from "tap"
import { holdApertiumStarts, realLtProc } from "../support/heldApertium.ts"
import { startTestService } from "../support/service.ts"

t.test("a pair still starting answers 503 engine_starting with Retry-After, then translates", { skip: realLtProc === "" && "Apertium is not installed" }, async (t) => {
  const { openGate } = holdApertiumStarts(t)

  const service = await startTestService(t, { APERTIUM_WARM: "eng-spa", TRANSLATE_RATE_PER_S: "1000", TRANSLATE_BURST: "1000" })
  const ready = await fetch(`${service.siteUrl}/readyz`)
  const readyBody = await ready.json() as { status: string; checks: Record<string, { ok: boolean; error?: string; optional?: boolean }> }
  t.equal(ready.status, 200, "the instance is ready while the pair starts")
  t.match(readyBody.checks.translation, { ok: false, optional: true, error: /starting: eng-spa/u }, "the warm-up at start-up shows in /readyz")
  t.match(await (await fetch(`${service.siteUrl}/metrics`)).text(), /translation_pairs_starting(\{[^}]*\})? 1\b/u, "and in the metrics")

  const chunk = (sse = false) =>
    fetch(`${service.base}/translate/chunk${sse ? "?stream=true" : ""}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ new_source: "The cat is black.", source: "en", target: "es" })
    })
  for (const sse of [false, true]) {
    const res = await chunk(sse)
    t.equal(res.status, 503, sse ? "SSE: refused before the stream starts" : "JSON")
    t.match(res.headers.get("retry-after"), /^\d+$/u, "with Retry-After")
    const body = await res.json() as { detail: { status: string; message: string } }
    t.equal(body.detail.status, "engine_starting")
    t.match(body.detail.message, /starting/u)
  }
  const status = service.translator.status().find((s) => s.mode === "eng-spa")
  t.same(status, { mode: "eng-spa", state: "starting", starts: 1 }, "started once, by the warm-up; the refused requests started nothing more")

  await openGate()
  await Effect.runPromise(service.translator.warm("eng", "spa"))
  const res = await chunk()
  t.equal(res.status, 200)
  t.same(await res.json(), { appended: "El gato es negro." })
  const after = await (await fetch(`${service.siteUrl}/readyz`)).json() as typeof readyBody
  t.same(after.checks.translation, { ok: true }, "ready once started")
})
