import { readFileSync } from "node:fs"
import t from "tap"
import { resample } from "../../../engines/audio/Resampler.ts"
import { mulberry32 } from "../../../engines/audio/Prng.ts"
import { parseWav } from "../../../engines/audio/Wav.ts"
import { denoise } from "../../../engines/denoise/Rnnoise.ts"

const SPEECH = "/usr/share/pocketsphinx/test/data/librivox/sense_and_sensibility_01_austen_64kb-0870.wav"

/** Real speech, 16 kHz mono, as Int16. */
const loadSpeech = (): Int16Array => {
  const wav = parseWav(new Uint8Array(readFileSync(SPEECH)))
  if (wav.sampleRate !== 16000 || wav.channels !== 1) throw new Error(`unexpected fixture format ${wav.sampleRate} Hz × ${wav.channels}`)
  return Int16Array.from(wav.channelData[0]!, (x) => Math.round(x * 32768))
}

const energy = (x: ArrayLike<number>, from = 0, to = x.length): number => {
  let s = 0
  for (let i = from; i < to; i++) s += x[i]! * x[i]!
  return s
}

/** Energy of a − b. */
const errorEnergy = (a: ArrayLike<number>, b: ArrayLike<number>): number => {
  let s = 0
  for (let i = 0; i < a.length; i++) s += (a[i]! - b[i]!) ** 2
  return s
}

const db = (ratio: number): number => 10 * Math.log10(ratio)

/** Clean speech plus seeded white Gaussian noise at `snrDb` (over the whole recording). */
const addNoise = (clean: Int16Array, snrDb: number, seed: number): Int16Array => {
  const random = mulberry32(seed)
  const sigma = Math.sqrt(energy(clean) / clean.length / 10 ** (snrDb / 10))
  return Int16Array.from(clean, (x) => {
    const g = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random())
    return Math.max(-32768, Math.min(32767, Math.round(x + sigma * g)))
  })
}

/** Start of the quietest 0.3 s window of `x` (a pause in the clean speech). */
const quietestWindow = (x: Int16Array, rate: number): { from: number; to: number } => {
  const len = Math.round(0.3 * rate)
  const hop = Math.round(0.01 * rate)
  let best = { from: 0, to: len, e: Infinity }
  for (let from = 0; from + len <= x.length; from += hop) {
    const e = energy(x, from, from + len)
    if (e < best.e) best = { from, to: from + len, e }
  }
  return best
}

const snrGain = (clean: Int16Array, noisy: Int16Array, cleaned: Int16Array) => {
  const inSnr = db(energy(clean) / errorEnergy(noisy, clean))
  const outSnr = db(energy(clean) / errorEnergy(cleaned, clean))
  return { inSnr, outSnr, gain: outSnr - inSnr }
}

const fmt = (x: number) => x.toFixed(2)

t.test("removes white noise from 16 kHz speech at 5 dB SNR", async (t) => {
  const clean = loadSpeech()
  const noisy = addNoise(clean, 5, 0x5eed)
  const started = performance.now()
  const cleaned = await denoise(noisy.slice(), 16000)
  const ms = performance.now() - started
  t.equal(cleaned.length, noisy.length, "output length equals input length")
  const { inSnr, outSnr, gain } = snrGain(clean, noisy, cleaned)
  t.ok(gain >= 3, `SNR ${fmt(inSnr)} dB noisy → ${fmt(outSnr)} dB cleaned: gain ${fmt(gain)} dB (≥ 3), ${clean.length / 16000} s in ${ms.toFixed(0)} ms`)
  const pause = quietestWindow(clean, 16000)
  const noiseIn = Math.sqrt(energy(noisy, pause.from, pause.to) / (pause.to - pause.from))
  const noiseOut = Math.sqrt(energy(cleaned, pause.from, pause.to) / (pause.to - pause.from))
  t.ok(db((noiseIn / noiseOut) ** 2) >= 10, `noise RMS in the pause at ${fmt(pause.from / 16000)} s: ${fmt(noiseIn)} → ${fmt(noiseOut)} (${fmt(db((noiseIn / noiseOut) ** 2))} dB less, ≥ 10)`)
})

t.test("48 kHz input works without resampling", async (t) => {
  const clean = Int16Array.from(resample(Float32Array.from(loadSpeech()), 16000, 48000), (x) => Math.max(-32768, Math.min(32767, Math.round(x))))
  const noisy = addNoise(clean, 5, 48)
  const cleaned = await denoise(noisy, 48000)
  t.equal(cleaned.length, noisy.length, "output length equals input length")
  const { inSnr, outSnr, gain } = snrGain(clean, noisy, cleaned)
  t.ok(gain >= 3, `48 kHz: SNR ${fmt(inSnr)} dB noisy → ${fmt(outSnr)} dB cleaned: gain ${fmt(gain)} dB (≥ 3)`)
})

t.test("lengths are kept at other rates and for odd sizes", async (t) => {
  const random = mulberry32(7)
  for (const [rate, n] of [[8000, 1], [22050, 479], [44100, 481], [16000, 4801]] as const) {
    const pcm = Int16Array.from({ length: n }, () => Math.round((random() - 0.5) * 2000))
    t.equal((await denoise(pcm, rate)).length, n, `${n} samples at ${rate} Hz`)
  }
})

t.test("empty input returns empty output", async (t) => {
  const out = await denoise(new Int16Array(0), 16000)
  t.ok(out instanceof Int16Array)
  t.equal(out.length, 0)
})

t.test("a bad sample rate is refused", async (t) => {
  await t.rejects(denoise(new Int16Array(10), 0), RangeError)
})
