/**
 * Silero VAD v6 on onnxruntime-node: finds the speech islands of speech + silence + speech made
 * by Flite (edges within ±150 ms of Flite's own first and last word), in digital silence and in
 * a noise floor; per-call state reset; the `vad.segments` task with absolute times; blocks with
 * the state carried (`continueProbabilities`, task `vad.probabilities`) give exactly the
 * probabilities of one pass, for any cut into whole frames (property-based).
 * Speed is printed, never asserted.
 */
import fc from "fast-check"
import t, { type Test } from "tap"
import { concatInt16 } from "../../../engines/audio/Pcm.ts"
import { SileroVad, VAD_FRAME_MS, VAD_FRAME_SAMPLES, VadError } from "../../../engines/vad/SileroVad.ts"
import { vadTasks, type VadProbabilitiesOutput, type VadSegmentsOutput } from "../../../engines/vad/tasks.ts"
import type { VadCarry } from "../../../engines/vad/SileroVad.ts"
import { VAD_DEFAULTS } from "../../../engines/vad/SpeechSegments.ts"
import { disposeFlite, speak, type Utterance } from "../asr/speechFixtures.ts"

const vad = await SileroVad.load()
t.teardown(() => vad.dispose())
t.teardown(disposeFlite)

const RATE = 16000
/** Deterministic white noise at about `dbfs` RMS (uniform, so peak = RMS × √3). */
const noise = (ms: number, dbfs: number, seed = 1): Int16Array => {
  const out = new Int16Array((ms * RATE) / 1000)
  const peak = 32768 * 10 ** (dbfs / 20) * Math.sqrt(3)
  let s = seed
  for (let i = 0; i < out.length; i++) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0
    out[i] = Math.round(((s >>> 8) / 0x800000 - 1) * peak)
  }
  return out
}
const silence = (ms: number) => new Int16Array((ms * RATE) / 1000)
const mix = (a: Int16Array, b: Int16Array) => a.map((x, i) => Math.max(-32768, Math.min(32767, x + (b[i] ?? 0))))

const a = await speak("The weather is nice today and we are going to the park.", "slt")
const b = await speak("Please call me back when you get this message.", "rms")

/** Flite's first word start and last word end, shifted to where the utterance sits. */
const island = (u: Utterance, atMs: number) => ({ startMs: atMs + u.words[0]!.startMs, endMs: atMs + u.words.at(-1)!.endMs })
const lengthMs = (pcm: Int16Array) => (pcm.length * 1000) / RATE

const recording = concatInt16([silence(1000), a.pcm, silence(2000), b.pcm, silence(1000)])
const expected = [island(a, 1000), island(b, 1000 + lengthMs(a.pcm) + 2000)]

const closeTo = (t: Test, got: { startMs: number; endMs: number }, want: { startMs: number; endMs: number }, label: string, within = 150) =>
  t.ok(Math.abs(got.startMs - want.startMs) <= within && Math.abs(got.endMs - want.endMs) <= within,
    `${label}: ${got.startMs}–${got.endMs} ms vs speech at ${want.startMs.toFixed(0)}–${want.endMs.toFixed(0)} ms (±${within})`)

t.test("speech + silence + speech: two islands, edges within ±150 ms", async (t) => {
  const r = await vad.segments(recording, { padMs: 0 })
  t.equal(r.probabilities.length, Math.ceil(recording.length / VAD_FRAME_SAMPLES), "one probability per 512 samples")
  t.ok(r.probabilities.every((p) => p >= 0 && p <= 1))
  t.equal(r.segments.length, 2, JSON.stringify(r.segments))
  r.segments.forEach((s, i) => closeTo(t, s, expected[i]!, `island ${i + 1}`))
  const started = performance.now()
  const padded = await vad.segments(recording) // timed: the session is warm now
  const ms = performance.now() - started
  t.equal(padded.segments.length, 2)
  t.same(padded.segments, r.segments.map((s) => ({ startMs: Math.max(0, s.startMs - VAD_DEFAULTS.padMs), endMs: s.endMs + VAD_DEFAULTS.padMs })), `default padding: ${VAD_DEFAULTS.padMs} ms each side`)
  const perFrame = ms / r.probabilities.length
  t.comment(`measured: model load ${vad.loadMs.toFixed(0)} ms, ${perFrame.toFixed(3)} ms per ${VAD_FRAME_MS} ms frame (${(lengthMs(recording) / ms).toFixed(0)}× real time)`)
})

