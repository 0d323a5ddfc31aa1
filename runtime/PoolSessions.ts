/**
 * The main-thread side of session affinity (`Inference.openSession`; the contract is in
 * engines/Inference.ts, the worker side in engines/sessions.ts): which thread hosts which
 * session, the bound per thread, and the ends of sessions (closed, failed, crashed).
 *
 * Each worker thread announces one control port when its task module loads; a session is opened
 * by posting `{ open, kind, init, port }` on the control port of the thread with the fewest
 * sessions, `port` being one end of a MessageChannel made for that session. From then on the
 * session talks over its own port only. A port's 'close' event is how an end is seen: the worker
 * closes it after a `close` (normal end) or a failed `send` (after posting `failed`); when the
 * thread dies Node closes it too, and piscina's 'workerDestroy' is a second witness for that.
 */
import { Effect, Scope } from "effect"
import { MessageChannel, type MessagePort } from "node:worker_threads"
import { EngineError, type EngineErrorReason, type SessionHandle, type SessionOptions } from "../engines/Inference.ts"
import type { FromSession, OpenMessage, SessionHostAnnouncement, ToSession } from "../engines/sessions.ts"
import type { TaskFailure } from "../engines/tasks.ts"

/** How long an open waits for threads that have not announced their host yet (start-up, a replacement), ms. */
const HOST_WAIT_MS = 10_000

interface Host {
  readonly threadId: number
  readonly control: MessagePort
  readonly sessions: Set<Live>
}

interface Live {
  readonly kind: string
  readonly host: Host
  readonly port: MessagePort
  opened: boolean
  /** Undefined while the session lives; then how it ended (undefined error: closed normally). */
  ended: { readonly error: EngineError | undefined } | undefined
  closing: boolean
  lastCall: number
  readonly calls: Map<number, (result: Effect.Effect<unknown, EngineError>) => void>
  readonly onEnd: Array<() => void>
  onOpen: ((error: EngineError | undefined) => void) | undefined
}

export interface PoolSessionsOptions {
  readonly perWorker: number
  /** Threads the pool has now (some may not have announced a host yet). */
  readonly threads: () => number
  /** The pool is closing or closed: opens fail with Closed. */
  readonly closed: () => boolean
}

