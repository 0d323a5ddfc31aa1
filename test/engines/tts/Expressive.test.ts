/**
 * Expressive tags: the parser (ExpressiveTags.ts), the DSP renderer (Expressive.ts) with the real
 * espeak-ng and Flite engines, and the `tts.expressive` worker task called in-process. Acoustic
 * checks compare renderings of the same text with each other (louder, slower, noisier, wider
 * pitch range) rather than against absolute numbers where the engines decide.
 */
import { fftInPlace } from "../../../engines/audio/Fft.ts"
import t from "tap"
import { durationMs, rms } from "../../../engines/audio/Pcm.ts"
import { EspeakTts } from "../../../engines/tts/EspeakTts.ts"
import { crossfadeConcat, renderExpressive, softLimit, whisperVariant } from "../../../engines/tts/Expressive.ts"
import { estimateF0, reshapePitch } from "../../../engines/tts/Psola.ts"
import { CHUCKLE_MS, EXHALE_MS, lpcWhisper } from "../../../engines/tts/VocalEffects.ts"
import { expressiveTasks, type ExpressiveInput } from "../../../engines/tts/expressiveTasks.ts"
import { EMOTIONS, expressiveSegments, hasExpressiveTags, parseExpressive, STYLES, type ExpressivePart } from "../../../engines/tts/ExpressiveTags.ts"
import { FliteTts } from "../../../engines/tts/FliteTts.ts"
import type { EngineVoice, TtsEngine } from "../../../engines/tts/TtsEngine.ts"

const espeak = await EspeakTts.load()
const flite = await FliteTts.load()
t.teardown(() => flite.dispose())

const ESPEAK: EngineVoice = { engine: "espeak", language: "en", variant: "en-us+m3", pitch: 1, rate: 1 }
const SLT: EngineVoice = { engine: "flite", language: "en", variant: "slt", pitch: 1, rate: 1 }
const LINE = "The weather today is lovely, and we are going to the park together."
const ENGINES: ReadonlyArray<readonly [string, TtsEngine, EngineVoice]> = [["espeak", espeak, ESPEAK], ["flite", flite, SLT]]

const render = (engine: TtsEngine, voice: EngineVoice, text: string, speed = 1) =>
  renderExpressive(engine, { parts: parseExpressive(text).parts, voice, speed })

const block = (tag: string, text = LINE) => `[${tag}]\n${text}\n[/${tag}]`

/** F0 spread in semitones between the 10th and 90th percentiles of voiced frames. */
const f0RangeSemitones = (x: Float32Array, sr: number) => {
  const v = Array.from(estimateF0(x, sr).f0).filter((f) => f > 0).sort((a, b) => a - b)
  const q = (p: number) => v[Math.floor(p * (v.length - 1))]!
  return 12 * Math.log2(q(0.9) / q(0.1))
}

const medianF0 = (x: Float32Array, sr: number) => {
  const v = Array.from(estimateF0(x, sr).f0).filter((f) => f > 0).sort((a, b) => a - b)
  return v[v.length >> 1]!
}

/** Mean NCCF peak over frames with sound: near 1 for voiced speech, low for noise. */
const harmonicity = (x: Float32Array, sr: number) => {
  const c = Array.from(estimateF0(x, sr).clarity).filter((v) => v > 0)
  return c.reduce((a, b) => a + b, 0) / c.length
}

/** Mean spectral flatness (geometric / arithmetic mean of power, 300–4000 Hz) over loud frames. */
const spectralFlatness = (x: Float32Array, sr: number) => {
  const n = 512
  const frames: Array<number> = []
  const energies: Array<number> = []
  for (let s = 0; s + n <= x.length; s += n / 2) energies.push(rms(x.subarray(s, s + n)))
  const loud = Math.max(...energies) * 0.1
  energies.forEach((e, f) => {
    if (e < loud) return
    const re = new Float64Array(n)
    const im = new Float64Array(n)
    for (let i = 0; i < n; i++) re[i] = x[f * (n / 2) + i]! * (0.5 - 0.5 * Math.cos((2 * Math.PI * i) / n))
    fftInPlace(re, im, false)
    let logSum = 0
    let sum = 0
    let count = 0
    for (let k = Math.ceil((300 * n) / sr); k <= Math.floor((4000 * n) / sr); k++) {
      const p = re[k]! ** 2 + im[k]! ** 2 + 1e-12
      logSum += Math.log(p)
      sum += p
      count++
    }
    frames.push(Math.exp(logSum / count) / (sum / count))
  })
  return frames.reduce((a, b) => a + b, 0) / frames.length
}

