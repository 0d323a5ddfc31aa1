/**
 * The request-body reader against a scripted uWS response: uWS can deliver chunks of a read it
 * already made after `pause()`, the last one included, so a body can end with its socket
 * paused. A paused socket is not read, and a client hanging up then went unnoticed: the
 * request (a transcription) ran, and was charged, to its end. The reader now probes such a
 * socket: resumed for one turn of the event loop, paused again (a resume alone would re-arm
 * uWS's 10 s idle timer and cut long answers).
 */
import type { HttpResponse } from "@based/uws"
import { Effect } from "effect"
import t from "tap"
import { RequestBody } from "../../runtime/RequestBody.ts"

/** The calls the reader makes on its response, in order. */
const scriptedResponse = () => {
  const calls: Array<"pause" | "resume"> = []
  let onData: ((chunk: ArrayBuffer, isLast: boolean) => void) | undefined
  const res = {
    onData: (handler: typeof onData) => {
      onData = handler
      return res
    },
    pause: () => void calls.push("pause"),
    resume: () => void calls.push("resume")
  }
  return { res: res as unknown as HttpResponse, calls, deliver: (bytes: number, isLast: boolean) => onData!(new ArrayBuffer(bytes), isLast) }
}

const until = async (condition: () => boolean) => {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 20))
}

t.test("a body that ends while its socket is paused is probed for a hang-up until the answer", async (t) => {
  const { res, calls, deliver } = scriptedResponse()
  const body = new RequestBody(res, 400_000, true)
  deliver(300_000, false)
  t.same(calls, ["pause"], "paused past the high-water mark while nobody reads")
  deliver(100_000, true) // delivered although paused
  t.equal(body.unread, false)
  await until(() => calls.length >= 5)
  t.same(calls.slice(0, 5), ["pause", "resume", "pause", "resume", "pause"], "resumed for one turn, paused again")
  body.release()
  const afterRelease = calls.length
  await new Promise((resolve) => setTimeout(resolve, 1200))
  t.equal(calls.length, afterRelease, "no probe after the answer is written")
})

t.test("an abort stops the probe (the response is gone)", async (t) => {
  const { res, calls, deliver } = scriptedResponse()
  const body = new RequestBody(res, 400_000, true)
  deliver(300_000, false)
  deliver(100_000, true)
  body.abort()
  await new Promise((resolve) => setTimeout(resolve, 1200))
  t.same(calls, ["pause"])
})

t.test("a body read to its end while the socket was not paused is left alone", async (t) => {
  const { res, calls, deliver } = scriptedResponse()
  const body = new RequestBody(res, 1000, true)
  deliver(1000, true)
  t.equal((await Effect.runPromise(body.bytes(1000))).byteLength, 1000)
  await new Promise((resolve) => setTimeout(resolve, 1200))
  t.same(calls, [])
})
