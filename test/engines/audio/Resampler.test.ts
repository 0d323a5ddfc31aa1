import { execFileSync } from "node:child_process"
import { createHash } from "node:crypto"
import * as path from "node:path"
import fc from "fast-check"
import t from "tap"
import { floatToInt16, int16ToFloat } from "../../../engines/audio/Pcm.ts"
import { mulberry32 } from "../../../engines/audio/Prng.ts"
import { resample, Resampler, resamplerKernel, type ResamplerKernelKind, setResamplerKernel } from "../../../engines/audio/Resampler.ts"
import { createSimdKernel, kernelModule, type WasmApi } from "../../../engines/audio/ResamplerKernel.ts"

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

// ---- The two kernels: WebAssembly SIMD (f32x4) and the JavaScript fallback (float64) ----

const KERNEL_PAIRS = [[22050, 24000], [22050, 16000], [22050, 8000], [22050, 44100], [16000, 22050], [24000, 48000]] as const

const noise = (n: number, seed: number) => {
  const rnd = mulberry32(seed)
  return Float32Array.from({ length: n }, () => rnd() * 1.6 - 0.8)
}

/** Runs `f` with the kernel forced, then puts the previous choice back. */
const withKernel = <A>(kind: ResamplerKernelKind, f: () => A): A => {
  const previous = setResamplerKernel(kind)
  try {
    return f()
  } finally {
    setResamplerKernel(previous)
  }
}

/** The project's lib has no WebAssembly types (see ResamplerKernel.ts). */
const Wasm = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly

const sameBits = (a: Float32Array, b: Float32Array) => a.length === b.length && a.every((v, i) => Object.is(v, b[i]))

t.test("WebAssembly SIMD is available here, and is the default kernel", async (t) => {
  t.ok(Wasm.validate(kernelModule()), `the kernel module (${kernelModule().length} bytes) validates`)
  t.equal(resamplerKernel(), "simd")
})

t.test("the SIMD and JavaScript kernels agree within 1e-6 of full scale on random input", async (t) => {
  // 20 000 input samples: past the SIMD kernel's 4096-output blocks at every rate pair.
  const x = noise(20_000, 7)
  for (const [fin, fout] of KERNEL_PAIRS) {
    const js = withKernel("js", () => resample(x, fin, fout))
    const simd = withKernel("simd", () => resample(x, fin, fout))
    t.equal(simd.length, js.length, `${fin}→${fout} length`)
    // Relative to the output's peak, not per sample: near a zero crossing a float32 sum and a
    // float64 one differ by the same absolute amount, which is no small fraction of the sample.
    let peak = 0
    let worst = 0
    for (let i = 0; i < js.length; i++) {
      peak = Math.max(peak, Math.abs(js[i]!))
      worst = Math.max(worst, Math.abs(js[i]! - simd[i]!))
    }
    t.ok(worst <= 1e-6 * peak, `${fin}→${fout}: largest difference ${(worst / peak).toExponential(1)} of the peak ${peak.toFixed(2)}`)
    t.notOk(sameBits(js, simd), `${fin}→${fout}: the two really are different arithmetic`)
  }
})

t.test("streaming in odd chunk sizes equals one-shot, sample for sample, with either kernel", async (t) => {
  const x = noise(25_000, 11)
  for (const kind of ["simd", "js"] as const) {
    for (const [fin, fout] of KERNEL_PAIRS) {
      const oneShot = withKernel(kind, () => resample(x, fin, fout))
      const r = withKernel(kind, () => new Resampler(fin, fout))
      const parts: Array<Float32Array> = []
      let o = 0
      let k = 0
      while (o < x.length) {
        const n = Math.min(x.length - o, [1, 3, 17, 127, 1001, 5, 4099, 9, 2205][k++ % 9]!)
        parts.push(r.push(x.subarray(o, o + n)))
        o += n
      }
      parts.push(r.flush())
      const streamed = new Float32Array(parts.reduce((a, p) => a + p.length, 0))
      let at = 0
      for (const p of parts) {
        streamed.set(p, at)
        at += p.length
      }
      t.ok(sameBits(streamed, oneShot), `${kind} ${fin}→${fout}: ${streamed.length} samples identical`)
    }
  }
})

