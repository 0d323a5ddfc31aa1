/**
 * Noise suppression with RNNoise (npm `@echogarden/rnnoise-wasm`, the xiph C library compiled
 * to WASM by emscripten, with its default weights built in). Worker side: no Effect here.
 *
 * The package's default export is an emscripten factory, `RNNoise(moduleArg?) → Promise<Module>`,
 * exposing the C API: `_rnnoise_create(model)` (0 = built-in weights) → state pointer,
 * `_rnnoise_process_frame(state, out, in)` over 480 floats at 48 kHz in the int16 range
 * (-32768..32767; in place is allowed) → voice probability, `_rnnoise_destroy(state)`,
 * `_malloc` / `_free`, and the heap views (`HEAPF32`, replaced when memory grows, so it is read
 * after every call that may allocate). The module loads once per thread (`perThread`).
 *
 * RNNoise delays its output by one frame (480 samples: the analysis window is two frames), so
 * `denoise` feeds one frame of zeros past the end and drops the first 480 output samples: the
 * result is aligned with the input, sample for sample, and has the input's length.
 */
import { resample } from "../audio/Resampler.ts"
import { perThread } from "../tasks.ts"

export const RNNOISE_SAMPLE_RATE = 48000
export const RNNOISE_FRAME_SAMPLES = 480
/** Output lags input by this many samples at 48 kHz. */
const RNNOISE_DELAY = RNNOISE_FRAME_SAMPLES

/** The part of the emscripten module this file uses (the package ships no typings). */
interface RnnoiseModule {
  readonly HEAPF32: Float32Array
  _rnnoise_create(model: number): number
  _rnnoise_destroy(state: number): void
  _rnnoise_process_frame(state: number, out: number, input: number): number
  _rnnoise_get_frame_size(): number
  _malloc(bytes: number): number
  _free(ptr: number): void
}

// A non-literal specifier: the package has no typings, and this keeps its load lazy.
const PACKAGE: string = "@echogarden/rnnoise-wasm"

/** The WASM module of this thread, instantiated on first use. */
export const loadRnnoise = perThread(async (): Promise<RnnoiseModule> => {
  const factory = (await import(PACKAGE)).default as (moduleArg?: object) => Promise<RnnoiseModule>
  const module = await factory({})
  const frame = module._rnnoise_get_frame_size()
  if (frame !== RNNOISE_FRAME_SAMPLES) throw new Error(`rnnoise frame size is ${frame}, expected ${RNNOISE_FRAME_SAMPLES}`)
  return module
})

/**
 * Denoises float samples at 48 kHz in the int16 range with one fresh RNNoise state (the state
 * carries across the frames of this call, and is destroyed before returning). Same length out.
 */
export const denoise48k = (module: RnnoiseModule, samples: Float32Array): Float32Array => {
  const out = new Float32Array(samples.length)
  if (samples.length === 0) return out
  const state = module._rnnoise_create(0)
  if (state === 0) throw new Error("rnnoise_create failed")
  const ptr = module._malloc(RNNOISE_FRAME_SAMPLES * 4)
  try {
    if (ptr === 0) throw new Error("rnnoise: malloc failed")
    const at = ptr >>> 2
    const total = samples.length + RNNOISE_DELAY
    for (let from = 0; from < total; from += RNNOISE_FRAME_SAMPLES) {
      let heap = module.HEAPF32
      const n = Math.max(0, Math.min(RNNOISE_FRAME_SAMPLES, samples.length - from))
      if (n > 0) heap.set(samples.subarray(from, from + n), at)
      if (n < RNNOISE_FRAME_SAMPLES) heap.fill(0, at + n, at + RNNOISE_FRAME_SAMPLES) // pad the last frame
      module._rnnoise_process_frame(state, ptr, ptr)
      heap = module.HEAPF32
      // Output sample j of this frame is input sample from + j - RNNOISE_DELAY.
      const first = Math.max(0, RNNOISE_DELAY - from)
      const last = Math.min(RNNOISE_FRAME_SAMPLES, samples.length + RNNOISE_DELAY - from)
      for (let j = first; j < last; j++) out[from + j - RNNOISE_DELAY] = heap[at + j]!
    }
  } finally {
    if (ptr !== 0) module._free(ptr)
    module._rnnoise_destroy(state)
  }
  return out
}

/**
 * Noise removal of mono Int16 PCM at any rate: resampled to 48 kHz and back when needed; the
 * result has the input's rate and length.
 */
export const denoise = async (pcm: Int16Array, sampleRate: number): Promise<Int16Array> => {
  if (!Number.isInteger(sampleRate) || sampleRate <= 0) throw new RangeError(`sample rate must be a positive integer Hz, got ${sampleRate}`)
  if (pcm.length === 0) return new Int16Array(0)
  const module = await loadRnnoise()
  const input = Float32Array.from(pcm)
  const at48 = sampleRate === RNNOISE_SAMPLE_RATE ? input : resample(input, sampleRate, RNNOISE_SAMPLE_RATE)
  const cleaned = denoise48k(module, at48)
  const back = sampleRate === RNNOISE_SAMPLE_RATE ? cleaned : resample(cleaned, RNNOISE_SAMPLE_RATE, sampleRate)
  const out = new Int16Array(pcm.length)
  for (let i = 0; i < out.length; i++) {
    const v = Math.round(back[i] ?? 0)
    out[i] = v > 32767 ? 32767 : v < -32768 ? -32768 : v
  }
  return out
}
