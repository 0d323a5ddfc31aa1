/**
 * The shared recognition pipeline (engines/asr/Recognizer.ts) on a real worker pool, as both of
 * its callers use it: audio in memory (voice cloning) and audio spilled to a file (the
 * transcriber). Over ~40 s of Flite speech and silence (two VAD blocks), `findSpeech` finds
 * exactly the segments one `vad.segments` pass over the whole PCM finds, from either source;
 * `recognize` answers one result per segment with words inside it; an engine refusal comes
 * back as the TranscriptionError of its reason.
 */
import { Effect, Exit, Layer, ManagedRuntime } from "effect"
import * as fs from "node:fs"
import { open } from "node:fs/promises"
import * as path from "node:path"
import t from "tap"
import { concatInt16 } from "../../../engines/audio/Pcm.ts"
import { pcmInMemory, type PcmSource, PoolRecognizer, Recognizer, VAD_BLOCK_SAMPLES } from "../../../engines/asr/Recognizer.ts"
import { Inference } from "../../../engines/Inference.ts"
import { FfmpegMediaDecoder } from "../../../engines/media/MediaDecoderService.ts"
import { WorkerPool } from "../../../runtime/WorkerPool.ts"
import { disposeFlite, scratchDir, speak } from "./speechFixtures.ts"

t.teardown(disposeFlite)
const silence = (ms: number) => new Int16Array((ms * 16000) / 1000)
const a = await speak("The weather is nice today and we are going to the park.", "slt")
const b = await speak("Please call me back when you get this message.", "rms")
const c = await speak("Thank you very much for your help with the project.", "awb")
const pcm = concatInt16([silence(1000), a.pcm, silence(12_000), b.pcm, silence(14_000), c.pcm, silence(3000)])

const runtime = ManagedRuntime.make(PoolRecognizer.layer.pipe(Layer.provideMerge(WorkerPool.layer({ workers: 2, maxQueue: 64 }))))
t.teardown(() => runtime.dispose())

t.test("in memory and spilled audio: the segments of one pass, words inside them", async (t) => {
  t.ok(pcm.length > VAD_BLOCK_SAMPLES, "the recording spans more than one VAD block")
  const whole = await runtime.runPromise(Effect.flatMap(Inference, (pool) => pool.run("vad.segments", { pcm: pcm.slice() })))
  t.equal(whole.segments.length, 3, "three utterances")

  const inMemory = await runtime.runPromise(Effect.flatMap(Recognizer, (r) => r.findSpeech(pcmInMemory(pcm))))
  t.same(inMemory, whole.segments, "blocks with the state carried find the segments of one pass")

  const spill = path.join(scratchDir(t), "audio.pcm")
  fs.writeFileSync(spill, new Uint8Array(pcm.buffer, pcm.byteOffset, pcm.byteLength))
  const handle = await open(spill, "r")
  t.teardown(() => handle.close())
  const spilled: PcmSource = { samples: pcm.length, read: (from, to) => FfmpegMediaDecoder.make.readSamples(handle, from, to) }
  let held = 0
  const fromSpill = await runtime.runPromise(Effect.flatMap(Recognizer, (r) => r.findSpeech(spilled, { held: (bytes) => Effect.sync(() => void (held = bytes)) })))
  t.same(fromSpill, whole.segments, "the same from the spill file")
  t.equal(held, Math.ceil(pcm.length / 512) * 4, "reports the probabilities it holds")

  const parts = await runtime.runPromise(Effect.flatMap(Recognizer, (r) => r.recognize(pcmInMemory(pcm), inMemory, { language: "en", concurrency: 2 })))
  t.equal(parts.length, inMemory.length, "one result per segment")
  parts.forEach((part, i) => {
    const segment = inMemory[i]!
    t.ok(part.words.length > 0, `segment ${i} has words`)
    t.ok(part.words.every((w) => w.startMs >= segment.startMs - 1 && w.endMs <= segment.endMs + 1), `segment ${i}'s words carry recording times inside it`)
  })
})

t.test("an engine refusal is the TranscriptionError of its reason", async (t) => {
  const exit = await runtime.runPromise(Effect.exit(Effect.flatMap(Recognizer, (r) =>
    r.recognize(pcmInMemory(a.pcm), [{ startMs: 0, endMs: 1000 }], { language: "fr", concurrency: 1 }))))
  t.ok(Exit.isFailure(exit))
  const error = Exit.isFailure(exit) ? (exit.cause.reasons.find((r) => r._tag === "Fail") as { error?: { _tag?: string; reason?: string } } | undefined)?.error : undefined
  t.equal(error?._tag, "TranscriptionError")
  t.equal(error?.reason, "UnsupportedLanguage")
})
