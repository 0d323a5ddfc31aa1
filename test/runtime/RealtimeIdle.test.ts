/**
 * What counts as a realtime session's silence (STT_REALTIME_IDLE_S, runtime/SttRealtimeSocket.ts):
 * only the time it waits on an empty inbox. A session still taking its chunks, or answering a
 * commit queued behind the service's backlog, is at work, not idle (bench/sttRealtime saw 2 of
 * 10 sessions cut while their commits waited); an empty frame does not count as activity.
 * The clock is passed in, so nothing here waits.
 */
import { Effect, Fiber } from "effect"
import t from "tap"
import type { AudioChunk } from "../../actors/RealtimeMessages.ts"
import { ChunkInbox } from "../../runtime/SttRealtimeSocket.ts"

const chunk = (bytes: number, commit = false): AudioChunk => ({ audio: new Uint8Array(bytes), audioMs: bytes / 32, commit, previousText: undefined })

t.test("idle only while waiting on an empty inbox", async (t) => {
  const inbox = new ChunkInbox()
  const later = (ms: number) => Date.now() + ms
  t.ok(inbox.idleFor(later(5000)) >= 5000, "a session that never sent anything is idle from the start")
  inbox.offer(chunk(3200))
  t.equal(inbox.idleFor(later(60_000)), 0, "audio waiting to be taken: at work")
  t.same(await Effect.runPromise(inbox.peek), chunk(3200))
  inbox.drop()
  t.equal(inbox.idleFor(later(60_000)), 0, "taken but the session has not asked for more (decoding, committing): at work")
  const waiting = Effect.runFork(inbox.peek)
  await new Promise((r) => setImmediate(r))
  t.ok(inbox.idleFor(later(5000)) >= 5000, "waiting on the empty inbox: idle")
  inbox.offer(chunk(0))
  await Effect.runPromise(Fiber.join(waiting))
  inbox.drop()
  t.ok(inbox.idleFor(later(5000)) >= 5000, "an empty frame is not activity")
  inbox.offer(chunk(0, true))
  t.equal(inbox.idleFor(later(60_000)), 0, "a bare commit is")
})
