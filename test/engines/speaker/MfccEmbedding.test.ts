import t from "tap"
import { PowerSpectrum } from "../../../engines/audio/Fft.ts"
import { calibrationConstants } from "../../../engines/speaker/calibrateMfcc.ts"
import { CEPSTRA, frameCount, frameFeatures } from "../../../engines/speaker/FrameFeatures.ts"
import { MFCC_CALIBRATION } from "../../../engines/speaker/MfccCalibration.ts"
import { MfccEmbedding, RAW_DIMENSION, RAW_LAYOUT } from "../../../engines/speaker/MfccEmbedding.ts"
import { pitchTrack } from "../../../engines/speaker/Pitch.ts"
import { cosine } from "../../../engines/speaker/SpeakerEmbedding.ts"
import { disposeSpeakers, speak, type VoiceName } from "./speakers.ts"
import { runSpeakerEmbeddingConformance } from "./speakerEmbeddingConformance.ts"

t.teardown(disposeSpeakers)

runSpeakerEmbeddingConformance(t, MfccEmbedding)

t.test("shape and constants", async (t) => {
  t.equal(MfccEmbedding.dimension, RAW_DIMENSION)
  t.equal(RAW_DIMENSION, 3 * CEPSTRA + 6 + 10)
  t.equal(RAW_LAYOUT.ltas.at + RAW_LAYOUT.ltas.size, RAW_DIMENSION, "layout covers the vector")
  for (const key of ["mean", "std", "weight"] as const) t.equal(MFCC_CALIBRATION[key].length, RAW_DIMENSION, `${key} per dimension`)
  t.ok(MFCC_CALIBRATION.std.every((s) => s > 0), "no zero scale")
  t.ok(MFCC_CALIBRATION.weight.every((w) => w >= 0.5 && w <= 2), "weights clipped to [0.5, 2]")
  t.match(MfccEmbedding.name, /^mfcc-stats-v1\/cal1-/, "name carries the calibration")
})

t.test("calibration: families weigh equally, Fisher ratio as weight", async (t) => {
  const v = (...xs: Array<number>) => Float64Array.from(xs)
  // Family a: three voices around 0; family b: one voice around 10 (dim 0) and 2 (dim 2).
  // Dimension 0 differs between voices a lot, dimension 2 somewhat, dimension 1 not at all.
  const { mean, std, weight } = calibrationConstants(
    [
      { family: "a", vectors: [v(-1, 1, -1), v(1, -1, 1)] },
      { family: "a", vectors: [v(-1, -1, -1), v(1, 1, 1)] },
      { family: "a", vectors: [v(-1, 1, -1), v(1, -1, 1)] },
      { family: "b", vectors: [v(9, 1, 1), v(11, -1, 3), v(Number.NaN, Number.NaN, Number.NaN)] }
    ],
    3
  )
  t.same(mean, [5, 0, 1], "mean between the families, not pulled to the larger one; NaN skipped")
  t.ok(std[0]! > 4 && std[1]! > 0.9)
  t.equal(weight[0], 2, "between-voice dimension weighs most (Fisher ratio 25 × median, capped)")
  t.equal(weight[2], 1, "the median dimension weighs 1")
  t.equal(weight[1], 0.5, "noise dimension weighs least (capped)")
})

t.test("FFT power spectrum: a bin-centred sine lands in its bin; Parseval", async (t) => {
  const fft = new PowerSpectrum(512)
  const x = Float64Array.from({ length: 512 }, (_, n) => Math.sin((2 * Math.PI * 32 * n) / 512))
  const p = fft.compute(x, new Float64Array(fft.bins))
  t.equal(p.indexOf(Math.max(...p)), 32)
  const energy = x.reduce((s, v) => s + v * v, 0)
  const spectral = p[0]! + p[256]! + 2 * p.slice(1, 256).reduce((s, v) => s + v, 0)
  t.ok(Math.abs(spectral / 512 - energy) < 1e-6, "Σ|X|² = N Σx²")
  t.throws(() => new PowerSpectrum(400))
})