export const makePoolSessions = (options: PoolSessionsOptions) => {
  const hosts = new Map<number, Host>()
  let hostWaiters: Array<() => void> = []
  let count = 0

  const error = (reason: EngineErrorReason, kind: string, message: string, failure?: TaskFailure) =>
    new EngineError({ reason, kind, message, ...(failure ? { failure } : {}) })

  const end = (live: Live, failure: EngineError | undefined) => {
    if (live.ended !== undefined) return
    live.ended = { error: failure }
    live.host.sessions.delete(live)
    count--
    const gone = failure ?? error("Closed", live.kind, "the session is closed")
    for (const reply of live.calls.values()) reply(Effect.fail(gone))
    live.calls.clear()
    live.onOpen?.(gone)
    live.onOpen = undefined
    for (const f of live.onEnd.splice(0)) f()
    live.port.close()
  }

  const crashed = (live: Live) =>
    options.closed()
      ? error("Closed", live.kind, "worker pool closed")
      : error("WorkerCrashed", live.kind, `the worker thread hosting this ${live.kind} session ended`)

  /** Announced by a worker thread as its task module loaded. */
  const announce = (m: SessionHostAnnouncement) => {
    m.port.unref()
    hosts.set(m.sessionHost, { threadId: m.sessionHost, control: m.port, sessions: new Set() })
    // The first sign of a dead thread, often before piscina's 'workerDestroy': place nothing there.
    m.port.on("close", () => threadGone(m.sessionHost))
    const waiting = hostWaiters
    hostWaiters = []
    for (const f of waiting) f()
  }

  /** piscina's 'workerDestroy': whatever the thread hosted has ended with it. */
  const threadGone = (threadId: number) => {
    const host = hosts.get(threadId)
    if (host === undefined) return
    hosts.delete(threadId)
    for (const live of [...host.sessions]) end(live, crashed(live))
    host.control.close()
  }

  const pickHost = (): Host | undefined => {
    let best: Host | undefined
    for (const host of hosts.values()) {
      if (host.sessions.size < options.perWorker && (best === undefined || host.sessions.size < best.sessions.size)) best = host
    }
    return best
  }

  /** A host with room, waiting (bounded) for threads that have yet to announce theirs. */
  const host = (kind: string): Effect.Effect<Host, EngineError> =>
    Effect.suspend(() => {
      if (options.closed()) return Effect.fail(error("Closed", kind, "worker pool closed"))
      const found = pickHost()
      if (found !== undefined) return Effect.succeed(found)
      if (hosts.size >= options.threads()) {
        return Effect.fail(error("SessionsFull", kind, `every worker thread already hosts ${options.perWorker} sessions (STT_SESSIONS_PER_WORKER)`))
      }
      return Effect.callback<void>((resume) => {
        const go = () => resume(Effect.void)
        hostWaiters.push(go)
        const timer = setTimeout(() => {
          hostWaiters = hostWaiters.filter((f) => f !== go)
          go()
        }, HOST_WAIT_MS)
        timer.unref()
        return Effect.sync(() => {
          clearTimeout(timer)
          hostWaiters = hostWaiters.filter((f) => f !== go)
        })
      }).pipe(Effect.flatMap(() => pickHost() === undefined
        ? Effect.fail(error("SessionsFull", kind, hosts.size === 0 ? "no worker thread hosts sessions" : `every worker thread already hosts ${options.perWorker} sessions`))
        : host(kind)))
    })

  const listen = (live: Live, onEvent: (event: unknown) => void) => {
    live.port.on("message", (m: FromSession) => {
      if ("event" in m) {
        if (live.ended === undefined) onEvent(m.event)
      } else if ("reply" in m) {
        const reply = live.calls.get(m.reply)
        live.calls.delete(m.reply)
        reply?.(m.ok ? Effect.succeed(m.value) : Effect.fail(error("TaskFailed", live.kind, m.error.message, m.error)))
      } else if ("opened" in m) {
        live.opened = true
        live.onOpen?.(undefined)
        live.onOpen = undefined
      } else if ("openFailed" in m) {
        end(live, error("TaskFailed", live.kind, m.openFailed.message, m.openFailed))
      } else if ("failed" in m) {
        end(live, error("TaskFailed", live.kind, m.failed.message, m.failed))
      }
    })
    // A close we asked for is a normal end; any other is the thread's death.
    live.port.on("close", () => end(live, live.closing ? undefined : crashed(live)))
  }

  const post = (live: Live, m: ToSession, transfer?: ReadonlyArray<ArrayBuffer>) => live.port.postMessage(m, (transfer ?? []) as Array<ArrayBuffer>)

  const closeLive = (live: Live): Effect.Effect<void> =>
    Effect.callback<void>((resume) => {
      if (live.ended !== undefined) return resume(Effect.void)
      live.onEnd.push(() => resume(Effect.void))
      if (!live.closing) {
        live.closing = true
        post(live, { close: true })
      }
    })

  const handle = (live: Live): SessionHandle => ({
    threadId: live.host.threadId,
    send: (message, transfer) =>
      Effect.suspend(() => {
        if (live.ended !== undefined || live.closing) return Effect.fail(live.ended?.error ?? error("Closed", live.kind, "the session is closed"))
        post(live, { send: message }, transfer)
        return Effect.void
      }),
    call: <A>(message: unknown, transfer?: ReadonlyArray<ArrayBuffer>) =>
      Effect.callback<A, EngineError>((resume) => {
        if (live.ended !== undefined || live.closing) return resume(Effect.fail(live.ended?.error ?? error("Closed", live.kind, "the session is closed")))
        const id = ++live.lastCall
        live.calls.set(id, resume as (result: Effect.Effect<unknown, EngineError>) => void)
        post(live, { call: id, message }, transfer)
        // An interrupted caller forgets the reply; the handler still runs (order is kept).
        return Effect.sync(() => live.calls.delete(id))
      }),
    done: Effect.callback<void, EngineError>((resume) => {
      const settle = () => resume(live.ended!.error === undefined ? Effect.void : Effect.fail(live.ended!.error))
      if (live.ended !== undefined) return settle()
      live.onEnd.push(settle)
    }),
    close: closeLive(live)
  })

  const open = (kind: string, init: unknown, onEvent: (event: unknown) => void, sessionOptions?: SessionOptions): Effect.Effect<SessionHandle, EngineError, Scope.Scope> =>
    Effect.flatMap(host(kind), (h) =>
      Effect.acquireRelease(
        Effect.callback<Live, EngineError>((resume) => {
          const { port1, port2 } = new MessageChannel()
          const live: Live = {
            kind, host: h, port: port1, opened: false, ended: undefined, closing: false,
            lastCall: 0, calls: new Map(), onEnd: [], onOpen: undefined
          }
          h.sessions.add(live)
          count++
          live.onOpen = (failure) => resume(failure === undefined ? Effect.succeed(live) : Effect.fail(failure))
          // Its 'message' listener refs the port: an open session keeps the process alive, as
          // anyone waiting on its replies needs; the scope (or the pool's close) ends it.
          listen(live, onEvent)
          try {
            h.control.postMessage({ open: 0, kind, init, port: port2 } satisfies OpenMessage, [port2, ...(sessionOptions?.transfer ?? [])] as Array<ArrayBuffer>)
          } catch (e) {
            // The init could not be posted (not cloneable): the caller's bug, not the thread's.
            const message = e instanceof Error ? e.message : String(e)
            end(live, error("TaskFailed", kind, message, { name: "DataCloneError", reason: "InputNotCloneable", message }))
          }
          // Interrupted while opening: the half-open session is closed once the worker has it.
          return Effect.sync(() => {
            live.onOpen = undefined
            live.closing = true
            if (live.ended === undefined) post(live, { close: true })
          })
        }),
        closeLive
      )).pipe(Effect.map(handle))

  /** The pool closes: every session ends as Closed (the threads are about to be ended). */
  const closeAll = () => {
    for (const h of hosts.values()) for (const live of [...h.sessions]) end(live, error("Closed", live.kind, "worker pool closed"))
  }

  return { announce, threadGone, open, closeAll, count: () => count }
}
