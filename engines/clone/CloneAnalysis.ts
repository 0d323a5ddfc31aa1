/**
 * Voice clone analysis as the main thread sees it: one reference sample (16 kHz Int16 with its
 * VAD segments, optional transcript) → the speaker profile and the synthesis plan
 * (`clone.analyze`). A failure stays `EngineError` (502 engine_failed at the edge, 503 when the
 * pool is busy): no clone-specific reason comes back from the engine.
 *
 * `CloneAnalysis` is the interface; `PoolCloneAnalysis.layer` runs it on the inference worker
 * pool. A neural zero-shot engine would be another layer of the same tag. Main thread only.
 */
import { Context, Effect, Layer } from "effect"
import { type EngineError, Inference } from "../Inference.ts"
import type { CloneAnalyzeInput, CloneAnalyzeOutput } from "./tasks.ts"

export class CloneAnalysis extends Context.Service<CloneAnalysis, {
  /** `input.pcm`'s buffer moves to the engine: the caller passes a copy it no longer needs. */
  readonly analyze: (input: CloneAnalyzeInput) => Effect.Effect<CloneAnalyzeOutput, EngineError>
}>()("speech/engines/CloneAnalysis") {}

const makePoolCloneAnalysis = Effect.map(Inference, (pool) =>
  CloneAnalysis.of({
    analyze: (input) => pool.run("clone.analyze", input, { priority: "batch", transfer: [input.pcm.buffer as ArrayBuffer] })
  }))

/** `CloneAnalysis` on the worker pool, batch priority. */
export const PoolCloneAnalysis = {
  make: makePoolCloneAnalysis,
  layer: Layer.effect(CloneAnalysis, makePoolCloneAnalysis) as Layer.Layer<CloneAnalysis, never, Inference>
}
