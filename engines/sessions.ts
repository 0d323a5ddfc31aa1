/**
 * Long-lived sessions on a worker thread: the worker side of `Inference.openSession` (the
 * contract, and why sessions live outside piscina's task slots, is in engines/Inference.ts).
 *
 * An engine module exports its session kinds with `defineSessions({ "asr.stream": open })`;
 * `engines/worker.ts` merges them and exports `hostSessions`, which the worker bootstrap
 * (runtime/worker.mjs) calls once per thread. That announces a control port to the main thread
 * (`{ sessionHost, port }` on parentPort, which piscina re-emits as its 'message' event); the
 * pool posts `OpenMessage`s on it, each carrying the session's own MessagePort.
 *
 * Messages of one session are handled one at a time, in order (a promise chain per session), so
 * a handler never sees a `push` before the `open` it follows has finished; sessions of one
 * thread interleave message by message. Everything here runs on the worker's event loop,
 * between piscina tasks (piscina's `atomics: "async"` keeps that loop running while idle).
 */
import { type MessagePort, MessageChannel, parentPort, threadId } from "node:worker_threads"
import { type TaskFailure, toTaskFailure } from "./tasks.ts"

export interface SessionContext {
  readonly kind: string
  readonly threadId: number
  /** An event for the main thread (the opener's `onEvent`), in order with the replies. */
  readonly emit: (event: unknown, transfer?: ReadonlyArray<ArrayBuffer>) => void
}

/** One open session on this thread. */
export interface SessionHandler {
  /** A message from the main thread; what it returns answers a `call` (a `send` drops it). */
  readonly message: (message: any) => unknown
  /** The session ends (closed, or its opener gone): give back what it holds. Called once. */
  readonly close: () => void
}

export type SessionFactory<I = any> = (init: I, ctx: SessionContext) => SessionHandler | Promise<SessionHandler>

export type SessionRegistry = { readonly [kind: string]: SessionFactory }

export const defineSessions = <const T extends SessionRegistry>(sessions: T): T => sessions

export type SessionInit<R extends SessionRegistry, K extends keyof R> = Parameters<R[K]>[0]

/** Announced once per thread on parentPort. */
export interface SessionHostAnnouncement {
  readonly sessionHost: number
  readonly port: MessagePort
}

export const isSessionHostAnnouncement = (m: unknown): m is SessionHostAnnouncement =>
  typeof m === "object" && m !== null && typeof (m as { sessionHost?: unknown }).sessionHost === "number"

/** Main → host control port. */
export interface OpenMessage {
  readonly open: number
  readonly kind: string
  readonly init: unknown
  readonly port: MessagePort
}

/** Main → session port. */
export type ToSession =
  | { readonly send: unknown }
  | { readonly call: number; readonly message: unknown }
  | { readonly close: true }

/** Session port → main. */
export type FromSession =
  | { readonly opened: true }
  | { readonly openFailed: TaskFailure }
  | { readonly event: unknown }
  | { readonly reply: number; readonly ok: true; readonly value: unknown }
  | { readonly reply: number; readonly ok: false; readonly error: TaskFailure }
  /** A `send` threw: the session is over (closed on this side). */
  | { readonly failed: TaskFailure }
  | { readonly closed: true }

/** Open sessions on this thread (tests and the stats reply read it). */
let openHere = 0
export const sessionsOnThisThread = (): number => openHere

/**
 * Serves `registry` on this thread. Idempotent per thread (a second call is ignored), so a
 * fixture module that re-exports the production host cannot announce two.
 */
let hosting = false
export const serveSessions = (registry: SessionRegistry): void => {
  if (hosting || parentPort === null) return
  hosting = true
  const { port1: control, port2: remote } = new MessageChannel()
  control.on("message", (m: OpenMessage) => openSession(registry, m))
  // The control port must not keep a thread alive that piscina wants to end.
  control.unref()
  parentPort.postMessage({ sessionHost: threadId, port: remote } satisfies SessionHostAnnouncement, [remote])
}

const openSession = (registry: SessionRegistry, { kind, init, port }: OpenMessage): void => {
  const post = (m: FromSession, transfer?: ReadonlyArray<ArrayBuffer>) => port.postMessage(m, transfer ?? [])
  const factory = Object.hasOwn(registry, kind) ? registry[kind] : undefined
  if (factory === undefined) {
    post({ openFailed: { name: "TaskError", reason: "UnknownKind", message: `no session kind "${kind}" in this worker` } })
    port.close()
    return
  }
  let handler: SessionHandler | undefined
  let ended = false
  const end = () => {
    if (ended) return
    ended = true
    openHere--
    try {
      handler?.close()
    } finally {
      port.close()
    }
  }
  const ctx: SessionContext = { kind, threadId, emit: (event, transfer) => ended || post({ event }, transfer) }
  openHere++
  // Every message waits for the one before it (and the first for the open).
  let chain: Promise<unknown> = Promise.resolve()
    .then(() => factory(init, ctx))
    .then(
      (h) => {
        handler = h
        post({ opened: true })
      },
      (error) => {
        post({ openFailed: toTaskFailure(error) })
        ended = true
        openHere--
        port.close()
      }
    )
  port.on("message", (m: ToSession) => {
    chain = chain.then(async () => {
      if (ended || handler === undefined) return
      if ("close" in m) {
        // Closes the port: the opener learns that the session has ended from its 'close' event.
        end()
        return
      }
      if ("call" in m) {
        try {
          post({ reply: m.call, ok: true, value: await handler.message(m.message) })
        } catch (error) {
          post({ reply: m.call, ok: false, error: toTaskFailure(error) })
        }
        return
      }
      try {
        await handler.message(m.send)
      } catch (error) {
        post({ failed: toTaskFailure(error) })
        end()
      }
    })
  })
  // The opener's side went away without a close (its thread ended): free what the session holds.
  port.on("close", () => {
    chain = chain.then(end)
  })
}
