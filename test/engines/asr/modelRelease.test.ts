/**
 * Speech-to-text models are given back when a thread has not used them for a while
 * (STT_MODEL_IDLE_RELEASE_S): `perThreadWhileUsed` on its own with a counted resource, then
 * the real pool with real PocketSphinx and Silero, where the process's resident memory must fall
 * by most of a decoder once the idle time has passed, and recognition must still give the
 * same words afterwards (the model loads again).
 */
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import t from "tap"
import { perThreadWhileUsed } from "../../../engines/tasks.ts"
import { Inference } from "../../../engines/Inference.ts"
import { WorkerPool } from "../../../runtime/WorkerPool.ts"
import { speak } from "./speechFixtures.ts"

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const rssMb = () => Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync("/proc/self/status", "utf8"))![1]) / 1024

/** Polls `check` every 50 ms until it holds or `ms` pass; returns whether it held. */
const eventually = async (check: () => boolean, ms: number) => {
  for (const until = Date.now() + ms; Date.now() < until; await sleep(50)) if (check()) return true
  return check()
}

t.test("perThreadWhileUsed: loads once, holds while used, releases after idle, loads again", async (t) => {
  let loads = 0
  const released: Array<number> = []
  const use = perThreadWhileUsed(() => ({ id: ++loads }), (r) => {
    released.push(r.id)
  })
  const a = await use(30, (r) => r.id)
  const b = await use(30, (r) => r.id)
  t.same([a, b, loads], [1, 1, 1], "one load for two uses")
  // In use far longer than the idle time: never released under a running task.
  await use(30, async () => {
    await sleep(150)
    t.same(released, [], "not released while in use")
  })
  t.ok(await eventually(() => released.length === 1, 5000), "released once idle")
  t.same(released, [1])
  t.equal(await use(30, (r) => r.id), 2, "the next use loads a new one")
  // A use that keeps the resource (no idle time) cancels the pending release.
  await use(undefined, () => undefined)
  await sleep(120)
  t.same(released, [1], "kept when the last use asked for no release")
})

t.test("perThreadWhileUsed: a failed load is forgotten and retried", async (t) => {
  let attempts = 0
  const use = perThreadWhileUsed(() => {
    attempts++
    if (attempts === 1) throw new Error("model missing")
    return "model"
  }, () => {})
  await t.rejects(use(10, (r) => r), /model missing/)
  t.equal(await use(10, (r) => r), "model")
  t.equal(attempts, 2)
})

t.test("a worker gives its PocketSphinx decoder and VAD back after the idle time, and recognises again", async (t) => {
  const utterance = await speak("The children played in the garden all afternoon.", "slt")
  const idleMs = 1500
  await Effect.runPromise(Effect.gen(function*() {
    const pool = yield* Inference
    const recognise = () => {
      const pcm = utterance.pcm.slice()
      return pool.run("asr.recognize", { pcm, sampleOffset: 0, releaseAfterMs: idleMs }, { transfer: [pcm.buffer] })
    }
    const probabilities = () => {
      const pcm = utterance.pcm.slice()
      return pool.run("vad.probabilities", { pcm, releaseAfterMs: idleMs }, { transfer: [pcm.buffer] })
    }
    const before = rssMb()
    yield* probabilities()
    const first = yield* recognise()
    const loaded = rssMb()
    t.ok(loaded - before > 60, `the decoder and VAD took memory (${(loaded - before).toFixed(0)} MB)`)
    const dropped = yield* Effect.promise(() => eventually(() => loaded - rssMb() > 60, 20_000))
    t.ok(dropped, `resident memory fell once idle: ${loaded.toFixed(0)} → ${rssMb().toFixed(0)} MB`)
    const again = yield* recognise()
    t.same(again.words.map((w) => w.text), first.words.map((w) => w.text), "the reloaded decoder gives the same words")
    t.equal(first.words.map((w) => w.text).join(" "), "the children played in the garden all afternoon")
  }).pipe(Effect.provide(WorkerPool.layer({ workers: 1, maxQueue: 4 }))))
})