/** Span from the first to the last sample above -40 dBFS, ms. */
const activeMs = (x: Float32Array, sr: number) => {
  let a = 0
  while (a < x.length && Math.abs(x[a]!) < 0.01) a++
  let b = x.length - 1
  while (b > a && Math.abs(x[b]!) < 0.01) b--
  return durationMs(b - a + 1, sr)
}

const speechParts = (parts: ReadonlyArray<ExpressivePart>) => parts.filter((p) => p.kind === "speech")

t.test("parser", async (t) => {
  t.test("blocks on their own lines", async (t) => {
    const text = "[raev]\nStop it now!\n[/raev]\nThank you."
    const parsed = parseExpressive(text)
    t.equal(parsed.tagged, true)
    t.same(parsed.parts, [
      { kind: "speech", text: "Stop it now!", charStart: 7, charEnd: 19, emotion: "raev" },
      { kind: "speech", text: "Thank you.", charStart: 28, charEnd: 38 }
    ])
    for (const p of speechParts(parsed.parts)) t.equal(text.slice(p.charStart, p.charEnd), p.text, "offsets point into the request")
  })

  t.test("inline effects split the speech around them", async (t) => {
    const text = "That is funny [naer] really. [ohe]"
    t.same(parseExpressive(text).parts, [
      { kind: "speech", text: "That is funny", charStart: 0, charEnd: 13 },
      { kind: "effect", effect: "naer", charStart: 14, charEnd: 20 },
      { kind: "speech", text: "really.", charStart: 21, charEnd: 28 },
      { kind: "effect", effect: "ohe", charStart: 29, charEnd: 34 }
    ])
  })

  t.test("a style block inside an emotion block combines both; blocks close in any order", async (t) => {
    const parts = parseExpressive("[kurbus]\nFirst line.\n[sosin]\nSecond line.\n[/sosin]\nThird line.\n[/kurbus]\nAfter.").parts
    t.same(parts.map((p) => p.kind === "speech" ? [p.text, p.emotion, p.style] : p.effect), [
      ["First line.", "kurbus", undefined],
      ["Second line.", "kurbus", "sosin"],
      ["Third line.", "kurbus", undefined],
      ["After.", undefined, undefined]
    ])
    const crossed = parseExpressive("[raev][huue]Both.[/raev]Holler only.[/huue]Plain.").parts
    t.same(crossed.map((p) => p.kind === "speech" ? [p.text, p.emotion, p.style] : p.effect), [
      ["Both.", "raev", "huue"],
      ["Holler only.", undefined, "huue"],
      ["Plain.", undefined, undefined]
    ])
    const replaced = parseExpressive("[raev]Angry.[kurbus]Sad.[/raev]Still sad.").parts
    t.same(replaced.map((p) => p.kind === "speech" ? [p.text, p.emotion] : p.effect), [["Angry.", "raev"], ["Sad.", "kurbus"], ["Still sad.", "kurbus"]], "a new emotion replaces the open one; [/raev] then matches nothing")
  })

  t.test("unknown bracketed words are dropped, other brackets are text", async (t) => {
    const text = "[raev]\nHello [laughs] world [1], see [the note]. [/shouting]\n[/raev]"
    const [part, ...rest] = parseExpressive(text).parts
    t.equal(rest.length, 0)
    if (part?.kind !== "speech") return t.fail("expected speech")
    t.equal(part.text, "Hello          world [1], see [the note].", "[laughs] blanked (offsets kept), [1] and [the note] kept")
    t.equal(part.charEnd - part.charStart, part.text.length)
    t.equal(part.emotion, "raev")
    t.equal(hasExpressiveTags("[laughs] Hello [1]"), false, "unknown words alone do not make text tagged")
    t.same(parseExpressive("[laughs] Hello").parts, [{ kind: "speech", text: "Hello", charStart: 9, charEnd: 14 }])
  })

  t.test("unclosed blocks run to the end; stray closings and [/naer] are dropped", async (t) => {
    t.same(parseExpressive("[laul]\nLa la la, the song goes on").parts, [
      { kind: "speech", text: "La la la, the song goes on", charStart: 7, charEnd: 33, style: "laul" }
    ])
    t.same(parseExpressive("[/kurbus]Fine.[/naer]").parts, [{ kind: "speech", text: "Fine.", charStart: 9, charEnd: 14 }])
  })

  t.test("case-insensitive, tolerant of spacing and of tags mid-line", async (t) => {
    const text = "Say [ RAEV ]no way[/Raev] now"
    t.equal(hasExpressiveTags(text), true)
    t.same(parseExpressive(text).parts, [
      { kind: "speech", text: "Say", charStart: 0, charEnd: 3 },
      { kind: "speech", text: "no way", charStart: 12, charEnd: 18, emotion: "raev" },
      { kind: "speech", text: "now", charStart: 26, charEnd: 29 }
    ])
  })

  t.test("hasExpressiveTags and tag-only text", async (t) => {
    for (const tag of [...EMOTIONS, ...STYLES, "naer", "ohe"]) t.equal(hasExpressiveTags(`x [${tag}] y`), true, tag)
    t.equal(hasExpressiveTags("[/ohe]"), true, "a closing tag counts")
    t.equal(hasExpressiveTags("Plain text, [1] and [see above]."), false)
    t.same(parseExpressive("[raev]\n...\n[/raev]").parts, [], "punctuation alone is not voiced")
    t.same(parseExpressive("[raev][/raev]"), { tagged: true, parts: [] })
  })

  t.test("segments: sentences inside blocks, effects ride with the sentence before them", async (t) => {
    const text = "[ohe] [kurbus]\nI waited for you all day long. Nobody came at all tonight.\n[/kurbus]\nThat was a close call [naer]"
    const segments = expressiveSegments(text, parseExpressive(text).parts, "en")
    t.same(segments.map((s) => s.parts.map((p) => (p.kind === "speech" ? p.text : `[${p.effect}]`))), [
      ["[ohe]", "I waited for you all day long."],
      ["Nobody came at all tonight."],
      ["That was a close call", "[naer]"]
    ])
    for (const s of segments) {
      t.equal(text.slice(s.charStart, s.charEnd), s.text)
      for (const p of s.parts) {
        if (p.kind === "speech") t.equal(text.slice(s.charStart + p.charStart, s.charStart + p.charEnd), p.text, "part offsets are relative to the segment")
      }
    }
    t.equal(segments[1]!.parts[0]!.kind === "speech" && segments[1]!.parts[0]!.emotion, "kurbus")
  })
})

