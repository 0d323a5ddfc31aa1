/**
 * Sentence streaming outside the engines (a segmenter plus an engine that hands its audio over
 * in blocks): segment N+1 is synthesized while segment N is being sent, results are emitted
 * strictly in order, and at most `ahead` syntheses are in flight, so a slow reader bounds the
 * work done for it. Within a segment, each block is emitted as soon as it arrives, so the first
 * audio leaves when the engine's first block is made, not when its sentence is done.
 *
 * Memory: the blocks of a segment that is ahead of the reader wait in that segment's queue (at
 * most `ahead` segments' audio). Interrupting the caller interrupts the in-flight syntheses
 * (they are child fibers), which cancels their pool tasks at their next block.
 */
import { Cause, Effect, Fiber, Queue } from "effect"

export const streamInOrder = <S, B, A, E, E2, R, R2>(
  segments: ReadonlyArray<S>,
  ahead: number,
  /** Synthesizes one segment, handing each block to `onBlock` (any thread callback; no waiting). */
  synthesize: (segment: S, index: number, onBlock: (block: B) => void) => Effect.Effect<A, E, R>,
  emitBlock: (block: B, segment: S, index: number) => Effect.Effect<void, E2, R2>,
  /** After the segment's last block, with what its synthesis returned. */
  endSegment: (result: A, segment: S, index: number) => Effect.Effect<void, E2, R2>,
  /**
   * Runs once the first segment's synthesis has been started (its pool task handed over), before
   * anything else: work that must not delay the first audio but must start at once.
   */
  afterFirstStart: Effect.Effect<void> = Effect.void
): Effect.Effect<void, E | E2, R | R2> =>
  Effect.gen(function*() {
    const n = segments.length
    const inFlight: Array<{ readonly fiber: Fiber.Fiber<A, E>; readonly blocks: Queue.Queue<B, Cause.Done> } | undefined> = new Array(n)
    const start = (i: number) =>
      Effect.gen(function*() {
        const blocks = yield* Queue.unbounded<B, Cause.Done>()
        const fiber = yield* Effect.forkChild(
          synthesize(segments[i]!, i, (block) => {
            Queue.offerUnsafe(blocks, block)
          }).pipe(Effect.ensuring(Queue.end(blocks))),
          // Run to the pool dispatch now: a scheduled start waits one event-loop turn (setImmediate),
          // 2.5 of 22 ms of the first byte on a loaded machine.
          { startImmediately: true }
        )
        inFlight[i] = { fiber, blocks }
      })
    const first = Math.min(Math.max(1, ahead), n)
    yield* start(0)
    yield* afterFirstStart
    // The other segments in the window start once the first block is out (or the first segment
    // is done): dispatching them before would put their pool hand-offs on the main thread while
    // the first block is on its way back, the one moment the listener is waiting for.
    let rest = first > 1
    const startRest = Effect.suspend(() => {
      if (!rest) return Effect.void
      rest = false
      return Effect.forEach(Array.from({ length: first - 1 }, (_, k) => k + 1), start, { discard: true })
    })
    for (let i = 0; i < n; i++) {
      const { fiber, blocks } = inFlight[i]!
      yield* forEachBlock(blocks, i === 0 ? (block) => Effect.andThen(emitBlock(block, segments[0]!, 0), startRest) : (block) => emitBlock(block, segments[i]!, i))
      // The queue ends when the synthesis does; a failure surfaces here, after its blocks (and a
      // first segment that failed before any block starts no others).
      const result = yield* Fiber.join(fiber)
      yield* startRest
      inFlight[i] = undefined
      if (i + ahead < n) yield* start(i + ahead)
      yield* endSegment(result, segments[i]!, i)
    }
  })

/** Runs `f` on each block as it arrives, in order, until the queue ends. */
export const forEachBlock = <B, E, R>(blocks: Queue.Dequeue<B, Cause.Done>, f: (block: B) => Effect.Effect<void, E, R>): Effect.Effect<void, E, R> =>
  Effect.gen(function*() {
    for (;;) {
      const taken = yield* Queue.takeAll(blocks).pipe(Effect.catchIf(Cause.isDone, () => Effect.succeed(undefined)))
      if (taken === undefined) return
      for (const block of taken) yield* f(block)
    }
  })
