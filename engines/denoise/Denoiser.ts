/**
 * Noise removal as the main thread sees it: mono Int16 PCM at any rate → the same PCM with
 * stationary and non-stationary noise suppressed (RNNoise, `denoise.clean`), same rate and
 * length. A failure stays `EngineError` (502 engine_failed at the edge, 503 when the pool is
 * busy).
 *
 * `Denoiser` is the interface; `PoolDenoiser.layer` runs it on the inference worker pool at
 * batch priority. Main thread only.
 */
import { Context, Effect, Layer } from "effect"
import { type EngineError, Inference } from "../Inference.ts"

export class Denoiser extends Context.Service<Denoiser, {
  /**
   * `pcm`'s buffer moves to the engine when `pcm` spans all of it (the caller's array is then
   * detached: pass a copy it no longer needs); a view into a larger buffer is copied instead.
   */
  readonly clean: (pcm: Int16Array, sampleRate: number) => Effect.Effect<Int16Array, EngineError>
}>()("speech/engines/Denoiser") {}

/** An array that owns its whole (non-shared) buffer, so moving that buffer moves nothing else. */
const movable = (pcm: Int16Array): Int16Array =>
  pcm.buffer instanceof ArrayBuffer && pcm.byteOffset === 0 && pcm.byteLength === pcm.buffer.byteLength ? pcm : pcm.slice()

const makePoolDenoiser = Effect.map(Inference, (pool) =>
  Denoiser.of({
    clean: (pcm, sampleRate) =>
      Effect.suspend(() => {
        const own = movable(pcm)
        return pool.run("denoise.clean", { pcm: own, sampleRate }, { priority: "batch", transfer: [own.buffer as ArrayBuffer] })
      }).pipe(Effect.map((out) => out.pcm))
  }))

/** `Denoiser` on the worker pool (RNNoise), batch priority. */
export const PoolDenoiser = {
  make: makePoolDenoiser,
  layer: Layer.effect(Denoiser, makePoolDenoiser) as Layer.Layer<Denoiser, never, Inference>
}