t.test("a stream keeps the kernel it started with", async (t) => {
  const x = noise(6000, 3)
  const simd = withKernel("simd", () => resample(x, 22050, 24000))
  const r = withKernel("simd", () => new Resampler(22050, 24000))
  const parts = [r.push(x.subarray(0, 3000)), withKernel("js", () => r.push(x.subarray(3000))), withKernel("js", () => r.flush())]
  t.ok(sameBits(Float32Array.from(parts.flatMap((p) => Array.from(p))), simd), "switching mid-stream changes nothing in it")
})

t.test("the kernel's memory grows for a large table while earlier tables stay in place", async (t) => {
  const x = noise(9000, 5)
  // 22050 → 44101 has L = 44101 rows of 32 taps: 5.6 MB, many times the initial 64 KiB page.
  for (const [fin, fout] of [[22050, 24000], [22050, 44101], [22050, 24000]] as const) {
    const js = withKernel("js", () => resample(x, fin, fout))
    const simd = withKernel("simd", () => resample(x, fin, fout))
    const worst = js.reduce((m, v, i) => Math.max(m, Math.abs(v - simd[i]!)), 0)
    t.ok(worst < 1e-6, `${fin}→${fout}: within ${worst.toExponential(1)}`)
  }
})

t.test("distinct odd rates past the kernel's table budget fall back to JavaScript; nothing breaks", async (t) => {
  // Tables are never freed; 2 MB each (16000 → 8009+k Hz: L ≈ 8000 rows of 64 taps), 24 of them
  // pass the 32 MB budget. Past 2 GiB the kernel's addresses wrapped and every later call threw.
  const x = noise(6000, 11)
  let js = 0
  for (let k = 0; k < 24; k++) {
    const fout = 8009 + 2 * k
    const a = withKernel("js", () => resample(x, 16000, fout))
    const b = resample(x, 16000, fout)
    if (sameBits(a, b)) js++
    const worst = a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i]!)), 0)
    if (!t.ok(worst < 1e-6, `16000→${fout}: within ${worst.toExponential(1)}`)) break
  }
  t.ok(js >= 1, `${js} of 24 odd designs went to the JavaScript loop once the budget was spent`)
  const y = noise(20_000, 12)
  const usual = resample(y, 22050, 24000)
  t.notOk(sameBits(usual, withKernel("js", () => resample(y, 22050, 24000))), "the usual pair still runs in the SIMD kernel")
})

