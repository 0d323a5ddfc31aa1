/**
 * InputPcm: realtime session audio (`audio_format`) → 16 kHz s16 without ffmpeg. A stream cut
 * anywhere (odd bytes included) converts to exactly what the whole stream converts to, µ-law
 * decodes by G.711, and every rate lands at 16 kHz with the tone where it was.
 */
import t from "tap"
import { INPUT_AUDIO_FORMATS, InputPcm, inputBytesPerSample, inputSampleRate, isInputAudioFormat } from "../../../engines/audio/InputPcm.ts"
import { mulawEncode, mulawToLinear } from "../../../engines/audio/Mulaw.ts"
import { concatInt16, int16ToBytesLE } from "../../../engines/audio/Pcm.ts"
import { mulberry32 } from "../../../engines/audio/Prng.ts"

const tone = (rate: number, hz: number, seconds: number): Int16Array =>
  Int16Array.from({ length: Math.round(rate * seconds) }, (_, i) => Math.round(12000 * Math.sin((2 * Math.PI * hz * i) / rate)))

const join = concatInt16

/** Cuts `bytes` at random places (1..max bytes, odd lengths included) and converts piece by piece. */
const streamed = (format: (typeof INPUT_AUDIO_FORMATS)[number], bytes: Uint8Array, seed: number, max: number): Int16Array => {
  const input = new InputPcm(format)
  const rnd = mulberry32(seed)
  const parts: Array<Int16Array> = []
  for (let at = 0; at < bytes.length;) {
    const n = Math.min(bytes.length - at, 1 + Math.floor(rnd() * max))
    parts.push(input.push(bytes.subarray(at, at + n)))
    at += n
  }
  parts.push(input.push(new Uint8Array(0)))
  return join(parts)
}

/** Zero crossings per second of the middle half: the tone's frequency × 2. */
const crossingsHz = (samples: Int16Array, rate: number): number => {
  const from = samples.length >> 2
  const to = from * 3
  let n = 0
  for (let i = from + 1; i < to; i++) if ((samples[i - 1]! < 0) !== (samples[i]! < 0)) n++
  return n / 2 / ((to - from) / rate)
}

t.test("the formats, their rates and sample sizes", async (t) => {
  t.same([...INPUT_AUDIO_FORMATS].map(inputSampleRate), [8000, 16000, 22050, 24000, 44100, 48000, 8000])
  t.same([...INPUT_AUDIO_FORMATS].map(inputBytesPerSample), [2, 2, 2, 2, 2, 2, 1])
  t.notOk(isInputAudioFormat("mp3_44100"))
  t.notOk(isInputAudioFormat("pcm_11025"))
  t.throws(() => new InputPcm("opus_48000" as never), RangeError)
})

t.test("pcm_16000 passes through, however the bytes are cut", async (t) => {
  const samples = tone(16000, 440, 0.5)
  const bytes = int16ToBytesLE(samples)
  for (const seed of [1, 2, 3]) t.same(streamed("pcm_16000", bytes, seed, 7), samples, `seed ${seed}: cut into 1-7 byte pieces`)
  const negative = Int16Array.from([-1, -32768, 32767, 0, -2])
  t.same(streamed("pcm_16000", int16ToBytesLE(negative), 9, 3), negative, "sign and extremes survive a split sample")
})

for (const format of INPUT_AUDIO_FORMATS.filter((f) => f !== "pcm_16000")) {
  t.test(`${format} → 16 kHz: a stream equals the whole, the tone stays put`, async (t) => {
    const rate = inputSampleRate(format)
    const samples = tone(rate, 440, 1)
    const bytes = format === "ulaw_8000" ? mulawEncode(samples) : int16ToBytesLE(samples)
    const whole = new InputPcm(format).push(bytes)
    // The resampler holds back its window (≈ 1-2 ms) until more audio comes.
    t.ok(Math.abs(whole.length - 16000) <= 64, `≈ 1 s of 16 kHz samples (${whole.length})`)
    t.same(streamed(format, bytes, 5, 333), whole, "cut into random pieces, the same samples")
    const hz = crossingsHz(whole, 16000)
    t.ok(Math.abs(hz - 440) < 3, `440 Hz stays 440 Hz (${hz.toFixed(1)})`)
  })
}

t.test("ulaw_8000 decodes by G.711 before resampling", async (t) => {
  const bytes = Uint8Array.from({ length: 4000 }, (_, i) => (i * 37) & 0xff)
  const input = new InputPcm("ulaw_8000")
  const out = input.push(bytes)
  t.equal(out.length > 7900 && out.length <= 8000, true, `8 kHz → 16 kHz doubles the samples (${out.length})`)
  // 0xff is µ-law zero: a run of it is silence.
  const silent = new InputPcm("ulaw_8000").push(new Uint8Array(800).fill(0xff))
  t.ok(silent.every((s) => s === 0), "0xff is silence")
  t.equal(mulawToLinear(0x80), 32124, "full scale as in Mulaw.ts")
})
