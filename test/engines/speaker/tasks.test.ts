import { Effect } from "effect"
import t from "tap"
import { floatToInt16 } from "../../../engines/audio/Pcm.ts"
import { MfccEmbedding } from "../../../engines/speaker/MfccEmbedding.ts"
import { cosine } from "../../../engines/speaker/SpeakerEmbedding.ts"
import { speakerTasks, type SpeakerEmbedOutput, type SpeakerUnitsOutput } from "../../../engines/speaker/tasks.ts"
import { STATS_WIDTH } from "../../../engines/speaker/SpeechUnits.ts"
import { serveTasks, type TaskFailure } from "../../../engines/tasks.ts"
import { WorkerPool } from "../../../runtime/WorkerPool.ts"
import { Inference } from "../../../engines/Inference.ts"
import { disposeSpeakers, speak } from "./speakers.ts"

t.teardown(disposeSpeakers)

const serve = serveTasks(speakerTasks)
const pcm = floatToInt16(await speak("flite:awb", "Speaker embeddings are computed on the worker threads, one per window."))
const windows = [
  { startMs: 0, endMs: 1500 },
  { startMs: 750, endMs: 2250 },
  { startMs: 1500, endMs: 3000 }
]

t.test("speaker.embed: one vector per window, buffers moved", async (t) => {
  const reply = await serve({ kind: "speaker.embed", input: { pcm, windows } })
  t.ok(reply.outcome.ok)
  const out = (reply.outcome as { value: SpeakerEmbedOutput }).value
  t.equal(out.embeddings.length, 3)
  t.equal(out.dimension, MfccEmbedding.dimension)
  t.equal(out.name, MfccEmbedding.name)
  t.ok(out.engineMs >= 0)
  t.same(reply.transfer, out.embeddings.map((v) => v.buffer), "each vector's own buffer is listed for transfer")
  t.equal(new Set(reply.transfer).size, 3, "no buffer listed twice")
  const direct = MfccEmbedding.embedWindows(Float32Array.from(pcm, (s) => s / 32768), windows)
  t.same(out.embeddings.map((v) => Array.from(v)), direct.map((v) => Array.from(v)), "Int16 input = Float32 input / 32768")

  // The same windows in recording time, for a chunk that starts 10 s into the recording.
  const shifted = await serve({ kind: "speaker.embed", input: { pcm, windows: windows.map((w) => ({ startMs: w.startMs + 10_000, endMs: w.endMs + 10_000 })), offsetMs: 10_000 } })
  const moved = (shifted.outcome as { value: SpeakerEmbedOutput }).value
  t.same(moved.embeddings.map((v) => Array.from(v)), direct.map((v) => Array.from(v)), "offsetMs places the chunk in the recording")
})

t.test("speaker.embed: invalid input is a reasoned failure", async (t) => {
  const failure = async (input: unknown) => {
    const reply = await serve({ kind: "speaker.embed", input })
    return reply.outcome.ok ? undefined : (reply.outcome.error as TaskFailure)
  }
  t.match(await failure({ pcm: [1, 2, 3], windows }), { name: "SpeakerEmbeddingError", reason: "InvalidInput" })
  t.match(await failure({ pcm, windows: "all" }), { reason: "InvalidInput" })
  t.match(await failure({ pcm, windows: [null] }), { reason: "InvalidInput" })
  t.match(await failure({ pcm, windows: [{ startMs: 10, endMs: 5 }] }), { name: "SpeakerEmbeddingError", reason: "InvalidInput" })
  t.match(await failure({ pcm, windows, offsetMs: -1 }), { reason: "InvalidInput" })
})

t.test("speaker.embed through a real worker pool", (t) =>
  Effect.runPromise(
    Effect.gen(function*() {
      const pool = yield* Inference
      const copy = pcm.slice()
      const out = yield* pool.run("speaker.embed", { pcm: copy, windows }, { transfer: [copy.buffer as ArrayBuffer] })
      t.equal(copy.length, 0, "the PCM was moved to the worker, not copied")
      t.equal(out.embeddings.length, 3)
      t.ok(out.embeddings.every((v) => v instanceof Float32Array && v.length === MfccEmbedding.dimension))
      const local = MfccEmbedding.embedWindows(Float32Array.from(pcm, (s) => s / 32768), windows)
      t.ok(out.embeddings.every((v, i) => cosine(v, local[i]!) > 0.999999), "same vectors as on the main thread")
    }).pipe(Effect.provide(WorkerPool.layer({ filename: new URL("./speakerWorker.ts", import.meta.url).href, workers: 1, maxQueue: 4 })))
  ))

t.test("speaker.units and speaker.cluster: units in recording time, statistics moved, labels per unit", async (t) => {
  const reply = await serve({ kind: "speaker.units", input: { pcm, segments: [{ startMs: 10_000, endMs: 10_000 + (pcm.length / 16) }], offsetMs: 10_000 } })
  t.ok(reply.outcome.ok)
  const out = (reply.outcome as { value: SpeakerUnitsOutput }).value
  t.ok(out.units.length >= 1 && out.units.every((u) => u.startMs >= 10_000 && u.endMs <= 10_000 + pcm.length / 16 + 10), JSON.stringify(out.units))
  t.equal(out.stats.length, out.units.length * STATS_WIDTH)
  t.same(reply.transfer, [out.stats.buffer], "the statistics are moved")
  const clustered = await serve({ kind: "speaker.cluster", input: { stats: out.stats, units: out.units.length } })
  t.ok(clustered.outcome.ok)
  const labels = (clustered.outcome as { value: { labels: Int32Array } }).value.labels
  t.equal(labels.length, out.units.length)
  t.ok(Array.from(labels).every((l) => l === -1 || l === 0), "one synthetic voice: one speaker")
  const failure = async (kind: "speaker.units" | "speaker.cluster", input: unknown) => {
    const r = await serve({ kind, input } as never)
    return r.outcome.ok ? undefined : (r.outcome.error as TaskFailure)
  }
  t.match(await failure("speaker.units", { pcm: "x", segments: [] }), { reason: "InvalidInput" })
  t.match(await failure("speaker.units", { pcm, segments: [{ startMs: "a", endMs: 1 }] }), { reason: "InvalidInput" })
  t.match(await failure("speaker.units", { pcm, segments: [], offsetMs: Number.NaN }), { reason: "InvalidInput" })
  t.match(await failure("speaker.cluster", { stats: new Float64Array(3), units: 1 }), { reason: "InvalidInput" })
  t.match(await failure("speaker.cluster", { stats: [1, 2], units: 0 }), { reason: "InvalidInput" })
  t.match(await failure("speaker.cluster", { stats: new Float64Array(STATS_WIDTH), units: 1, numSpeakers: 0 }), { reason: "InvalidInput" })
})
