import { Worker } from "node:worker_threads"
import t from "tap"
import { espeakLockBuffer, espeakLocked } from "../../../engines/tts/EspeakLock.ts"

t.test("a thread that ends while holding the lock does not block the others for ever", async (t) => {
  const word = new Int32Array(espeakLockBuffer)
  const worker = new Worker(new URL("../../fixtures/espeakLockDies.mjs", import.meta.url), { workerData: { espeakLock: espeakLockBuffer } })
  const messages: Array<unknown> = []
  worker.on("message", (m) => messages.push(m))
  const code = await new Promise<number>((resolve) => worker.once("exit", resolve))
  t.equal(code, 70)
  t.same(messages, ["holding"], "it held the lock when it ended")
  t.not(word[0], 0, "the lock word still names the dead thread")
  t.equal(espeakLocked(() => "ran"), "ran", "the main thread takes the lock over")
  t.equal(word[0], 0, "and releases it")
})

t.test("the lock excludes: worker threads and this one never overlap inside it", async (t) => {
  // Each holder sets a shared flag, checks nobody else had it, spins ~2 ms, clears it.
  const flag = new Int32Array(new SharedArrayBuffer(8))
  const source = `
    const { workerData, parentPort } = require("node:worker_threads")
    const word = new Int32Array(workerData.lock), flag = new Int32Array(workerData.flag)
    const tid = Number(require("node:fs").readlinkSync("/proc/thread-self").split("/").pop())
    let overlaps = 0
    for (let i = 0; i < 100; i++) {
      while (Atomics.compareExchange(word, 0, 0, tid) !== 0) Atomics.wait(word, 0, Atomics.load(word, 0), 50)
      if (Atomics.add(flag, 0, 1) !== 0) overlaps++
      const until = performance.now() + 0.5; while (performance.now() < until);
      Atomics.sub(flag, 0, 1)
      Atomics.store(word, 0, 0); Atomics.notify(word, 0, 1)
    }
    parentPort.postMessage(overlaps)`
  const workers = [0, 1].map(() => new Worker(source, { eval: true, workerData: { lock: espeakLockBuffer, flag: flag.buffer } }))
  const done = workers.map((w) => new Promise<number>((resolve) => w.once("message", resolve)))
  let mine = 0
  for (let i = 0; i < 50; i++) {
    espeakLocked(() => {
      if (Atomics.add(flag, 0, 1) !== 0) mine++
      const until = performance.now() + 0.5
      while (performance.now() < until);
      Atomics.sub(flag, 0, 1)
    })
    await new Promise((r) => setImmediate(r))
  }
  t.same([mine, ...(await Promise.all(done))], [0, 0, 0], "no overlap anywhere")
})