t.test("the same islands over a noise floor at -50 dBFS", async (t) => {
  // Measured: the ends move out by up to ~30 ms (9024 vs 8992), past ±150 ms of Flite's last
  // word end for the rms voice (its final consonant's release outlasts Flite's phone timing).
  const noisy = mix(recording, noise(lengthMs(recording), -50))
  const r = await vad.segments(noisy, { padMs: 0 })
  t.equal(r.segments.length, 2, JSON.stringify(r.segments))
  r.segments.forEach((s, i) => closeTo(t, s, expected[i]!, `island ${i + 1}`, 200))
})

t.test("silence and noise alone are not speech", async (t) => {
  t.same((await vad.segments(silence(3000))).segments, [])
  t.same((await vad.segments(noise(3000, -40))).segments, [])
  t.same((await vad.segments(new Int16Array(0))).segments, [], "empty input")
  t.same((await vad.segments(new Int16Array(100))).probabilities.length, 1, "a partial frame is zero-padded")
})

t.test("state is reset per call; Int16 and Float32 agree", async (t) => {
  const first = await vad.probabilities(b.pcm)
  await vad.probabilities(a.pcm)
  t.same(await vad.probabilities(b.pcm), first, "same input, same probabilities, after other audio")
  const float = await vad.probabilities(Float32Array.from(b.pcm, (x) => x / 32768))
  t.ok(float.every((p, i) => Math.abs(p - first[i]!) < 1e-6), "Float32 in [-1, 1] gives the same")
})

t.test("vad.segments: absolute times, optional probabilities moved out", async (t) => {
  const offset = RATE * 60
  const plain = (await vadTasks["vad.segments"]({ pcm: recording.slice(), sampleOffset: offset })) as VadSegmentsOutput
  t.equal(plain.frameMs, VAD_FRAME_MS)
  t.equal(plain.probabilities, undefined)
  const local = await vad.segments(recording)
  t.same(plain.segments, local.segments.map((s) => ({ startMs: s.startMs + 60_000, endMs: s.endMs + 60_000 })), "every time + 60 000 ms")
  const withProbs = await vadTasks["vad.segments"]({ pcm: recording.slice(), withProbabilities: true })
  t.ok("buffers" in withProbs, "a Transfer: the probabilities move, not copy")
  const bad = await Promise.resolve(vadTasks["vad.segments"]({ pcm: recording, options: { threshold: 2 } })).then(() => undefined, (e: unknown) => e)
  t.match(bad, { name: "VadError", reason: "InvalidInput" })
})

t.test("blocks with the state carried give exactly the probabilities of one pass", async (t) => {
  const whole = await vad.probabilities(recording)
  const frames = Math.ceil(recording.length / VAD_FRAME_SAMPLES)
  // Any cut into blocks of whole frames, the last block taking the partial frame.
  await fc.assert(
    fc.asyncProperty(fc.array(fc.integer({ min: 0, max: frames }), { maxLength: 6 }), async (cuts) => {
      const edges = [...new Set([0, ...cuts, frames])].sort((x, y) => x - y).map((f) => Math.min(recording.length, f * VAD_FRAME_SAMPLES))
      const parts: Array<Float32Array> = []
      let carry: VadCarry | undefined
      for (let k = 1; k < edges.length; k++) {
        const r = await vad.continueProbabilities(recording.subarray(edges[k - 1], edges[k]), carry)
        parts.push(r.probabilities)
        carry = r.carry
      }
      const joined = Float32Array.from(parts.flatMap((p) => [...p]))
      return joined.length === whole.length && joined.every((p, i) => p === whole[i])
    }),
    { numRuns: 6 }
  )
  // The pool task: carry in, carry out, buffers moved.
  const half = 100 * VAD_FRAME_SAMPLES
  const first = (await vadTasks["vad.probabilities"]({ pcm: recording.slice(0, half) })) as unknown as { value: VadProbabilitiesOutput; buffers: Array<ArrayBuffer> }
  t.equal(first.buffers.length, 3, "probabilities and carry are moved")
  const second = (await vadTasks["vad.probabilities"]({ pcm: recording.slice(half), carry: first.value.carry })) as unknown as { value: VadProbabilitiesOutput }
  t.same([...first.value.probabilities, ...second.value.probabilities], [...whole], "two task blocks = one pass")
  const bad = await Promise.resolve(vadTasks["vad.probabilities"]({ pcm: recording, carry: { state: new Float32Array(3), context: new Float32Array(64) } })).then(() => undefined, (e: unknown) => e)
  t.match(bad, { name: "VadError", reason: "InvalidInput" })
})

t.test("a missing model is EngineUnavailable naming the npm package", async (t) => {
  const e = await SileroVad.load({ modelPath: "/nonexistent/silero_vad.onnx" }).then(() => undefined, (e: unknown) => e)
  t.ok(VadError.is(e))
  t.match(e, { reason: "EngineUnavailable", message: /@jjhbw\/silero-vad/ })
})
