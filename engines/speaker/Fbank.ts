/**
 * Log mel filterbank features as Kaldi computes them (`compute-fbank-feats`, and
 * `torchaudio.compliance.kaldi.fbank` with its defaults), the front end that published neural
 * speaker embedding models (WeSpeaker, 3D-Speaker, NeMo exports) were trained on. A model run
 * on other features gives vectors that look fine and mean nothing, so every detail follows
 * Kaldi: 16-bit sample scale, 25 ms frames every 10 ms with only whole frames (snip_edges),
 * no dither, DC removed per frame, pre-emphasis 0.97, Povey window, FFT padded to 512, power
 * spectrum, triangular filters on Kaldi's mel scale (1127 ln(1 + f/700)) from 20 Hz to
 * Nyquist, natural log floored at float epsilon. Mean normalisation over a window (CMN) is the
 * caller's, as it depends on the window.
 */
import { PowerSpectrum } from "../audio/Fft.ts"

const SAMPLE_RATE = 16000
export const FBANK_FRAME_SAMPLES = 400
export const FBANK_HOP_SAMPLES = 160
const FFT_SIZE = 512
const LOW_HZ = 20
const PRE_EMPHASIS = 0.97
const FLOAT_EPSILON = 1.1920928955078125e-7

const kaldiMel = (hz: number) => 1127 * Math.log(1 + hz / 700)

interface Tables {
  readonly window: Float64Array
  /** Per band: first FFT bin and weights. */
  readonly filters: ReadonlyArray<{ readonly first: number; readonly weights: Float64Array }>
}

const tablesByBins = new Map<number, Tables>()

const tablesFor = (melBins: number): Tables => {
  const cached = tablesByBins.get(melBins)
  if (cached !== undefined) return cached
  const window = new Float64Array(FBANK_FRAME_SAMPLES)
  for (let n = 0; n < FBANK_FRAME_SAMPLES; n++) window[n] = (0.5 - 0.5 * Math.cos((2 * Math.PI * n) / (FBANK_FRAME_SAMPLES - 1))) ** 0.85
  const low = kaldiMel(LOW_HZ)
  const high = kaldiMel(SAMPLE_RATE / 2)
  const step = (high - low) / (melBins + 1)
  const binHz = SAMPLE_RATE / FFT_SIZE
  const filters = []
  for (let b = 0; b < melBins; b++) {
    const left = low + b * step
    const centre = left + step
    const right = centre + step
    const weights: Array<number> = []
    let first = -1
    // Kaldi weighs FFT bins 0 … N/2 − 1 by their mel position; Nyquist is left out.
    for (let k = 0; k < FFT_SIZE / 2; k++) {
      const m = kaldiMel(k * binHz)
      if (m <= left || m >= right) continue
      if (first < 0) first = k
      weights[k - first] = m <= centre ? (m - left) / (centre - left) : (right - m) / (right - centre)
    }
    filters.push({ first: Math.max(0, first), weights: Float64Array.from(weights, (w) => w ?? 0) })
  }
  const tables = { window, filters }
  tablesByBins.set(melBins, tables)
  return tables
}

export const fbankFrameCount = (samples: number): number =>
  samples < FBANK_FRAME_SAMPLES ? 0 : Math.floor((samples - FBANK_FRAME_SAMPLES) / FBANK_HOP_SAMPLES) + 1

/** Frame-major log mel energies of 16 kHz mono float PCM in [-1, 1]: frames × melBins. */
export const fbank = (pcm: Float32Array, melBins: number): { readonly frames: number; readonly features: Float32Array } => {
  if (!(Number.isInteger(melBins) && melBins >= 8 && melBins <= 256)) throw new RangeError(`melBins must be an integer in 8…256, got ${melBins}`)
  const { window, filters } = tablesFor(melBins)
  const frames = fbankFrameCount(pcm.length)
  const features = new Float32Array(frames * melBins)
  const fft = new PowerSpectrum(FFT_SIZE)
  const frame = new Float64Array(FBANK_FRAME_SAMPLES)
  const power = new Float64Array(fft.bins)
  for (let i = 0; i < frames; i++) {
    const at = i * FBANK_HOP_SAMPLES
    let mean = 0
    for (let n = 0; n < FBANK_FRAME_SAMPLES; n++) mean += pcm[at + n]! * 32768
    mean /= FBANK_FRAME_SAMPLES
    // Pre-emphasis after DC removal, the first sample against itself (Kaldi's convention).
    for (let n = FBANK_FRAME_SAMPLES - 1; n >= 0; n--) {
      const s = pcm[at + n]! * 32768 - mean
      const previous = n > 0 ? pcm[at + n - 1]! * 32768 - mean : s
      frame[n] = (s - PRE_EMPHASIS * previous) * window[n]!
    }
    fft.compute(frame, power)
    for (let b = 0; b < melBins; b++) {
      const { first, weights } = filters[b]!
      let acc = 0
      for (let k = 0; k < weights.length; k++) acc += power[first + k]! * weights[k]!
      features[i * melBins + b] = Math.log(Math.max(acc, FLOAT_EPSILON))
    }
  }
  return { frames, features }
}
