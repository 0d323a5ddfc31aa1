/**
 * The bounds of realtime speech-to-text that need a service configured for them: every
 * recognizer session taken (one worker, one session a worker) → resource_exhausted, and
 * STT_REALTIME_MAX_SESSION_S → session_time_limit_exceeded; each then the close, and a session
 * after them works. Waits for the messages, never for a clock.
 */
import { Effect } from "effect"
import t from "tap"
import { LIBRIVOX_WAV, pcmOf } from "../support/librivoxSpeech.ts"
import { startTestService } from "../support/service.ts"
import { messageTypesUntil, openRealtime, openStarted } from "../support/realtimeClient.ts"

const service = await startTestService(t, { WORKERS: "1", STT_SESSIONS_PER_WORKER: "1", STT_REALTIME_MAX_SESSION_S: "2" })
const user = await service.newUser(1000)
const PCM = pcmOf(LIBRIVOX_WAV)

const open = () => openRealtime(service.base, user.apiKey)
const until = messageTypesUntil

t.test("the only recognizer slot taken: resource_exhausted (1013); the time limit ends the holder", async (t) => {
  const holder = await open()
  t.same(await until(holder, "session_started"), ["session_started"])
  holder.send({ message_type: "input_audio_chunk", audio_base_64: PCM.subarray(0, 32000).toString("base64"), commit: false, sample_rate: 16000 })
  const second = await open()
  t.same(await until(second, "resource_exhausted"), ["resource_exhausted"], "no slot: resource_exhausted")
  t.match(await second.nextJson(), { close: 1013 }, "then close 1013 (try again later)")
  const ended = (await until(holder, "session_time_limit_exceeded")).filter((x) => x !== "partial_transcript")
  t.same(ended, ["session_time_limit_exceeded"], "the holder reaches the 2 s limit")
  t.match(await holder.nextJson(), { close: 1008 })
  // The slot is free again: a new session starts.
  const third = await openStarted(service.base, user.apiKey)
  t.pass("a new session after them")
  third.close()
  for (let i = 0; i < 200 && (await Effect.runPromise(service.credits.reserved(user.userId))) > 0; i++) await new Promise((r) => setTimeout(r, 50))
  t.equal(await Effect.runPromise(service.users.balance(user.userId)), 999, "the holder paid its one second of audio")
})
