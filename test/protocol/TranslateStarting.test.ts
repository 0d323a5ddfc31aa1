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
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect } from "effect"
import t from "tap"
import { startTestService } from "../support/service.ts"

const realLtProc = (() => {
  try {
    return execFileSync("bash", ["-c", "command -v lt-proc"], { encoding: "utf8" }).trim()
  } catch {
    return ""
  }
})()

t.test("a pair still starting answers 503 engine_starting with Retry-After, then translates", { skip: realLtProc === "" && "Apertium is not installed" }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "apertium-shadow-"))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const fifo = path.join(dir, "gate")
  execFileSync("mkfifo", [fifo])
  fs.writeFileSync(path.join(dir, "lt-proc"), `#!/bin/sh
case "$*" in *automorf*) cat '${fifo}' > /dev/null ;; esac
exec '${realLtProc}' "$@"
`, { mode: 0o755 })
  // The service runs in this process and its pipelines inherit this PATH.
  const savedPath = process.env.PATH
  process.env.PATH = `${dir}:${savedPath}`
  t.teardown(() => void (process.env.PATH = savedPath))
  // Opening the FIFO for writing waits for the held stage to open it; closing lets it through.
  const openGate = () => fs.promises.writeFile(fifo, "")

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
