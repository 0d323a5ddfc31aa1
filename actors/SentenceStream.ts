/**
 * Sentence streaming outside the engines (a segmenter plus a non-streaming engine): segment N+1
 * is synthesized while segment N is being sent, results are emitted strictly in order, and at
 * most `ahead` syntheses are in flight, so a slow reader bounds the work done for it.
 *
 * Interrupting the caller interrupts the in-flight syntheses (they are child fibers), which
 * aborts their pool tasks.
 */
import { Effect, Fiber } from "effect"

export const synthesizeInOrder = <S, A, E, E2, R, R2>(
  segments: ReadonlyArray<S>,
  ahead: number,
  synthesize: (segment: S, index: number) => Effect.Effect<A, E, R>,
  emit: (result: A, segment: S, index: number) => Effect.Effect<void, E2, R2>
): Effect.Effect<void, E | E2, R | R2> =>
  Effect.gen(function*() {
    const n = segments.length
    const inFlight: Array<Fiber.Fiber<A, E> | undefined> = new Array(n)
    const start = (i: number) =>
      Effect.map(Effect.forkChild(synthesize(segments[i]!, i)), (fiber) => {
        inFlight[i] = fiber
      })
    for (let i = 0; i < Math.min(Math.max(1, ahead), n); i++) yield* start(i)
    for (let i = 0; i < n; i++) {
      const result = yield* Fiber.join(inFlight[i]!)
      inFlight[i] = undefined
      if (i + ahead < n) yield* start(i + ahead)
      yield* emit(result, segments[i]!, i)
    }
  })
