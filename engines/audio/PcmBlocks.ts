/**
 * Float or s16 blocks at an engine's rate in, s16 blocks at the caller's rate out: the streaming form
 * of `floatToInt16(resample(samples))`. The resampler keeps its state between blocks and its
 * concatenated output equals the one-shot output sample for sample (Resampler.ts), and the s16
 * conversion is per sample, so the blocks of a synthesis add up to exactly the bytes of the
 * same synthesis done whole. Empty output blocks are not passed on.
 */
import { floatToInt16 } from "./Pcm.ts"
import { Resampler } from "./Resampler.ts"

export class PcmBlocks {
  private readonly resampler: Resampler | undefined
  /** Output samples passed on so far. */
  samples = 0

  constructor(inRate: number, outRate: number, private readonly out: (pcm: Int16Array) => void) {
    this.resampler = inRate === outRate ? undefined : new Resampler(inRate, outRate)
  }

  /** Hazard: an Int16Array block at the output rate is passed on as it is, not copied. */
  push(block: Float32Array | Int16Array): void {
    if (block instanceof Int16Array) return this.passInt16(this.resampler === undefined ? block : this.resampler.pushInt16(block))
    this.pass(this.resampler === undefined ? block : this.resampler.push(block))
  }

  /** The resampler's tail; call once, after the last block. */
  end(): void {
    if (this.resampler !== undefined) this.pass(this.resampler.flush())
  }

  private pass(samples: Float32Array) {
    if (samples.length > 0) this.passInt16(floatToInt16(samples))
  }

  private passInt16(samples: Int16Array) {
    if (samples.length === 0) return
    this.samples += samples.length
    this.out(samples)
  }
}
