/**
 * Scheduling of wire-protocol messages from many socket connections onto PGlite's single backend.
 *
 * PGlite is one PostgreSQL backend session. `PGLiteSocketServer` lets several clients connect and
 * queues their messages, but its own queue (0.2.17) hands the backend to another connection after
 * every single message unless an explicit `BEGIN` block is open. An extended-protocol query is
 * several messages (Parse, Bind, Describe, Execute, Sync), so two connections interleave and one
 * executes the other's unnamed portal ("portal \"\" does not exist", or worse, the wrong rows).
 *
 * This queue keeps the backend with one connection from its first message up to a message that
 * ends a request (Sync or a simple Query), and for as long as a transaction stays open after it.
 * It drops in for the library's internal queue (same three methods the handler calls) and adds
 * clean-up for connections that vanish mid-request and `idle()` for an orderly shutdown.
 *
 * Hazard: a connection that holds a transaction open blocks every other connection until it
 * commits or disconnects, so code must never wait, inside a transaction, for a query that runs
 * on another connection.
 */
import type { PGlite } from "@electric-sql/pglite"

/** Message type bytes (PostgreSQL frontend protocol 3.0). */
const SYNC = 0x53 // 'S'
const QUERY = 0x51 // 'Q'
const TERMINATE = 0x58 // 'X'

const syncMessage = new Uint8Array([SYNC, 0, 0, 0, 4])

const queryMessage = (text: string): Uint8Array => {
  const body = Buffer.from(`${text}\0`, "utf8")
  const message = Buffer.alloc(5 + body.length)
  message[0] = QUERY
  message.writeInt32BE(4 + body.length, 1)
  body.copy(message, 5)
  return message
}

interface Pending {
  readonly handlerId: number
  /** `undefined` marks the clean-up entry queued when a connection goes away. */
  readonly message: Uint8Array | undefined
  readonly onData: (data: Uint8Array) => void
  readonly resolve: (bytes: number) => void
  readonly reject: (error: Error) => void
}

export class PgliteSessionQueue {
  private queue: Array<Pending> = []
  /** Connection that currently holds the backend, or null when any may take it. */
  private owner: number | null = null
  /** True while the owner is in the middle of a request (no Sync seen yet). */
  private midRequest = false
  private running = false
  private idleWaiters: Array<() => void> = []

  constructor(private readonly db: PGlite) {}

  /** Called by `PGLiteSocketHandler` for every complete message; resolves with the reply size. */
  enqueue(handlerId: number, message: Uint8Array, onData: (data: Uint8Array) => void): Promise<number> {
    return new Promise((resolve, reject) => {
      this.queue.push({ handlerId, message, onData, resolve, reject })
      void this.drain()
    })
  }

  getQueueLength(): number {
    return this.queue.length
  }

  /** The connection closed: its waiting messages will never be answered. */
  clearQueueForHandler(handlerId: number): void {
    this.queue = this.queue.filter((pending) => {
      if (pending.handlerId !== handlerId || pending.message === undefined) return true
      pending.reject(new Error("connection closed"))
      return false
    })
  }

  /**
   * Runs after `clearQueueForHandler`: if the closed connection still holds the backend (an
   * open transaction, or a request cut off before its Sync), end its request and roll back.
   * Queued like a message so it cannot overlap a message of the same connection in flight.
   */
  clearTransactionIfNeeded(handlerId: number): Promise<void> {
    return new Promise((resolve) => {
      this.queue.push({ handlerId, message: undefined, onData: () => {}, resolve: () => resolve(), reject: () => resolve() })
      void this.drain()
    })
  }

  /** Resolves once no message is queued or running (used before closing PGlite). */
  idle(): Promise<void> {
    if (!this.running && this.queue.length === 0) return Promise.resolve()
    return new Promise((resolve) => this.idleWaiters.push(resolve))
  }

  private next(): Pending | undefined {
    const index = this.owner === null ? (this.queue.length > 0 ? 0 : -1) : this.queue.findIndex((p) => p.handlerId === this.owner)
    return index === -1 ? undefined : this.queue.splice(index, 1)[0]
  }

  private async drain(): Promise<void> {
    if (this.running) return
    this.running = true
    try {
      for (let pending = this.next(); pending !== undefined; pending = this.next()) {
        if (pending.message === undefined) {
          await this.release(pending)
        } else {
          await this.execute(pending, pending.message)
        }
      }
    } finally {
      this.running = false
      // A connection may own the backend while waiting for its next message; that is not idle
      // work, so shutdown only waits for the queue itself.
      if (this.queue.length === 0) {
        const waiters = this.idleWaiters
        this.idleWaiters = []
        for (const wake of waiters) wake()
      }
    }
  }

  private async execute(pending: Pending, message: Uint8Array): Promise<void> {
    const type = message[0]
    if (type === TERMINATE) {
      // Never forward a client's Terminate: the backend is shared and outlives every client.
      pending.resolve(0)
      return
    }
    let bytes = 0
    try {
      await this.db.runExclusive(() =>
        this.db.execProtocolRawStream(message, {
          onRawData: (data) => {
            bytes += data.length
            pending.onData(data)
          }
        })
      )
    } catch (error) {
      this.owner = null
      this.midRequest = false
      pending.reject(error instanceof Error ? error : new Error(String(error)))
      return
    }
    // A startup packet has no type byte; its first byte is the high byte of its length (0).
    const endsRequest = type === SYNC || type === QUERY || type === 0
    this.midRequest = !endsRequest
    this.owner = endsRequest && !this.db.isInTransaction() ? null : pending.handlerId
    pending.resolve(bytes)
  }

  private async release(pending: Pending): Promise<void> {
    if (this.owner === pending.handlerId) {
      try {
        await this.db.runExclusive(async () => {
          const discard = { onRawData: () => {} }
          // A request cut off after an error leaves the backend skipping messages until Sync.
          if (this.midRequest) await this.db.execProtocolRawStream(syncMessage, discard)
          if (this.db.isInTransaction()) await this.db.execProtocolRawStream(queryMessage("ROLLBACK"), discard)
        })
      } catch {
        // PGlite already closed (shutdown); nothing left to clean.
      }
      this.owner = null
      this.midRequest = false
    }
    pending.resolve(0)
  }
}
