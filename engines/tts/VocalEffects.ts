/**
 * The non-speech sounds and the whisper of the expressive renderer (worker side), all classical
 * DSP from a seeded PRNG, so output is deterministic: noise-excited LPC whisper, and the
 * [naer] chuckle and [ohe] exhale made from scratch (see Expressive.ts for what each tag does).
 */
import { mulberry32 } from "../audio/Prng.ts"
import { levinson } from "../audio/Lpc.ts"
import type { Effect } from "./ExpressiveTags.ts"

/** Designed lengths of the effects, ms; they ignore the request's speed. */
export const CHUCKLE_MS = 800
export const EXHALE_MS = 500

/** Roughly Gaussian noise (sum of three uniforms), unit variance. */
const gaussian = (rand: () => number) => (rand() + rand() + rand() - 1.5) * 2

// ---------------------------------------------------------------------------------------------
// Whisper by noise-excited LPC


/**
 * Whisper: every 25 ms frame (50 % overlap, Hann) is replaced by seeded white noise filtered by
 * the all-pole envelope 1/A(z) of the pre-emphasised frame (so the glottal tilt is not put back:
 * whispers are brighter; bandwidths widened so no pole sits on one harmonic), scaled to the
 * frame's RMS, overlap-added, then high-passed at 300 Hz.
 */
export const lpcWhisper = (x: Float32Array, sr: number, seed: number): Float32Array => {
  const size = 2 * Math.round(0.0125 * sr)
  const hop = size / 2
  const order = Math.min(28, Math.round(sr / 1000) + 4)
  const win = new Float64Array(size)
  for (let i = 0; i < size; i++) win[i] = 0.5 - 0.5 * Math.cos((2 * Math.PI * i) / size)
  const pre = new Float64Array(x.length)
  for (let i = 0; i < x.length; i++) pre[i] = x[i]! - 0.9 * (x[i - 1] ?? 0)
  const out = new Float32Array(x.length)
  const rand = mulberry32(seed)
  const frame = new Float64Array(size)
  const r = new Float64Array(order + 1)
  const y = new Float64Array(size)
  for (let start = -hop; start < x.length; start += hop) {
    let wx2 = 0
    let wsum = 0
    for (let i = 0; i < size; i++) {
      const t = start + i
      const inside = t >= 0 && t < x.length
      frame[i] = inside ? pre[t]! * win[i]! : 0
      if (inside) {
        wx2 += win[i]! * x[t]! * x[t]!
        wsum += win[i]!
      }
    }
    const level = wsum > 0 ? Math.sqrt(wx2 / wsum) : 0
    // Draw the noise even for silent frames so later frames do not depend on earlier levels.
    for (let i = 0; i < size; i++) y[i] = gaussian(rand)
    if (level < 1e-5) continue
    for (let lag = 0; lag <= order; lag++) {
      let s = 0
      for (let i = lag; i < size; i++) s += frame[i]! * frame[i - lag]!
      r[lag] = s
    }
    r[0] = r[0]! * (1 + 1e-4) + 1e-12 // white-noise correction keeps the filter stable
    const a = levinson(r, order)
    // Bandwidth expansion (poles pulled in by 0.98^i): no sharp peaks on single harmonics.
    for (let j = 1, g = BANDWIDTH_GAMMA; j <= order; j++, g *= BANDWIDTH_GAMMA) a[j] = a[j]! * g
    let ey = 0
    for (let i = 0; i < size; i++) {
      let v = y[i]!
      for (let j = 1; j <= order && j <= i; j++) v -= a[j]! * y[i - j]!
      y[i] = v
      ey += win[i]! * v * v
    }
    const g = ey > 0 ? level / Math.sqrt(ey / wsum) : 0
    for (let i = 0; i < size; i++) {
      const t = start + i
      if (t >= 0 && t < x.length) out[t]! += y[i]! * g * win[i]!
    }
  }
  // Whispers carry almost nothing below a few hundred Hz (no glottal source).
  return highPass(out, sr, WHISPER_HIGHPASS_HZ)
}

const BANDWIDTH_GAMMA = 0.98
const WHISPER_HIGHPASS_HZ = 300

/** Second-order Butterworth high-pass (RBJ biquad), returns a new array. */
const highPass = (x: Float32Array, sr: number, hz: number): Float32Array => {
  const w = (2 * Math.PI * hz) / sr
  const alpha = Math.sin(w) / Math.SQRT2
  const cw = Math.cos(w)
  const a0 = 1 + alpha
  const b0 = (1 + cw) / 2 / a0
  const b1 = -(1 + cw) / a0
  const a1 = (-2 * cw) / a0
  const a2 = (1 - alpha) / a0
  const out = new Float32Array(x.length)
  let x1 = 0
  let x2 = 0
  let y1 = 0
  let y2 = 0
  for (let i = 0; i < x.length; i++) {
    const v = x[i]!
    const y = b0 * v + b1 * x1 + b0 * x2 - a1 * y1 - a2 * y2
    x2 = x1
    x1 = v
    y2 = y1
    y1 = y
    out[i] = y
  }
  return out
}