t.test("tag scanning never clones its regexp (a clone recompiled per request: ~1 ms of a long text's first audio)", async (t) => {
  let clones = 0
  const species = Object.getOwnPropertyDescriptor(RegExp, Symbol.species)!
  // `matchAll` and `split` build their clone through RegExp[Symbol.species]; count the reads.
  Object.defineProperty(RegExp, Symbol.species, { configurable: true, get: () => (clones++, RegExp) })
  const long = "A long paragraph with [brackets] but no known tag in it. ".repeat(40)
  let results: Array<boolean>
  try {
    // Assertions come after: tap's own code clones regexps.
    results = [hasExpressiveTags(long), hasExpressiveTags(long + " [naer] and [/naer]"), parseExpressive(long + " [sosin] quietly [/sosin] now.").tagged]
  } finally {
    Object.defineProperty(RegExp, Symbol.species, species)
  }
  t.same(results, [false, true, true])
  t.equal(clones, 0, "no regexp was cloned")
})

t.test("DSP helpers", async (t) => {
  t.test("F0 of a 150 Hz pulse train", async (t) => {
    const sr = 16000
    const x = new Float32Array(sr)
    for (let i = 0; i < x.length; i++) x[i] = Math.exp(-((i % (sr / 150)) / 8)) * 0.5
    const f = Array.from(estimateF0(x, sr).f0).filter((v) => v > 0)
    t.ok(f.length > 80, "voiced")
    t.ok(f.every((v) => Math.abs(v - 150) < 3), `all near 150 Hz (${Math.min(...f).toFixed(1)}–${Math.max(...f).toFixed(1)})`)
  })

  t.test("TD-PSOLA moves F0 by the factor and keeps the duration", async (t) => {
    for (const [name, engine, voice] of ENGINES) {
      const r = await engine.synthesize({ text: LINE, voice, speed: 1 })
      for (const factor of [0.85, 1.2]) {
        const shifted = reshapePitch(r.samples, r.sampleRate, 1, factor)!
        const ratio = medianF0(shifted.samples, r.sampleRate) / medianF0(r.samples, r.sampleRate)
        t.ok(Math.abs(ratio / factor - 1) < 0.04, `${name} ×${factor}: median F0 ×${ratio.toFixed(3)}`)
        t.ok(Math.abs(shifted.samples.length / r.samples.length - 1) < 0.02, `${name} ×${factor}: duration kept`)
      }
    }
  })

  t.test("TD-PSOLA covers the whole input across a jump of F0 larger than the mark search window", async (t) => {
    const sr = 16000
    const x = new Float32Array(sr)
    let phase = 0
    for (let i = 0; i < x.length; i++) {
      phase += (i < sr / 2 ? 250 : 80) / sr
      x[i] = Math.exp(-((phase % 1) * 12)) * 0.5
    }
    const out = reshapePitch(x, sr, 1.5, 1.1)!
    t.ok(Math.abs(out.samples.length / x.length - 1) < 0.02, `${out.samples.length} samples for ${x.length}`)
    const tail = medianF0(out.samples.subarray(Math.round(0.7 * sr)), sr)
    t.ok(tail > 50 && tail < 100, `the 80 Hz half is still there, reshaped (${tail.toFixed(0)} Hz)`)
  })

  t.test("soft limiter never reaches full scale; crossfade joins", async (t) => {
    const x = Float32Array.from([0.5, -0.7, 0.9, -2, 5, -50])
    softLimit(x)
    t.same(Array.from(x.subarray(0, 2)), [0.5, Math.fround(-0.7)], "transparent below the threshold")
    t.ok(Array.from(x).every((v) => Math.abs(v) < 0.95), "strictly under the ceiling")
    const { samples, offsets } = crossfadeConcat([new Float32Array(100).fill(1), new Float32Array(100).fill(1)], 10)
    t.equal(samples.length, 190)
    t.same(offsets, [0, 90])
    t.ok(Math.abs(samples[95]! - 1) < 1e-6, "raised-cosine fades sum to one")
  })

  t.test("whisper variant keeps the language and the sex of the variant", async (t) => {
    t.equal(whisperVariant("et+f3"), "et+whisperf")
    t.equal(whisperVariant("en-us+m3"), "en-us+whisper")
    t.equal(whisperVariant("de"), "de+whisper")
  })

  t.test("LPC whisper is deterministic and unvoiced", async (t) => {
    const r = await flite.synthesize({ text: LINE, voice: SLT, speed: 1 })
    const a = lpcWhisper(r.samples, r.sampleRate, 7)
    t.same(Buffer.from(a.buffer), Buffer.from(lpcWhisper(r.samples, r.sampleRate, 7).buffer), "same seed, same samples")
    t.ok(harmonicity(a, r.sampleRate) < harmonicity(r.samples, r.sampleRate) - 0.3, "voicing removed")
  })
})

