/**
 * Recognizer places are few (STT_SESSIONS_PER_WORKER a thread), so only a session that pays and
 * speaks keeps one (outside attack: eight idle sessions of a 0-credit key held every place for
 * an hour, uWS's idle timeout never firing because the automatic pings kept them alive):
 *  - a user without a credit gets quota_exceeded at the start, then the close, and holds no place;
 *  - a session that sends no audio for STT_REALTIME_IDLE_S gets insufficient_audio_activity and
 *    the close, and its place is free again.
 * Waits for the messages, never for a clock.
 */
import t from "tap"
import { startTestService } from "../support/service.ts"
import { messageTypesUntil, openRealtime, openStarted } from "../support/realtimeClient.ts"

const service = await startTestService(t, { WORKERS: "1", STT_SESSIONS_PER_WORKER: "1", STT_REALTIME_IDLE_S: "1" })

const open = (apiKey: string) => openRealtime(service.base, apiKey)
const started = (apiKey: string) => openStarted(service.base, apiKey)
const until = messageTypesUntil

t.test("a user without credits is refused at the start and holds no place", async (t) => {
  const broke = await service.newUser(0)
  const ws = await open(broke.apiKey)
  t.same(await until(ws, "quota_exceeded"), ["quota_exceeded"])
  t.match(await ws.nextJson(), { close: 1008 })
  const paying = await service.newUser(100)
  const next = await started(paying.apiKey)
  t.pass("the only place is free: a paying user's session starts")
  next.close()
})

t.test("a session without audio ends with insufficient_audio_activity and frees its place", async (t) => {
  const user = await service.newUser(100)
  const idle = await started(user.apiKey)
  t.same(await until(idle, "insufficient_audio_activity"), ["insufficient_audio_activity"])
  t.match(await idle.nextJson(), { close: 1008 })
  const next = await started(user.apiKey)
  t.pass("the place is free again: a new session starts")
  next.close()
})