t.test("fallback: without WebAssembly SIMD the JavaScript kernel runs", async (t) => {
  const bytes = kernelModule()
  const fake = (validate: boolean, compiles: boolean): WasmApi => ({
    validate: () => validate,
    Module: class {
      constructor() {
        if (!compiles) throw new Error("no")
      }
    } as unknown as WasmApi["Module"],
    Instance: Wasm.Instance
  })
  t.equal(createSimdKernel(undefined), undefined, "no WebAssembly at all")
  t.equal(createSimdKernel(fake(false, true)), undefined, "WebAssembly.validate refuses the module (no SIMD)")
  t.equal(createSimdKernel(fake(true, false)), undefined, "the module fails to compile")
  t.ok(createSimdKernel(Wasm) !== undefined, `the real thing compiles (${bytes.length} bytes)`)

  // The real fallback: node --jitless has no WebAssembly, so Resampler.ts picks the JS loop by
  // itself; its output is the forced JS kernel's here, bit for bit.
  const x = Float32Array.from({ length: 5000 }, (_, i) => Math.sin(i * 0.1) * 0.5)
  const hash = (y: Float32Array) => createHash("sha256").update(new Uint8Array(y.buffer, y.byteOffset, y.byteLength)).digest("hex")
  const script = [
    `import("./engines/audio/Resampler.ts").then((m) => {`,
    `  const x = Float32Array.from({ length: 5000 }, (_, i) => Math.sin(i * 0.1) * 0.5)`,
    `  const y = m.resample(x, 22050, 24000)`,
    `  const h = require("node:crypto").createHash("sha256").update(new Uint8Array(y.buffer)).digest("hex")`,
    `  let refused = false`,
    `  try { m.setResamplerKernel("simd") } catch { refused = true }`,
    `  console.log(JSON.stringify({ kernel: m.resamplerKernel(), wasm: typeof WebAssembly, refused, hash: h }))`,
    `})`
  ].join("\n")
  const root = path.resolve(import.meta.dirname, "../../..")
  const child = JSON.parse(
    execFileSync(process.execPath, ["--jitless", "--import", "tsx", "-e", script], { cwd: root, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim().split("\n").pop()!
  ) as { kernel: string; wasm: string; refused: boolean; hash: string }
  t.same({ kernel: child.kernel, wasm: child.wasm, refused: child.refused }, { kernel: "js", wasm: "undefined", refused: true }, "node --jitless: no WebAssembly, JavaScript kernel, SIMD cannot be forced")
  t.equal(child.hash, hash(withKernel("js", () => resample(x, 22050, 24000))), "the same output as the JS kernel forced here")
  t.not(child.hash, hash(resample(x, 22050, 24000)), "and not the SIMD kernel's")
})

t.test("s16 in, s16 out (pushInt16) equals the Float32 path converted at both ends, in any chunking (property)", async (t) => {
  for (const kind of ["simd", "js"] as const) {
    fc.assert(fc.property(
      fc.array(fc.integer({ min: -32768, max: 32767 }), { minLength: 1, maxLength: 6000 }),
      fc.array(fc.integer({ min: 1, max: 3000 }), { minLength: 1, maxLength: 8 }),
      fc.constantFrom(...KERNEL_PAIRS),
      (values, cuts, [fin, fout]) => {
        const x = Int16Array.from(values)
        const viaFloat = withKernel(kind, () => new Resampler(fin, fout))
        const viaS16 = withKernel(kind, () => new Resampler(fin, fout))
        const a: Array<number> = []
        const b: Array<number> = []
        for (let o = 0, k = 0; o < x.length; k++) {
          const chunk = x.subarray(o, o + cuts[k % cuts.length]!)
          a.push(...floatToInt16(viaFloat.push(int16ToFloat(chunk))))
          b.push(...viaS16.pushInt16(chunk))
          o += chunk.length
        }
        a.push(...floatToInt16(viaFloat.flush()))
        b.push(...floatToInt16(viaS16.flush()))
        return a.length === b.length && a.every((v, i) => v === b[i])
      }
    ), { numRuns: 60 })
  }
  t.pass("both kernels")
})

t.test("the SIMD kernel's float → s16 equals floatToInt16 bit for bit, at ties, extremes and NaN (property)", async (t) => {
  const kernel = createSimdKernel(Wasm)!
  /** The float32 next to `x` towards +∞ (up) or -∞. */
  const step = (x: number, up: boolean) => {
    const f = new Float32Array([x])
    const bits = new Int32Array(f.buffer)
    if (x === 0) return up ? 2 ** -149 : -(2 ** -149)
    bits[0]! += (x > 0) === up ? 1 : -1
    return f[0]!
  }
  // Halfway between two s16 steps, and the float32 on either side: where floor(x + 0.5) in
  // float32 would differ from float64 (0.5 - 2^-25 → 1 instead of 0).
  const tie = fc.integer({ min: -32769, max: 32768 }).chain((k) => fc.constantFrom(0, 1, -1).map((side) => {
    const x = Math.fround((k + 0.5) / 32768)
    return side === 0 ? x : step(x, side > 0)
  }))
  const special = fc.constantFrom(NaN, Infinity, -Infinity, 0, -0, 1, -1, 2, -2, 1e30, -1e30, 2 ** -149, 0.5 - 2 ** -25)
  fc.assert(fc.property(
    fc.array(fc.oneof(tie, special, fc.float({ min: -2, max: 2 }), fc.float()), { minLength: 0, maxLength: 9000 }),
    (values) => {
      const samples = Float32Array.from(values)
      const out = new Int16Array(samples.length)
      kernel.toInt16(samples, out)
      const want = floatToInt16(samples)
      return out.every((v, i) => v === want[i])
    }
  ), { numRuns: 200 })
  const edge = Float32Array.from([0.5 - 2 ** -25, (0.5 - 2 ** -25) / 32768, NaN, 3, -3, 32767.5 / 32768, -32768.5 / 32768])
  const out = new Int16Array(edge.length)
  kernel.toInt16(edge, out)
  t.same([...out], [...floatToInt16(edge)], `edges: ${[...out].join(", ")}`)
})

t.test("the SIMD kernel's s16 → float equals int16ToFloat bit for bit, any length (property)", async (t) => {
  const kernel = createSimdKernel(Wasm)!
  fc.assert(fc.property(
    fc.array(fc.integer({ min: -32768, max: 32767 }), { minLength: 0, maxLength: 9000 }),
    (values) => {
      const samples = Int16Array.from(values)
      const out = new Float32Array(samples.length)
      kernel.toFloat(samples, out)
      return sameBits(out, int16ToFloat(samples))
    }
  ), { numRuns: 200 })
  t.pass("200 runs")
})
