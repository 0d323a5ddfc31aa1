/** Pieces shared by the tests that drive `runTtsSession` directly (actors and attack tests). */
import { Effect } from "effect"
import type { ResolvedVoice } from "../../actors/Synthesizer.ts"
import type { SessionRequest } from "../../actors/TtsSessionMessages.ts"

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
