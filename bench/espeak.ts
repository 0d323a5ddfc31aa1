/**
 * espeak-ng's two builds side by side (engines/tts/EspeakNative.ts, Debian's libespeak-ng1, and
 * engines/tts/EspeakRuntime.ts, the bundled wasm2js build): CPU per second of audio and the time
 * to the first 100 ms block, on the same sentences and voices, in one thread of this process.
 *
 *   npx tsx bench/espeak.ts [--smoke]
 *
 * Rounds alternate the builds so that load from elsewhere hits both; round 0 warms the JIT and
 * is not counted. Figures are the median over rounds. Without the Debian package the native
 * column says so and the bench still exits 0 (the bundled build is what runs then).
 */
import { EspeakNative } from "../engines/tts/EspeakNative.ts"
import { EspeakRuntime, type EspeakBlockSink } from "../engines/tts/EspeakRuntime.ts"
import { smoke } from "./support.ts"

const ROUNDS = smoke ? 1 : 7
const VOICES = ["et", "et+f3", "en-us", "de+m3"] as const
const SENTENCES = [
  "Tere hommikust, kallis sõber! Kuidas sul täna läheb?",
  "Ilm on ilus ja päike paistab, nii et lähme jalutama.",
  "The quick brown fox jumps over the lazy dog, twice before breakfast.",
  "Numbers like 1,234.5 and dates like 27 November 2026 are read out in full."
]
const PARAMS = { rateWpm: 175, pitch: 50 }

type Speak = (voice: string, text: string, onBlock: EspeakBlockSink) => number

const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

const measure = (speak: Speak, sampleRate: number) => {
  let samples = 0
  const firstBlocks: Array<number> = []
  const before = process.cpuUsage()
  for (const voice of VOICES) {
    for (const text of SENTENCES) {
      const t0 = performance.now()
      let first = true
      samples += speak(voice, text, () => {
        if (first) firstBlocks.push(performance.now() - t0)
        first = false
        return true
      })
    }
  }
  const used = process.cpuUsage(before)
  return { cpuMsPerAudioS: (used.user + used.system) / 1000 / (samples / sampleRate), firstBlockMs: median(firstBlocks) }
}

const bundled = await EspeakRuntime.load()
const native = EspeakNative.load()
const builds: Array<[string, Speak, number]> = [
  ["bundled (wasm2js 1.52)", (v, t, b) => bundled.withVoice(v, PARAMS, (s) => s.synthesize(t, b)).sampleCount, bundled.sampleRate]
]
if (native !== null) builds.push(["native (libespeak-ng 1.51)", (v, t, b) => native.synthesize(v, PARAMS, t, b).sampleCount, native.sampleRate])
else console.log(`native build unavailable: ${EspeakNative.reason ?? "unknown reason"}`)

const results = new Map<string, Array<{ cpuMsPerAudioS: number; firstBlockMs: number }>>()
for (let round = 0; round <= ROUNDS; round++) {
  for (const [name, speak, rate] of round % 2 === 0 ? builds : [...builds].reverse()) {
    const r = measure(speak, rate)
    if (round > 0) results.set(name, [...(results.get(name) ?? []), r])
  }
}

console.log(`espeak-ng builds, ${VOICES.length} voices x ${SENTENCES.length} sentences, median of ${ROUNDS} rounds (one thread)`)
const summary = new Map<string, { cpu: number; first: number }>()
for (const [name, rs] of results) {
  const cpu = median(rs.map((r) => r.cpuMsPerAudioS))
  const first = median(rs.map((r) => r.firstBlockMs))
  summary.set(name, { cpu, first })
  console.log(`  ${name.padEnd(28)} CPU ${cpu.toFixed(2)} ms per audio second; first 100 ms block p50 ${first.toFixed(3)} ms`)
}
const b = summary.get(builds[0]![0])
const n = builds[1] === undefined ? undefined : summary.get(builds[1][0])
if (b !== undefined && n !== undefined) {
  console.log(`  bundled / native: CPU ${(b.cpu / n.cpu).toFixed(1)}x, first block ${(b.first / n.first).toFixed(1)}x`)
}