for (const [name, engine, voice] of ENGINES) {
  t.test(`rendering with ${name}`, async (t) => {
    // Untagged text through the same renderer: same edges and limiter, no prosody change.
    const plain = await renderExpressive(engine, { parts: [{ kind: "speech", text: LINE, charStart: 0, charEnd: LINE.length }], voice, speed: 1 })
    const sr = plain.sampleRate

    t.test("every tag gives non-silent audio with word timings", async (t) => {
      for (const tag of [...EMOTIONS, ...STYLES]) {
        const r = await render(engine, voice, block(tag))
        t.ok(rms(r.samples) > 0.01, `${tag}: RMS ${rms(r.samples).toFixed(3)}`)
        t.equal(r.words.length, plain.words.length, `${tag}: every word timed`)
        const end = durationMs(r.samples.length, r.sampleRate)
        t.ok(r.words.every((w, i) => w.startMs <= w.endMs && w.endMs <= end && (i === 0 || w.startMs >= r.words[i - 1]!.endMs)), `${tag}: timings ordered and inside the audio`)
      }
      for (const tag of ["naer", "ohe"]) t.ok(rms((await render(engine, voice, `[${tag}]`)).samples) > 0.005, `${tag} audible`)
    })

    t.test("[sosin] is noisier than plain speech of the same text", async (t) => {
      const whisper = await render(engine, voice, block("sosin"))
      const hw = harmonicity(whisper.samples, sr)
      const hp = harmonicity(plain.samples, sr)
      t.ok(hw < hp - 0.2, `harmonicity ${hw.toFixed(2)} < ${hp.toFixed(2)}`)
      const fw = spectralFlatness(whisper.samples, sr)
      const fp = spectralFlatness(plain.samples, sr)
      t.ok(fw > fp, `spectral flatness ${fw.toFixed(3)} > ${fp.toFixed(3)}`)
    })

    t.test("[huue] is louder and never clips", async (t) => {
      const holler = await render(engine, voice, block("huue"))
      t.ok(rms(holler.samples) > 1.5 * rms(plain.samples), `RMS ${rms(holler.samples).toFixed(3)} vs ${rms(plain.samples).toFixed(3)}`)
      t.ok(holler.samples.every((v) => Math.abs(v) < 0.95), "every sample under the limiter ceiling")
      t.ok(medianF0(holler.samples, sr) > medianF0(plain.samples, sr) * 1.08, "higher pitch")
    })

    t.test("sorrow is slower, lower and softer than fury", async (t) => {
      const sorrow = await render(engine, voice, block("kurbus"))
      const fury = await render(engine, voice, block("raev"))
      t.ok(sorrow.samples.length > fury.samples.length * 1.25, `${durationMs(sorrow.samples.length, sr).toFixed(0)} ms vs ${durationMs(fury.samples.length, sr).toFixed(0)} ms`)
      t.ok(medianF0(sorrow.samples, sr) < medianF0(fury.samples, sr), "lower")
      t.ok(rms(sorrow.samples) < rms(fury.samples), "softer")
      t.ok(f0RangeSemitones(sorrow.samples, sr) < f0RangeSemitones(fury.samples, sr), "flatter")
    })

    t.test("[laul] has a wider pitch contour than speech and sustains", async (t) => {
      const song = await render(engine, voice, block("laul"))
      const rs = f0RangeSemitones(song.samples, sr)
      const rp = f0RangeSemitones(plain.samples, sr)
      t.ok(rs > rp + 2, `F0 p10–p90 ${rs.toFixed(1)} st vs ${rp.toFixed(1)} st`)
      t.ok(song.samples.length > plain.samples.length * 1.2, "longer than speech")
    })

    t.test("effects last as designed", async (t) => {
      const naer = await render(engine, voice, "[naer]")
      const ohe = await render(engine, voice, "[ohe]")
      t.equal(Math.round(durationMs(naer.samples.length, sr)), CHUCKLE_MS)
      t.equal(Math.round(durationMs(ohe.samples.length, sr)), EXHALE_MS)
      const chuckle = activeMs(naer.samples, sr)
      const breath = activeMs(ohe.samples, sr)
      t.ok(chuckle >= 600 && chuckle <= 800, `chuckle sounds for ${chuckle.toFixed(0)} ms (600–800)`)
      t.ok(breath >= 350 && breath <= 500, `exhale sounds for ${breath.toFixed(0)} ms (350–500)`)
      t.ok(harmonicity(naer.samples, sr) > harmonicity(ohe.samples, sr) + 0.3, "the chuckle is voiced, the exhale is not")
    })
  })
}

