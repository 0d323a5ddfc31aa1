/**
 * The bound on media decodes running at once (each is an ffmpeg process, a core and a spill file
 * being written): `permits` run, up to `maxWaiting` more wait in arrival order, and a request
 * past that fails at once with EngineError `QueueFull` (HTTP 503 `server_busy`, which the SDKs
 * retry) instead of queueing without bound. A waiter that is interrupted (client gone) leaves
 * the queue. Counts are published after every change for the metrics.
 */
import { Effect, Semaphore } from "effect"
import { EngineError } from "../engines/Inference.ts"

export interface DecodeGateStats {
  readonly active: number
  readonly waiting: number
  /** Most ever active at once. */
  readonly peakActive: number
}

export interface DecodeGate {
  readonly run: <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E | EngineError, R>
  readonly stats: () => DecodeGateStats
}

export const makeDecodeGate = (options: {
  readonly permits: number
  readonly maxWaiting: number
  /** Called after every change of the counts (gauges). */
  readonly publish?: (stats: DecodeGateStats) => Effect.Effect<void>
  /** Called when a request is refused (a counter). */
  readonly refused?: Effect.Effect<void>
}): DecodeGate => {
  const semaphore = Semaphore.makeUnsafe(options.permits)
  let active = 0
  let waiting = 0
  let peakActive = 0
  const stats = (): DecodeGateStats => ({ active, waiting, peakActive })
  const publish = Effect.suspend(() => options.publish?.(stats()) ?? Effect.void)

  const run = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E | EngineError, R> =>
    Effect.suspend((): Effect.Effect<A, E | EngineError, R> => {
      if (active + waiting >= options.permits + options.maxWaiting) {
        return Effect.andThen(
          options.refused ?? Effect.void,
          Effect.fail(new EngineError({
            reason: "QueueFull",
            kind: "stt.decode",
            message: `too many speech-to-text files are being decoded (${active} running, ${waiting} waiting); retry shortly`
          }))
        )
      }
      waiting++
      let admitted = false
      const admit = Effect.suspend(() => {
        admitted = true
        waiting--
        active++
        peakActive = Math.max(peakActive, active)
        return publish
      })
      const inside = Effect.andThen(admit, self).pipe(
        Effect.ensuring(Effect.suspend(() => {
          if (!admitted) return Effect.void // interrupted between the permit and admission
          active--
          return publish
        }))
      )
      return Effect.andThen(publish, semaphore.withPermit(inside)).pipe(
        // Interrupted (or failed) before the permit came: leave the queue.
        Effect.ensuring(Effect.suspend(() => {
          if (admitted) return Effect.void
          waiting--
          return publish
        }))
      )
    })

  return { run, stats }
}
