/**
 * The blocks of one streamed synthesis on their way from the worker pool's message handler to
 * the fiber that sends them (actors/SentenceStream.ts, actors/TtsSession.ts): one writer, one
 * reader, unbounded (the pool task stops at its next block once the reader has gone, and the
 * look-ahead bounds how many syntheses feed mailboxes at once).
 *
 * Why not `Queue`: Effect's queue wakes a waiting taker through the scheduler, one event-loop
 * turn (setImmediate) after the offer. Here the reader waits in `Effect.callback`, whose resume
 * runs the fiber at once, inside the message handler that brought the block: a block reaches
 * the socket in the same turn it arrived in, which is the time to first audio, and each block
 * costs one scheduled task less.
 */
import { Effect } from "effect"

export class BlockMailbox<B> {
  private items: Array<B> = []
  private ended = false
  /** The reader, while it waits for a block or the end. */
  private waiter: ((taken: Effect.Effect<ReadonlyArray<B> | undefined>) => void) | undefined

  /** From any callback; ignored after `end`. */
  offer(block: B): void {
    if (this.ended) return
    this.items.push(block)
    this.wake()
  }

  /** No more blocks: the reader gets what is left, then the end. Idempotent. */
  end(): void {
    this.ended = true
    this.wake()
  }

  /** `end` as an effect, for `Effect.ensuring`. */
  readonly close: Effect.Effect<void> = Effect.sync(() => this.end())

  /** Every block waiting (at least one), or undefined once ended and empty; waits otherwise. */
  readonly takeAll: Effect.Effect<ReadonlyArray<B> | undefined> = Effect.callback((resume) => {
    if (this.items.length > 0 || this.ended) return resume(Effect.succeed(this.drain()))
    this.waiter = resume
    // An interrupted reader leaves; blocks offered later wait for nobody.
    return Effect.sync(() => {
      this.waiter = undefined
    })
  })

  private wake(): void {
    const waiter = this.waiter
    if (waiter === undefined) return
    this.waiter = undefined
    waiter(Effect.succeed(this.drain()))
  }

  private drain(): ReadonlyArray<B> | undefined {
    if (this.items.length === 0) return undefined
    const taken = this.items
    this.items = []
    return taken
  }
}

/** Runs `f` on each block as it arrives, in order, until the mailbox ends. */
export const forEachBlock = <B, E, R>(blocks: BlockMailbox<B>, f: (block: B) => Effect.Effect<void, E, R>): Effect.Effect<void, E, R> =>
  Effect.gen(function*() {
    for (;;) {
      const taken = yield* blocks.takeAll
      if (taken === undefined) return
      for (const block of taken) yield* f(block)
    }
  })
