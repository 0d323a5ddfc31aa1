/**
 * A pipeline's start-up is its own phase, never a request's (issue 38, item 2: under load the
 * first chunk of a pair timed out four times in a row, its 10 s spent on the programs loading).
 * The start is made slow deterministically: the pipeline's first step waits on a FIFO that only
 * the test opens, so a request that arrives meanwhile must be refused with `Starting` at once,
 * and one after the start gets its answer. `cat` stands in for Apertium (null-flush: it echoes
 * each request, `\0` included, which reads back as the request's text).
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import t from "tap"
import { ApertiumProcess, type ApertiumProcessError, type ApertiumState } from "../../../engines/translate/ApertiumProcess.ts"

type Teardown = { teardown: (fn: () => unknown) => void }

/** A FIFO the pipeline's start waits on, and the call that lets one waiting start through. */
const gate = (t: Teardown) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "apertium-gate-"))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const fifo = path.join(dir, "gate")
  execFileSync("mkfifo", [fifo])
  // Opening for writing waits for the pipeline to open it for reading; closing gives it EOF.
  return { pipeline: `cat '${fifo}' > /dev/null; exec cat`, open: () => fs.promises.writeFile(fifo, "") }
}

/** The next time the process enters `state`. */
const entered = (states: Array<{ state: ApertiumState; resolve: () => void }>, state: ApertiumState) =>
  new Promise<void>((resolve) => states.push({ state, resolve }))

const gated = (t: Teardown, timeoutMs = 10_000) => {
  const g = gate(t)
  const waiting: Array<{ state: ApertiumState; resolve: () => void }> = []
  const p = new ApertiumProcess({
    pipeline: () => Promise.resolve(g.pipeline),
    timeoutMs,
    maxQueue: 16,
    onStateChange: (state) => {
      for (const w of waiting.splice(0)) (w.state === state ? w.resolve() : waiting.push(w))
    }
  })
  t.teardown(() => p.close())
  return { p, open: g.open, entered: (state: ApertiumState) => entered(waiting, state) }
}

const reasonOf = (promise: Promise<unknown>) => promise.then(() => "answered", (e: ApertiumProcessError) => e.reason)

t.test("a request while the pair starts is refused at once with Starting, and answered once started", async (t) => {
  const { p, open } = gated(t)
  t.equal(p.state, "idle")
  const ready = p.start()
  t.equal(p.state, "starting")
  t.equal(await reasonOf(p.translate("hello")), "Starting", "refused at once, not queued behind the start")
  t.equal(p.admit()?.reason, "Starting", "the route's check says the same")
  await open()
  await ready
  t.equal(p.state, "ready")
  t.equal(await p.translate("hello"), "hello", "answered once started")
  t.equal(p.starts, 1, "one start: the refused requests did not start another")
})

t.test("a first request starts an idle pair in the background and is told to come back", async (t) => {
  const { p, open, entered } = gated(t)
  const ready = entered("ready")
  t.equal(await reasonOf(p.translate("hello")), "Starting")
  t.equal(p.state, "starting", "the request started it")
  await open()
  await ready
  t.equal(await p.translate("again"), "again")
})

t.test("a pipeline that dies is restarted without a request: requests meanwhile get Starting", async (t) => {
  const { p, open, entered } = gated(t)
  const first = p.start()
  await open()
  await first
  const restarting = entered("starting")
  process.kill(-p.pid!, "SIGKILL")
  await restarting
  t.equal(p.starts, 2, "restarted as soon as the death was seen")
  t.equal(await reasonOf(p.translate("x")), "Starting")
  const ready = entered("ready")
  await open()
  await ready
  t.equal(await p.translate("back"), "back")
})

t.test("a failed start is the answer until a later request starts it again", async (t) => {
  const p = new ApertiumProcess({ pipeline: () => Promise.resolve("exit 3"), timeoutMs: 10_000, maxQueue: 4 })
  t.teardown(() => p.close())
  t.equal(await reasonOf(p.start()), "Failed")
  t.equal(p.state, "failed")
  t.equal(await reasonOf(p.translate("x")), "Failed", "the failure, not Starting")
  t.equal(p.state, "starting", "and that request began another start")
})
