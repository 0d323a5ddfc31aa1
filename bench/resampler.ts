/**
 * CPU cost of the resampler's two kernels (engines/audio/Resampler.ts): the JavaScript loop and
 * the WebAssembly SIMD one (ResamplerKernel.ts), in ms of CPU per second of audio.
 *
 *   npx tsx bench/resampler.ts [--smoke]
 *
 * Each case runs AUDIO_S seconds of 22050 Hz noise (the cost does not depend on the signal)
 * through a stream in 100 ms blocks, once as float and once as s16 in and out (espeak-ng's blocks
 * in the TTS workers, PcmBlocks → pushInt16, whose float → s16 runs inside the SIMD kernel), and
 * once more as a one-shot call; one warm-up round, then the best of ROUNDS, the kernels alternating so that load
 * from elsewhere hits both. CPU time is this process's (process.cpuUsage), single-threaded.
 */
import { floatToInt16 } from "../engines/audio/Pcm.ts"
import { mulberry32 } from "../engines/audio/Prng.ts"
import { resample, Resampler, resamplerKernel, type ResamplerKernelKind, setResamplerKernel } from "../engines/audio/Resampler.ts"
import { smoke } from "./support.ts"

const IN_RATE = 22050
const OUT_RATES = [24000, 8000] as const
const AUDIO_S = smoke ? 2 : 30
const ROUNDS = smoke ? 1 : 5
/** The engine's block, 100 ms at 22050 Hz. */
const BLOCK = 2205

const rnd = mulberry32(12345)
const input = Float32Array.from({ length: IN_RATE * AUDIO_S }, () => rnd() * 1.6 - 0.8)
const input16 = floatToInt16(input)

const cpuMs = (run: () => void): number => {
  const before = process.cpuUsage()
  run()
  const used = process.cpuUsage(before)
  return (used.user + used.system) / 1000
}

const streamed = (outRate: number) => () => {
  const r = new Resampler(IN_RATE, outRate)
  for (let o = 0; o < input.length; o += BLOCK) r.push(input.subarray(o, o + BLOCK))
  r.flush()
}

const streamedInt16 = (outRate: number) => () => {
  const r = new Resampler(IN_RATE, outRate)
  for (let o = 0; o < input16.length; o += BLOCK) r.pushInt16(input16.subarray(o, o + BLOCK))
  floatToInt16(r.flush())
}

const oneShot = (outRate: number) => () => {
  resample(input, IN_RATE, outRate)
}

const available = resamplerKernel() === "simd"
const kernels: ReadonlyArray<ResamplerKernelKind> = available ? ["js", "simd"] : ["js"]
const best = new Map<string, number>()
const note = (key: string, ms: number) => best.set(key, Math.min(best.get(key) ?? Infinity, ms / AUDIO_S))

for (let round = 0; round <= ROUNDS; round++) {
  for (const outRate of OUT_RATES) {
    for (const kernel of kernels) {
      setResamplerKernel(kernel)
      const s = cpuMs(streamed(outRate))
      const s16 = cpuMs(streamedInt16(outRate))
      const o = cpuMs(oneShot(outRate))
      // Round 0 warms the JIT (and tiers the WebAssembly function up) and is not counted.
      if (round > 0) {
        note(`${outRate} ${kernel} stream`, s)
        note(`${outRate} ${kernel} s16`, s16)
        note(`${outRate} ${kernel} oneshot`, o)
      }
    }
  }
}

const fmt = (ms: number | undefined) => (ms === undefined ? "n/a" : `${ms.toFixed(3)} ms`)
console.log(`resampler CPU per audio second, ${AUDIO_S} s of ${IN_RATE} Hz input, best of ${ROUNDS} round(s)${smoke ? " (smoke: numbers mean nothing)" : ""}`)
if (!available) console.log("  WebAssembly SIMD unavailable here: only the JavaScript kernel runs")
for (const outRate of OUT_RATES) {
  for (const form of ["stream", "s16", "oneshot"] as const) {
    const js = best.get(`${outRate} js ${form}`)
    const simd = best.get(`${outRate} simd ${form}`)
    const speedUp = js !== undefined && simd !== undefined ? `  ratio js/simd ${(js / simd).toFixed(1)}x` : ""
    const label = `${IN_RATE} → ${outRate} ${{ stream: "stream, 100 ms blocks", s16: "stream, s16 in and out", oneshot: "one-shot" }[form]}`
    console.log(`  ${label.padEnd(38)} js ${fmt(js)}  simd ${fmt(simd)}${speedUp}`)
  }
}
