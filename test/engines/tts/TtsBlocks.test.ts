/**
 * Block-wise synthesis (issue: first audio before the sentence is done), below the pool:
 * espeak-ng's blocks add up to its whole synthesis, a sink that says stop ends it at that block,
 * and the `tts.synthesize` task emits, at every output rate, exactly the PCM it returns when run
 * whole (the first block alone, the rest joined into pieces), and stops after the block during
 * which its caller went away.
 */
import t from "tap"
import { concatFloat32, concatInt16, int16ToFloat } from "../../../engines/audio/Pcm.ts"
import { EspeakTts } from "../../../engines/tts/EspeakTts.ts"
import { ttsTasks, type PcmBlock, type SynthesizeOutput, type SynthesizeSummary } from "../../../engines/tts/tasks.ts"
import type { TaskContext } from "../../../engines/tasks.ts"
import { findPreset } from "../../../engines/tts/Voices.ts"

const voice = findPreset("mari")!.engineVoice
const TEXT = "Tere hommikust, kallis sõber, täna räägime natuke ilmast ja loodusest ning sellest, mis homme juhtub."
const engine = await EspeakTts.load()

t.test("espeak-ng: its blocks are its whole synthesis, sample for sample, with the same word timings", async (t) => {
  const whole = await engine.synthesize({ text: TEXT, voice, speed: 1 })
  const blocks: Array<Float32Array> = []
  let s16 = 0
  const streamed = await engine.synthesizeBlocks({ text: TEXT, voice, speed: 1 }, (b) => {
    if (b instanceof Int16Array) s16++
    blocks.push(b instanceof Int16Array ? int16ToFloat(b) : b)
    return true
  })
  t.ok(blocks.length > 10, `${blocks.length} blocks`)
  t.equal(s16, blocks.length, "espeak-ng hands over its own s16 samples")
  t.same(concatFloat32(blocks), whole.samples)
  t.equal(streamed.sampleCount, whole.samples.length)
  t.same(streamed.words, whole.words)
  t.equal(streamed.stopped, false)
})

t.test("espeak-ng: a sink that says stop ends the synthesis at that block", async (t) => {
  let calls = 0
  const result = await engine.synthesizeBlocks({ text: TEXT, voice, speed: 1 }, () => ++calls < 2)
  t.equal(calls, 2, "no block after the one that said stop")
  t.equal(result.stopped, true)
  // The runtime is restored before each use: the next synthesis is complete and unchanged.
  const again = await engine.synthesize({ text: TEXT, voice, speed: 1 })
  const first = await engine.synthesize({ text: TEXT, voice, speed: 1 })
  t.same(again.samples, first.samples)
})

const task = ttsTasks["tts.synthesize"]
const context = (emit?: TaskContext["emit"], cancelled = () => false): TaskContext => ({ kind: "tts.synthesize", threadId: 0, emit, cancelled })

for (const sampleRate of [22050, 24000, 16000, 8000, 44100]) {
  t.test(`tts.synthesize at ${sampleRate} Hz: the streamed blocks are the whole PCM`, async (t) => {
    const input = { text: TEXT, voice, speed: 1, sampleRate }
    const whole = (await task(input, context())) as unknown as { value: SynthesizeOutput }
    const blocks: Array<Int16Array> = []
    const summary = (await task(input, context((piece) => blocks.push((piece as PcmBlock).pcm)))) as SynthesizeSummary
    t.ok(blocks.length >= 5, `${blocks.length} pieces`)
    t.ok(blocks[0]!.length <= sampleRate * 0.11, `the first piece is the engine's first block (${blocks[0]!.length} samples), sent alone`)
    t.ok(blocks[1]!.length <= sampleRate * 0.11, "so is the second (the WebSocket's first frame waits for it)")
    // Then pieces of 0.5 s, 1 s, 2 s, 2 s … (at least; the last one holds what is left).
    const least = blocks.slice(2, -1).map((_, k) => Math.round(sampleRate * Math.min(0.5 * 2 ** k, 2)))
    t.ok(blocks.slice(2, -1).every((b, k) => b.length >= least[k]!), `later blocks are joined into growing pieces: ${blocks.map((b) => (b.length / sampleRate).toFixed(2)).join(", ")} s`)
    t.ok(blocks.slice(2, -1).every((b, k) => b.length < least[k]! + sampleRate * 0.11), "each piece goes as soon as it is full (within one engine block)")
    t.same(concatInt16(blocks), whole.value.pcm, "byte-identical")
    t.equal(summary.samples, whole.value.pcm.length)
    t.same(summary.words, whole.value.words)
  })
}

t.test("tts.synthesize stops after the block during which the caller went away", async (t) => {
  let emitted = 0
  let gone = false
  const summary = (await task({ text: TEXT, voice, speed: 1, sampleRate: 24000 }, context(() => {
    emitted++
    gone = true // the caller leaves while the first block is on its way
  }, () => gone))) as SynthesizeSummary
  t.equal(emitted, 1, "one block, then nothing")
  t.ok(summary.samples < 24000, `${summary.samples} samples made, not the sentence's ${(24000 * 6).toLocaleString()}+`)
})
