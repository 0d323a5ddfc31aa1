/**
 * What counts as a realtime session's silence (STT_REALTIME_IDLE_S, runtime/SttRealtimeSocket.ts):
 * the time it waits on an empty inbox since audio last arrived. A session taking its chunks or
 * answering a commit queued behind the service's backlog is at work and its clock stops
 * (bench/sttRealtime saw 2 of 10 sessions cut while their commits waited); only audio sets the
 * clock back, so neither empty frames nor bare commits keep a session (an outside check held a
 * recognizer place for good with a bare commit every 25 s). The clock is a stand-in for
 * Date.now that the test moves, so nothing here waits.
 */
import { Effect, Fiber } from "effect"
import t from "tap"
import type { AudioChunk } from "../../actors/RealtimeMessages.ts"
import { ChunkInbox } from "../../runtime/SttRealtimeSocket.ts"

const chunk = (bytes: number, commit = false): AudioChunk => ({ audio: new Uint8Array(bytes), audioMs: bytes / 32, commit, previousText: undefined })

t.test("silence is the wait on an empty inbox since the last audio", async (t) => {
  const realNow = Date.now
  let clock = 1_000_000
  Date.now = () => clock
  t.teardown(() => void (Date.now = realNow))
  const inbox = new ChunkInbox()
  clock += 5000
  t.equal(inbox.idleFor(clock), 5000, "a session that never sent anything is silent from the start")

  inbox.offer(chunk(3200))
  clock += 60_000
  t.equal(inbox.idleFor(clock), 0, "audio waiting to be taken: at work, silence 0")
  t.same(await Effect.runPromise(inbox.peek), chunk(3200))
  inbox.drop()
  clock += 60_000
  t.equal(inbox.idleFor(clock), 0, "taken, the session not asking for more yet (decoding, committing): the clock stands")

  const waiting = Effect.runFork(inbox.peek)
  await new Promise((r) => setImmediate(r))
  clock += 10_000
  t.equal(inbox.idleFor(clock), 10_000, "waiting on the empty inbox: the clock runs")
  inbox.offer(chunk(0, true))
  await Effect.runPromise(Fiber.join(waiting))
  inbox.drop()
  clock += 60_000
  t.equal(inbox.idleFor(clock), 10_000, "a bare commit: the clock stands while it is answered, and is not set back")

  const again = Effect.runFork(inbox.peek)
  await new Promise((r) => setImmediate(r))
  clock += 15_000
  t.equal(inbox.idleFor(clock), 25_000, "waiting again: the silence goes on from where it was")
  inbox.offer(chunk(0))
  await Effect.runPromise(Fiber.join(again))
  inbox.drop()
  t.equal(inbox.idleFor(clock), 25_000, "an empty frame does not set it back either")
  inbox.offer(chunk(2))
  t.equal(inbox.idleFor(clock + 60_000), 0, "audio does")
})