t.test("the tts.expressive task", async (t) => {
  const run = expressiveTasks["tts.expressive"]
  const text = "[raev]\n[huue]\nGet out of my garden!\n[/huue]\n[/raev]\nThat was close [naer]"
  const parts = expressiveSegments(text, parseExpressive(text).parts, "en").flatMap((s) => s.parts.map((p) => ({ ...p, charStart: p.charStart + s.charStart, charEnd: p.charEnd + s.charStart })))
  const input: ExpressiveInput = { parts, voice: ESPEAK, speed: 1, sampleRate: 24000 }
  const a = (await run(input)).value
  const b = (await run(input)).value
  t.equal(a.sampleRate, 24000)
  t.equal(a.engineSampleRate, 22050)
  t.ok(a.pcm instanceof Int16Array && a.pcm.length > 24000, "s16 at the asked rate")
  t.same(Buffer.from(a.pcm.buffer), Buffer.from(b.pcm.buffer), "deterministic bytes")
  t.ok(a.pcm.every((v) => v > -32768 && v < 32767), "no sample at full scale after resampling")
  t.same(a.words.map((w) => text.slice(w.charStart, w.charEnd)), ["Get", "out", "of", "my", "garden", "That", "was", "close"], "word offsets point into the text")
  const flat = (await run({ ...input, voice: SLT, sampleRate: 16000 })).value
  t.equal(flat.engineSampleRate, 16000)
  t.equal(flat.sampleRate, 16000)
  t.same(Buffer.from(flat.pcm.buffer), Buffer.from((await run({ ...input, voice: SLT, sampleRate: 16000 })).value.pcm.buffer), "Flite too")
  const reasonOf = (p: Promise<unknown>) => p.then(() => "resolved", (e: { reason?: string }) => e.reason)
  t.equal(await reasonOf(run({ ...input, parts: [] })), "InvalidRequest")
  t.equal(await reasonOf(run({ ...input, voice: { ...ESPEAK, variant: "xx-nope" } })), "VoiceNotFound")
})
