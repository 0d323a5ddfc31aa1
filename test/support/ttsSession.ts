/** Pieces shared by the tests that drive `runTtsSession` directly (actors and attack tests). */
import { Deferred, Effect, Exit, Fiber, Layer } from "effect"
import { TestClock } from "effect/testing"
import { type ResolvedVoice, Synthesizer } from "../../actors/Synthesizer.ts"
import { runTtsSession, type SessionMode } from "../../actors/TtsSession.ts"
import { Inbox, type SessionEnd, type SessionOutput, type SessionRequest, type SessionSocket } from "../../actors/TtsSessionMessages.ts"
import { SpeechError } from "../../engines/tts/SpeechError.ts"
import { Credits } from "../../storage/Credits.ts"

export const sessionVoice: ResolvedVoice = {
  voiceId: "mari",
  kind: "preset",
  language: "et",
  engineVoice: { engine: "espeak", language: "et", variant: "et+f3", pitch: 1, rate: 1 }
}

/** A client frame as it decodes, with every field at its default. */
export const request = (fields: Partial<Omit<SessionRequest, "_tag">>): SessionRequest => ({
  _tag: "Request",
  text: undefined,
  tryTrigger: false,
  flush: false,
  speed: undefined,
  contextId: undefined,
  closeContext: false,
  closeSocket: false,
  cancel: false,
  ...fields
})

/** Lets forked fibers run until they wait again (the inbox, a gate, the clock). */
export const settle = Effect.gen(function*() {
  for (let i = 0; i < 30; i++) yield* Effect.yieldNow
})

/** What a test sees of a session run by `withRecordingSession`. */
export interface SessionHarness {
  readonly inbox: Inbox
  /** Every frame the session sent, in order. */
  readonly outputs: Array<SessionOutput>
  readonly ended: Deferred.Deferred<SessionEnd>
  /** Offers a client frame, then lets the session run until it waits again. */
  readonly send: (fields: Partial<Omit<SessionRequest, "_tag">>) => Effect.Effect<void>
}

export interface RecordingSessionOptions {
  readonly mode: SessionMode
  /** The engine: each request's blocks handed to `onBlock`, then its summary. */
  readonly synthesizeStream: Synthesizer["Service"]["synthesizeStream"]
  /** The parts of Credits a session uses (debit, refund, covers). */
  readonly credits: Partial<Credits["Service"]>
  readonly idleTimeoutMs?: number
  /** A client that is not reading: every send (and `ready`) waits for this first. */
  readonly socketGate?: Effect.Effect<void>
  readonly describe: (failure: unknown) => { readonly code: string; readonly message: string }
}

/**
 * Runs `runTtsSession` on a socket that records its frames, with a fake engine and fake credits,
 * on the test clock; the session is interrupted when `body` ends (a no-op if it has ended).
 */
export const withRecordingSession = <A>(options: RecordingSessionOptions, body: (h: SessionHarness) => Effect.Effect<A>): Promise<A> => {
  const notHere = () => Effect.fail(new SpeechError({ reason: "EngineUnavailable", message: "not in this test" }))
  const synthesizer = Layer.succeed(Synthesizer, Synthesizer.of({
    voices: [],
    findVoice: () => undefined,
    resolveVoice: () => Effect.succeed(sessionVoice),
    synthesize: notHere,
    synthesizeStream: options.synthesizeStream,
    synthesizeExpressive: notHere,
    preview: () => Effect.die("no previews in this test"),
    dropPreview: () => Effect.void,
    recycle: () => {}
  }))
  const credits = Layer.succeed(Credits, { covers: () => false, ...options.credits } as Credits["Service"])
  return Effect.runPromise(Effect.gen(function*() {
    const inbox = Inbox.make()
    const outputs: Array<SessionOutput> = []
    const ended = yield* Deferred.make<SessionEnd>()
    const gate = options.socketGate ?? Effect.void
    const socket: SessionSocket = {
      send: (output) => Effect.andThen(gate, Effect.sync(() => void outputs.push(output))),
      ready: gate,
      sendNow: (output) => void outputs.push(output),
      end: (end) => void Deferred.doneUnsafe(ended, Exit.succeed(end))
    }
    const session = yield* Effect.forkChild(runTtsSession({
      mode: options.mode,
      voice: sessionVoice,
      userId: "u1",
      format: { container: "pcm", sampleRate: 24000 },
      idleTimeoutMs: options.idleTimeoutMs ?? 20_000,
      socket,
      inbox,
      describe: options.describe
    }))
    yield* settle
    const send = (fields: Partial<Omit<SessionRequest, "_tag">>) => Effect.andThen(Effect.sync(() => inbox.offer(request(fields), 0)), settle)
    const result = yield* body({ inbox, outputs, ended, send })
    yield* Fiber.interrupt(session)
    return result
  }).pipe(Effect.provide(Layer.mergeAll(synthesizer, credits, TestClock.layer()))))
}
