/**
 * Worker-side task kind of noise removal.
 *
 * `denoise.clean`: RNNoise over mono Int16 PCM at any rate (resampled to 48 kHz and back inside);
 * the caller moves the input (`transfer: [pcm.buffer]`) and the cleaned PCM, same rate and
 * length, moves back. The WASM module loads once per thread.
 */
import { defineTasks, TaskError, type Transfer, transfer } from "../tasks.ts"
import { denoise } from "./Rnnoise.ts"

export interface DenoiseCleanInput {
  /** s16le mono. */
  readonly pcm: Int16Array
  /** Hz of `pcm`. */
  readonly sampleRate: number
}

export interface DenoiseCleanOutput {
  /** Same rate and length as the input (moved). */
  readonly pcm: Int16Array
  /** Wall time in the worker (resampling and RNNoise; the first call includes the WASM load), ms. */
  readonly engineMs: number
}

export const denoiseTasks = defineTasks({
  "denoise.clean": async (input: DenoiseCleanInput): Promise<Transfer<DenoiseCleanOutput>> => {
    if (!(input.pcm instanceof Int16Array)) throw new TaskError("InvalidInput", "pcm must be an Int16Array", "DenoiseError")
    if (!Number.isInteger(input.sampleRate) || input.sampleRate < 8000 || input.sampleRate > 192000) {
      throw new TaskError("InvalidInput", `sampleRate must be an integer in 8000..192000, got ${input.sampleRate}`, "DenoiseError")
    }
    const started = performance.now()
    let pcm: Int16Array
    try {
      pcm = await denoise(input.pcm, input.sampleRate)
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e)
      throw new TaskError("EngineUnavailable", `RNNoise (npm package @echogarden/rnnoise-wasm) failed: ${message}`, "DenoiseError")
    }
    const output: DenoiseCleanOutput = { pcm, engineMs: performance.now() - started }
    return transfer(output, [pcm.buffer as ArrayBuffer])
  }
})