// ---------------------------------------------------------------------------------------------
// Effects

/** Two-pole resonator (Klatt): unity gain at DC, centre `hz`, bandwidth `bw` Hz. In place. */
const resonate = (x: Float64Array, sr: number, hz: number, bw: number) => {
  if (hz >= 0.45 * sr) return
  const c = -Math.exp((-2 * Math.PI * bw) / sr)
  const b = 2 * Math.exp((-Math.PI * bw) / sr) * Math.cos((2 * Math.PI * hz) / sr)
  const a = 1 - b - c
  let y1 = 0
  let y2 = 0
  for (let i = 0; i < x.length; i++) {
    const y = a * x[i]! + b * y1 + c * y2
    y2 = y1
    y1 = y
    x[i] = y
  }
}

const toFloat32Peak = (x: Float64Array, peakLevel: number): Float32Array => {
  let p = 0
  for (const v of x) p = Math.max(p, Math.abs(v))
  const out = new Float32Array(x.length)
  const g = p > 0 ? peakLevel / p : 0
  for (let i = 0; i < x.length; i++) out[i] = x[i]! * g
  return out
}

export const renderEffect = (effect: Effect, sr: number, voiceF0: number, seed: number): Float32Array =>
  effect === "naer" ? chuckle(sr, voiceF0, seed) : exhale(sr, seed)

const ms = (v: number, sr: number) => Math.round((v * sr) / 1000)

/**
 * Four "ha" bursts: 35 ms aspirated onset + 90 ms voiced vowel each, 70 ms apart, 30 ms lead and
 * 60 ms tail (CHUCKLE_MS = 800). Each burst is 20 % softer and 6 % lower than the one before.
 */
const chuckle = (sr: number, voiceF0: number, seed: number): Float32Array => {
  const rand = mulberry32(seed)
  const total = ms(CHUCKLE_MS, sr)
  const source = new Float64Array(total)
  const bursts = 4
  const onset = ms(35, sr)
  const vowel = ms(90, sr)
  const gap = ms(70, sr)
  let at = ms(30, sr)
  let phase = 0
  let prevPulse = 0
  for (let b = 0; b < bursts; b++) {
    const amp = 0.8 ** b
    const f0Start = voiceF0 * 1.3 * (1 - 0.06 * b)
    for (let i = 0; i < onset; i++) {
      // Aspiration: noise rising into the vowel.
      const env = Math.sin((0.5 * Math.PI * i) / onset)
      source[at + i] = 0.35 * amp * env * gaussian(rand)
    }
    at += onset
    const attack = ms(10, sr)
    const release = ms(45, sr)
    for (let i = 0; i < vowel; i++) {
      const f0 = f0Start * (1 - (0.1 * i) / vowel)
      phase = (phase + f0 / sr) % 1
      // Rosenberg pulse (open 40 %, closing 16 % of the period), differentiated for lip radiation.
      const pulse = phase < 0.4 ? 0.5 - 0.5 * Math.cos((Math.PI * phase) / 0.4) : phase < 0.56 ? Math.cos((Math.PI * (phase - 0.4)) / 0.32) : 0
      const voiced = (pulse - prevPulse) * 8
      prevPulse = pulse
      const env = i < attack ? i / attack : i > vowel - release ? Math.cos((0.5 * Math.PI * (i - (vowel - release))) / release) ** 2 : 1
      source[at + i] = amp * env * (voiced + 0.12 * gaussian(rand))
    }
    at += vowel + (b + 1 < bursts ? gap : 0)
  }
  // /a/ formants, raised a little for higher voices.
  const scale = voiceF0 > 165 ? 1.12 : 1
  for (const [hz, bw] of [[750, 90], [1150, 110], [2500, 160], [3500, 250]] as const) resonate(source, sr, hz * scale, bw)
  return toFloat32Peak(source, 0.5)
}

/** 90 ms rise, 370 ms fade, 40 ms silence (EXHALE_MS = 500); breath noise shaped at 500/1500 Hz. */
const exhale = (sr: number, seed: number): Float32Array => {
  const rand = mulberry32(seed)
  const total = ms(EXHALE_MS, sr)
  const rise = ms(90, sr)
  const fade = ms(370, sr)
  const x = new Float64Array(total)
  for (let i = 0; i < rise + fade && i < total; i++) {
    const env = i < rise ? 0.5 - 0.5 * Math.cos((Math.PI * i) / rise) : Math.cos((0.5 * Math.PI * (i - rise)) / fade) ** 2
    x[i] = env * gaussian(rand)
  }
  const low = Float64Array.from(x)
  resonate(low, sr, 500, 350)
  resonate(x, sr, 1500, 700)
  // Sum of the two broad bands, DC removed (breath has no DC).
  let prev = 0
  for (let i = 0; i < total; i++) {
    const v = x[i]! + 0.7 * low[i]!
    x[i] = v - prev
    prev = v
  }
  return toFloat32Peak(x, 0.22)
}
