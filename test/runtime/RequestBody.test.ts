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
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
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
  return {
    res: res as unknown as HttpResponse,
    calls,
    deliver: (bytes: number, isLast: boolean) => onData!(new ArrayBuffer(bytes), isLast),
    /** As uWS does: a fresh ArrayBuffer, detached once the callback returns. */
    deliverBytes: (bytes: Uint8Array, isLast: boolean) => {
      const ab = bytes.slice().buffer
      onData!(ab, isLast)
      structuredClone(ab, { transfer: [ab] })
    }
  }
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

/**
 * uWS reads on after `pause()` while each read fills its buffer (a fast sender): tens of MB of a
 * large upload arrived in one burst with the socket paused, all held in memory. Past a small
 * in-memory backlog such chunks now go to an unlinked spill file and are read back in order.
 */
const pattern = (n: number, seed: number) => Uint8Array.from({ length: n }, (_, i) => (i * 31 + seed) & 0xff)
const spillDescriptors = () =>
  fs.readdirSync("/proc/self/fd").filter((fd) => {
    try {
      return fs.readlinkSync(`/proc/self/fd/${fd}`).includes("body-spill-")
    } catch {
      return false
    }
  })
const memoryBytes = (body: RequestBody) => (body as unknown as { memoryBytes: number }).memoryBytes

t.test("chunks that arrive while paused past the backlog are spilled, then read back in order", async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "spill-test-"))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const { res, calls, deliverBytes } = scriptedResponse()
  const chunk = 512 * 1024
  const count = 40 // 20 MiB delivered in one burst, the socket paused after the first chunk
  // DATA_DIR/tmp need not exist yet: the spill makes it.
  const spillDir = path.join(dir, "tmp")
  const body = new RequestBody(res, chunk * count, true, spillDir)
  const sent: Array<Uint8Array> = []
  let peak = 0
  for (let i = 0; i < count; i++) {
    sent.push(pattern(chunk, i))
    deliverBytes(sent[i]!, i === count - 1)
    peak = Math.max(peak, memoryBytes(body))
  }
  t.same(calls, ["pause"], "paused once; uWS delivered the rest regardless")
  t.ok(peak <= 1024 * 1024 + chunk, `held in memory at most the backlog and a chunk (peak ${peak} bytes)`)
  t.same(fs.readdirSync(spillDir), [], "the spill file is unlinked as soon as it is made")
  t.equal(spillDescriptors().length, 1, "the spill file is open while the body is unread")
  const got = await Effect.runPromise(body.bytes(chunk * count))
  t.ok(Buffer.from(got).equals(Buffer.concat(sent)), "the consumer gets every byte, in order")
  t.equal(spillDescriptors().length, 0, "closed once the body is read to its end")
  body.release()
})

t.test("a spill file that cannot be made leaves the body in memory, intact", async (t) => {
  const { res, deliverBytes } = scriptedResponse()
  const chunk = 512 * 1024
  // A directory that cannot be made: its parent is a character device.
  const body = new RequestBody(res, chunk * 6, true, path.join("/dev/null", "tmp"))
  const sent = Array.from({ length: 6 }, (_, i) => pattern(chunk, i))
  sent.forEach((c, i) => deliverBytes(c, i === sent.length - 1))
  t.equal(memoryBytes(body), chunk * 6, "all of it queued in memory, as without a spill file")
  const got = await Effect.runPromise(body.bytes(chunk * 6))
  t.ok(Buffer.from(got).equals(Buffer.concat(sent)))
  body.release() // the body ended paused: stops its hang-up probe
})

/** A body of `totalChunks` 512 KiB chunks of which 8 have arrived in one burst: spilled, not ended. */
const spillingBody = (totalChunks: number) => {
  const { res, deliverBytes } = scriptedResponse()
  const chunk = 512 * 1024
  const body = new RequestBody(res, chunk * totalChunks, true)
  for (let i = 0; i < 8; i++) deliverBytes(pattern(chunk, i), false)
  return { body, chunk }
}

t.test("an answer written before the body is read (413, 401) closes the spill file", async (t) => {
  const { body } = spillingBody(8)
  t.equal(spillDescriptors().length, 1)
  body.discard()
  t.equal(spillDescriptors().length, 0)
})

t.test("a client that hangs up mid-upload closes the spill file, and a reader still taking gets no body with a hole in it", async (t) => {
  const { body, chunk } = spillingBody(16)
  t.equal(spillDescriptors().length, 1)
  body.abort()
  t.equal(spillDescriptors().length, 0, "closed on abort")
  const exit = await Effect.runPromiseExit(body.bytes(chunk * 16))
  t.equal(exit._tag, "Failure", "reading on fails rather than returning a partial body")
})
