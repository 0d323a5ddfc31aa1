/**
 * PocketSphinx through koffi: the shared ASR conformance suite (Flite → PocketSphinx round trip),
 * the EngineUnavailable paths that name the missing Debian package, the `asr.recognize` task
 * (absolute times), and both new task kinds on real worker threads of the inference pool.
 * Speeds are printed as comments, never asserted.
 */
import { Effect } from "effect"
import t from "tap"
import { threadId as mainThreadId } from "node:worker_threads"
import { concatInt16 } from "../../../engines/audio/Pcm.ts"
import { AsrError } from "../../../engines/asr/AsrEngine.ts"
import { POCKETSPHINX_PACKAGES, PocketSphinxAsr } from "../../../engines/asr/PocketSphinxAsr.ts"
import { asrTasks, type RecognizeOutput } from "../../../engines/asr/tasks.ts"
import type { VadSegmentsOutput } from "../../../engines/vad/tasks.ts"
import type { TaskContext } from "../../../engines/tasks.ts"
import { WorkerPool } from "../../../runtime/WorkerPool.ts"
import { Inference } from "../../../engines/Inference.ts"
import { asrReasonOf, runAsrConformance } from "./asrConformance.ts"
import { disposeFlite, speak } from "./speechFixtures.ts"

const engine = await PocketSphinxAsr.load()
t.teardown(() => engine.dispose())
t.teardown(disposeFlite)
const ctx: TaskContext = { kind: "asr.recognize", threadId: 0, cancelled: () => false }

t.test("conformance: PocketSphinx en-us", async (t) => {
  const m = await runAsrConformance(t, { engine })
  const perVoice = Object.entries(m.werByVoice).map(([v, w]) => `${v} ${(w * 100).toFixed(1)} %`).join(", ")
  t.comment(`measured: model load ${engine.loadMs.toFixed(0)} ms, RTF ${m.rtf.toFixed(3)}, WER ${(m.wer * 100).toFixed(1)} % (${perVoice})`)
})

t.test("EngineUnavailable names the package that is missing", async (t) => {
  t.equal(PocketSphinxAsr.check(), undefined, "the installed engine passes its own check")
  const noLibrary = await PocketSphinxAsr.load({ libraryPath: "/nonexistent/libpocketsphinx.so.3" }).then(
    () => undefined,
    (e: unknown) => e
  )
  t.ok(AsrError.is(noLibrary), "an AsrError")
  t.match(noLibrary, { reason: "EngineUnavailable", missing: POCKETSPHINX_PACKAGES.library })
  t.match((noLibrary as Error).message, /libpocketsphinx3/, "the message names the Debian package")
  t.match(PocketSphinxAsr.check({ libraryPath: "/nonexistent/libpocketsphinx.so.3" }), { reason: "EngineUnavailable", missing: "libpocketsphinx3" })

  const noModel = PocketSphinxAsr.check({ modelDirectory: "/nonexistent/model" })
  t.match(noModel, { reason: "EngineUnavailable", missing: POCKETSPHINX_PACKAGES.model, message: /pocketsphinx-en-us/ })
  t.equal(await asrReasonOf(PocketSphinxAsr.load({ modelDirectory: "/nonexistent/model" })), "EngineUnavailable", "checked before ps_init (whose E_FATAL would exit)")
  t.equal(await asrReasonOf(PocketSphinxAsr.load({ extraArgs: ["-no_such_option", "1"] })), "EngineUnavailable", "an unknown decoder argument")

  // Through the task: a TaskError whose reason and message survive the trip to the main thread.
  const failed = await Promise.resolve(
    asrTasks["asr.recognize"]({ pcm: new Int16Array(160), sampleOffset: 0, pocketsphinx: { libraryPath: "/nonexistent/libpocketsphinx.so.3" } })
  ).then(() => undefined, (e: unknown) => e)
  t.match(failed, { name: "AsrError", reason: "EngineUnavailable", message: /libpocketsphinx3/ })
})

t.test("asr.recognize: sample offset gives absolute times; bad input refused", async (t) => {
  const u = await speak("Please call me back when you get this message.", "rms")
  const direct = await engine.recognize(u.pcm)
  const offset = 16000 * 42 // the segment starts 42 s into the recording
  const out = await asrTasks["asr.recognize"]({ pcm: u.pcm, sampleOffset: offset })
  t.equal(out.language, "en")
  t.equal(out.durationMs, (u.pcm.length * 1000) / 16000)
  t.same(out.words.map((w) => w.text), direct.words.map((w) => w.text))
  t.ok(out.words.every((w, i) => w.startMs === direct.words[i]!.startMs + 42000 && w.endMs === direct.words[i]!.endMs + 42000), "every time + 42 000 ms")
  const bad = await Promise.resolve(asrTasks["asr.recognize"]({ pcm: u.pcm, sampleOffset: -1 })).then(() => undefined, (e: unknown) => e)
  t.match(bad, { reason: "InvalidInput" })
})

t.test("both task kinds run on real worker threads (koffi and onnxruntime per thread)", async (t) => {
  const a = await speak("The children played in the garden all afternoon.", "slt")
  const b = await speak("Thank you very much for your help with the project.", "awb")
  const gap = new Int16Array(16000 * 2)
  const recording = concatInt16([a.pcm, gap, b.pcm])
  await Effect.runPromise(Effect.gen(function*() {
    const pool = yield* Inference
    const vadInput = recording.slice()
    const vad = yield* pool.run("vad.segments", { pcm: vadInput }, { transfer: [vadInput.buffer] })
    t.equal(vadInput.byteLength, 0, "the PCM moved to the worker")
    t.equal(vad.segments.length, 2, `two speech islands: ${JSON.stringify(vad.segments)}`)
    // Recognise each island on whichever worker is free, in parallel, with absolute times.
    const outputs = yield* Effect.forEach(vad.segments, (s) => {
      const from = Math.floor((s.startMs * 16000) / 1000)
      const pcm = recording.slice(from, Math.ceil((s.endMs * 16000) / 1000))
      return pool.run("asr.recognize", { pcm, sampleOffset: from }, { transfer: [pcm.buffer] })
    }, { concurrency: "unbounded" })
    const text = outputs.flatMap((o) => o.words.map((w) => w.text)).join(" ")
    t.equal(text, "the children played in the garden all afternoon thank you very much for your help with the project")
    const second = outputs[1]!.words[0]!
    t.ok(second.startMs > (a.pcm.length * 1000) / 16000 + 2000 - 200, `the second island's words carry absolute times (${second.startMs} ms)`)
    const pong = yield* pool.ping
    t.not(pong.threadId, mainThreadId)
  }).pipe(Effect.provide(WorkerPool.layer({ workers: 2, maxQueue: 8 }))))
})