t.test("pitch of a pulse train and of silence", async (t) => {
  for (const hz of [90, 140, 220, 330]) {
    const pcm = new Float32Array(16000)
    // Glottal-like pulses (decaying resonance at 700 Hz) every 1/hz s.
    const period = 16000 / hz
    for (let k = 0; k * period < pcm.length; k++) {
      const at = Math.round(k * period)
      for (let n = 0; n < 200 && at + n < pcm.length; n++) pcm[at + n] = pcm[at + n]! + 0.5 * Math.exp(-n / 30) * Math.cos((2 * Math.PI * 700 * n) / 16000)
    }
    const { f0 } = pitchTrack(pcm, frameCount(pcm.length))
    const voiced = Array.from(f0).filter((x) => x > 0)
    const median = voiced.sort((a, b) => a - b)[voiced.length >> 1]!
    t.ok(voiced.length > 0.8 * f0.length, `${hz} Hz: mostly voiced (${voiced.length}/${f0.length})`)
    t.ok(Math.abs(median / hz - 1) < 0.02, `${hz} Hz: median ${median.toFixed(1)} Hz`)
  }
  t.ok(pitchTrack(new Float32Array(8000), 48).f0.every((x) => x === 0), "silence is unvoiced")
  let seed = 12345
  const noise = Float32Array.from({ length: 16000 }, () => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0 // LCG: white noise, reproducible
    return (seed / 2 ** 32 - 0.5) * 0.6
  })
  const noisyVoiced = Array.from(pitchTrack(noise, frameCount(noise.length)).f0).filter((x) => x > 0).length
  t.ok(noisyVoiced < 0.1 * frameCount(noise.length), `noise is mostly unvoiced (${noisyVoiced})`)
})

t.test("frame features: frame count and finite values", async (t) => {
  t.equal(frameCount(399), 0)
  t.equal(frameCount(400), 1)
  t.equal(frameCount(16000), 98)
  const pcm = await speak("flite:awb", "A short test of the frame features.")
  const f = frameFeatures(pcm)
  t.equal(f.frames, frameCount(pcm.length))
  t.equal(f.mfcc.length, f.frames * CEPSTRA)
  t.ok(f.mfcc.every(Number.isFinite) && f.delta.every(Number.isFinite) && f.energyDb.every(Number.isFinite))
})

/**
 * The voice-separation matrix: four Flite voices and three espeak voices, four sentences each
 * (3–5 s). Diagonal: mean cosine between different sentences of one voice; off-diagonal: mean
 * cosine between the voices. Asserted strictly: every same-voice pair of different sentences is
 * more similar than every pair of sentences by two different voices. espeak variants f2 and f3
 * add random breath noise, so their audio, and these numbers, move a little from run to run.
 */
t.test("separates voices: same voice, other sentence beats any other voice", async (t) => {
  const en = [
    "The birch canoe slid on the smooth planks, and the boys watched it drift away.",
    "Glue the sheet to the dark blue background before the paint dries.",
    "It is easy to tell the depth of a well when you drop a stone into it.",
    "These days a chicken leg is a rare dish, said the old cook with a smile."
  ]
  const et = [
    "Tere hommikust, kuidas sul täna läheb ja mida sa plaanid teha?",
    "Ilm on väga ilus, päike paistab ja lapsed mängivad õues.",
    "Me läheme homme linna poodi ja ostame uued kingad.",
    "Raamat on laual akna kõrval, kus valgus on kõige parem."
  ]
  const voices: Array<VoiceName> = ["flite:slt", "flite:rms", "flite:awb", "flite:kal16", "espeak:en+m3", "espeak:en+f3", "espeak:et+f2"]
  const vectors = new Map<VoiceName, Array<Float32Array>>()
  let audioMs = 0
  let embedMs = 0
  for (const voice of voices) {
    const list: Array<Float32Array> = []
    for (const text of voice.startsWith("espeak:et") ? et : en) {
      const pcm = await speak(voice, text)
      const started = performance.now()
      list.push(MfccEmbedding.embed(pcm))
      embedMs += performance.now() - started
      audioMs += (pcm.length * 1000) / 16000
    }
    vectors.set(voice, list)
  }
  const pairs = (a: VoiceName, b: VoiceName) =>
    vectors.get(a)!.flatMap((x, i) => vectors.get(b)!.flatMap((y, j) => (a === b && i === j ? [] : [cosine(x, y)])))
  const mean = (xs: Array<number>) => xs.reduce((s, x) => s + x, 0) / xs.length
  const short = (v: VoiceName) => v.split(":")[1]!
  t.comment(`cosine matrix (mean; diagonal = same voice, different sentences); ${((embedMs * 1000) / audioMs).toFixed(1)} ms per s of audio`)
  t.comment(`${"".padEnd(8)}${voices.map((v) => short(v).padStart(7)).join("")}`)
  for (const a of voices) t.comment(`${short(a).padEnd(8)}${voices.map((b) => mean(pairs(a, b)).toFixed(2).padStart(7)).join("")}`)
  let worst = Infinity
  for (const a of voices) {
    const sameMin = Math.min(...pairs(a, a))
    for (const b of voices) {
      if (b === a) continue
      const otherMax = Math.max(...pairs(a, b))
      worst = Math.min(worst, sameMin - otherMax)
      t.ok(sameMin > otherMax, `${short(a)}: least similar own sentence ${sameMin.toFixed(3)} > most similar ${short(b)} ${otherMax.toFixed(3)}`)
    }
  }
  t.comment(`worst margin (min same-voice − max other-voice) ${worst.toFixed(3)}`)
})
