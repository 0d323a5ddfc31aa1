import t from "tap"
import { resample, Resampler } from "../../../engines/audio/Resampler.ts"

const FROM = [22050, 16000, 8000]
const TO = [8000, 16000, 22050, 24000, 32000, 44100, 48000]

const sine = (hz: number, rate: number, n: number, amp = 0.5) => Float32Array.from({ length: n }, (_, i) => amp * Math.sin((2 * Math.PI * hz * i) / rate))

/** RMS of x[from, to). */
const rmsOf = (x: Float32Array, from = 0, to = x.length) => {
  let s = 0
  for (let i = from; i < to; i++) s += x[i]! * x[i]!
  return Math.sqrt(s / (to - from))
}

/** Amplitude of the component at `hz` (Goertzel over x[from, to)). */
const toneAmplitude = (x: Float32Array, rate: number, hz: number, from: number, to: number) => {
  const w = (2 * Math.PI * hz) / rate
  const c = 2 * Math.cos(w)
  let s1 = 0
  let s2 = 0
  for (let i = from; i < to; i++) {
    const s0 = x[i]! + c * s1 - s2
    s2 = s1
    s1 = s0
  }
  const power = s1 * s1 + s2 * s2 - c * s1 * s2
  return (2 * Math.sqrt(Math.max(0, power))) / (to - from)
}

const db = (ratio: number) => 20 * Math.log10(ratio)

t.test("a sine keeps frequency, phase and level for every rate pair", async (t) => {
  for (const fin of FROM) {
    for (const fout of TO) {
      const hz = 997 // below every Nyquist in the table, not a divisor of any rate
      const y = resample(sine(hz, fin, fin), fin, fout)
      t.equal(y.length, fout, `${fin}→${fout}: one second in, one second out`)
      // Away from the edges (filter warm-up), the output is the ideal sine sampled at fout.
      const ideal = sine(hz, fout, fout)
      let maxErr = 0
      for (let i = 200; i < fout - 200; i++) maxErr = Math.max(maxErr, Math.abs(y[i]! - ideal[i]!))
      t.ok(maxErr < 2e-3, `${fin}→${fout}: max deviation from the ideal ${hz} Hz sine ${maxErr.toExponential(1)}`)
      // Frequency by zero crossings over the middle.
      let crossings = 0
      for (let i = 201; i < fout - 200; i++) if (y[i - 1]! < 0 !== y[i]! < 0) crossings++
      const measured = (crossings * fout) / (2 * (fout - 401))
      t.ok(Math.abs(measured - hz) / hz < 0.005, `${fin}→${fout}: ${measured.toFixed(1)} Hz by zero crossings`)
    }
  }
})

t.test("downsampling removes tones above the new Nyquist (aliasing below -40 dB)", async (t) => {
  for (const fin of FROM) {
    for (const fout of TO.filter((r) => r < fin)) {
      const hz = Math.min(0.5 * fout * 1.12, 0.45 * fin)
      const x = sine(hz, fin, fin)
      const y = resample(x, fin, fout)
      const level = db(rmsOf(y, 200, y.length - 200) / rmsOf(x))
      t.ok(level < -40, `${fin}→${fout}: ${hz.toFixed(0)} Hz tone comes out at ${level.toFixed(1)} dB`)
    }
  }
})

t.test("upsampling leaves no image of the tone (below -40 dB)", async (t) => {
  for (const fin of FROM) {
    for (const fout of TO.filter((r) => r > fin)) {
      const hz = 0.4 * fin
      const y = resample(sine(hz, fin, fin), fin, fout)
      const image = fin - hz // first image of a tone at hz sampled at fin
      const wanted = toneAmplitude(y, fout, hz, 200, fout - 200)
      const mirror = toneAmplitude(y, fout, image, 200, fout - 200)
      t.ok(db(mirror / wanted) < -40, `${fin}→${fout}: image at ${image} Hz is ${db(mirror / wanted).toFixed(1)} dB`)
      t.ok(Math.abs(db(wanted / 0.5)) < 0.5, `${fin}→${fout}: tone at ${hz} Hz kept within 0.5 dB (${db(wanted / 0.5).toFixed(2)} dB)`)
    }
  }
})

t.test("streaming in uneven chunks equals one-shot, sample for sample", async (t) => {
  for (const [fin, fout] of [[22050, 48000], [22050, 8000], [16000, 24000], [8000, 44100], [16000, 22050]] as const) {
    const x = Float32Array.from({ length: 12_345 }, (_, i) => Math.sin(i * 0.05) * 0.4 + Math.sin(i * 0.31) * 0.2)
    const oneShot = resample(x, fin, fout)
    const r = new Resampler(fin, fout)
    const parts: Array<Float32Array> = []
    let o = 0
    let k = 0
    while (o < x.length) {
      const n = Math.min(x.length - o, [1, 7, 160, 333, 2048, 0][k++ % 6]!)
      parts.push(r.push(x.subarray(o, o + n)))
      o += n
    }
    parts.push(r.flush())
    const streamed = Float32Array.from(parts.flatMap((p) => Array.from(p)))
    t.equal(streamed.length, Resampler.outputLength(x.length, fin, fout), `${fin}→${fout} length`)
    const identical = streamed.length === oneShot.length && streamed.every((v, i) => Object.is(v, oneShot[i]))
    t.ok(identical, `${fin}→${fout} identical`)
    t.same(Array.from(r.flush()), [], "second flush is empty")
    t.throws(() => r.push(x), /after flush/)
  }
})

t.test("sentence-by-sentence streaming has no click at the boundary", async (t) => {
  // Two segments of one continuous tone, resampled as a stream: no jump at the joint.
  const fin = 22050
  const fout = 48000
  const x = sine(440, fin, fin)
  const r = new Resampler(fin, fout)
  const a = r.push(x.subarray(0, 10_000))
  const b = r.push(x.subarray(10_000))
  const y = Float32Array.from([...a, ...b, ...r.flush()])
  let maxStep = 0
  for (let i = 200; i < y.length - 200; i++) maxStep = Math.max(maxStep, Math.abs(y[i]! - y[i - 1]!))
  const expected = 0.5 * 2 * Math.PI * (440 / fout) // largest step of the ideal sine
  t.ok(maxStep < expected * 1.01, `largest sample step ${maxStep.toFixed(4)} ≤ ${expected.toFixed(4)}`)
})

t.test("edge cases", async (t) => {
  t.same(Array.from(resample(Float32Array.of(0.1, 0.2), 16000, 16000)), [Float32Array.of(0.1)[0], Float32Array.of(0.2)[0]], "same rate copies")
  t.equal(resample(new Float32Array(0), 22050, 48000).length, 0, "empty in, empty out")
  t.equal(resample(new Float32Array(1), 8000, 48000).length, 6)
  t.throws(() => new Resampler(0, 16000), RangeError)
  t.throws(() => new Resampler(22050.5, 16000), RangeError)
  const dc = resample(new Float32Array(5000).fill(0.25), 22050, 16000)
  t.ok(Math.abs(dc[2000]! - 0.25) < 1e-5, "unity DC gain")
})
