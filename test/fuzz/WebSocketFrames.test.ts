/**
 * WebSocket text-to-speech frames as a fuzzer sends them. The frame decoder
 * (protocol/ws/TtsFrames.ts) on any string: never throws, a frame with a wrong-typed field is
 * Unreadable. Against the running service, on stream-input and multi-stream-input: malformed
 * JSON, non-objects, wrong field types, binary frames, text frames that are not UTF-8 and frames
 * over 64 KiB end the session with the documented error frame and close code (invalid_message /
 * 1008, message_too_big / 1009; uWS drops a non-UTF-8 text frame itself), never a crash; a session
 * opened before the fuzzing still synthesizes after it.
 */
import fc from "fast-check"
import t from "tap"
import { CLOSE_POLICY, CLOSE_TOO_BIG } from "../../protocol/ws/CloseCodes.ts"
import { decodeClientFrame, MAX_CONTEXT_ID_CHARS } from "../../protocol/ws/TtsFrames.ts"
import { startTestService } from "../support/service.ts"
import { connectWs, type Frame, isRefused, until, type WsClient } from "../support/wsClient.ts"

/** JSON texts of values of the wrong type for each field the decoder checks. */
const wrongFields: Record<string, fc.Arbitrary<unknown>> = {
  text: fc.oneof(fc.integer(), fc.boolean(), fc.array(fc.string(), { maxLength: 2 }), fc.dictionary(fc.string(), fc.string(), { maxKeys: 2 })),
  voice_settings: fc.oneof(fc.integer(), fc.string(), fc.boolean(), fc.array(fc.integer(), { maxLength: 2 }),
    fc.record({ speed: fc.oneof(fc.string(), fc.boolean(), fc.array(fc.integer()), fc.constant({})) })),
  context_id: fc.oneof(fc.constant(""), fc.integer(), fc.boolean(), fc.string({ minLength: MAX_CONTEXT_ID_CHARS + 1, maxLength: 300 })),
  flush: fc.oneof(fc.integer(), fc.string(), fc.constant([])),
  try_trigger_generation: fc.oneof(fc.integer(), fc.string()),
  close_context: fc.oneof(fc.integer(), fc.string()),
  close_socket: fc.oneof(fc.integer(), fc.string()),
  cancel: fc.oneof(fc.integer(), fc.string(), fc.constant({}))
}
const wrongFrame = fc.constantFrom(...Object.keys(wrongFields)).chain((key) =>
  fc.tuple(fc.constant(key), wrongFields[key]!, fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 })))
  .map(([key, value, extra]) => JSON.stringify({ ...extra, [key]: value }))

t.test("decodeClientFrame: never throws on any string; the result is a Request or an Unreadable with a reason", async (t) => {
  fc.assert(fc.property(fc.oneof(fc.string(), fc.json({ maxDepth: 2 }), fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v)), wrongFrame, fc.string({ unit: "binary" })), (raw) => {
    const d = decodeClientFrame(raw)
    if (d._tag === "Unreadable") return typeof d.message === "string" && d.message.length > 0
    return d._tag === "Request" && (d.text === undefined || typeof d.text === "string") &&
      (d.speed === undefined || Number.isFinite(d.speed)) && [d.flush, d.cancel, d.closeContext, d.closeSocket, d.tryTrigger].every((b) => typeof b === "boolean")
  }), { seed: 0x77a1, numRuns: 500 })
  t.pass("500 strings")
})

t.test("decodeClientFrame: a field of the wrong type is always Unreadable", async (t) => {
  fc.assert(fc.property(wrongFrame, (raw) => decodeClientFrame(raw)._tag === "Unreadable"), { seed: 0x77a2, numRuns: 300 })
  t.pass("300 frames")
})

const service = await startTestService(t)
const { apiKey } = await service.newUser(1_000_000)
// A key's first use makes the upgrade asynchronous (an early 1006 under load): cache it first.
await fetch(`${service.base}/user`, { headers: { "xi-api-key": apiKey } })

const open = async (path: string, query = ""): Promise<WsClient> => {
  const r = await connectWs(`${service.base}/text-to-speech/mari/${path}${query}`, { "xi-api-key": apiKey })
  if (isRefused(r)) throw new Error(`upgrade refused: ${r.status} ${r.body}`)
  return r
}

type Bad =
  | { readonly kind: "text"; readonly frame: string }
  | { readonly kind: "binary"; readonly bytes: Uint8Array }
  | { readonly kind: "notUtf8"; readonly bytes: Uint8Array }
  | { readonly kind: "huge"; readonly frame: string }

const badArb: fc.Arbitrary<Bad> = fc.oneof(
  { weight: 4, arbitrary: wrongFrame.map((frame) => ({ kind: "text" as const, frame })) },
  { weight: 2, arbitrary: fc.oneof(fc.string().filter((s) => { try { JSON.parse(s) } catch { return true } return false }), fc.constantFrom("{", "{\"text\":", "[1]", "null", "1", "\"text\"", "true", "{\"text\":\"a\"}}"), fc.jsonValue({ maxDepth: 2 }).filter((v) => typeof v !== "object" || v === null || Array.isArray(v)).map((v) => JSON.stringify(v)))
    .map((frame) => ({ kind: "text" as const, frame })) },
  { weight: 1, arbitrary: fc.integer({ min: 10, max: 20_000 }).map((d) => ({ kind: "text" as const, frame: `{"text":${"[".repeat(d)}${"]".repeat(d)}}` })) },
  { weight: 2, arbitrary: fc.uint8Array({ maxLength: 300 }).map((bytes) => ({ kind: "binary" as const, bytes })) },
  { weight: 1, arbitrary: fc.constantFrom([0xff], [0xc3, 0x28], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80]).map((b) => ({ kind: "notUtf8" as const, bytes: new Uint8Array([...Buffer.from("{\"text\":\""), ...b, ...Buffer.from("\"}")]) })) },
  { weight: 1, arbitrary: fc.integer({ min: 64 * 1024 + 1, max: 200 * 1024 }).map((n) => ({ kind: "huge" as const, frame: JSON.stringify({ text: "a".repeat(n) }) })) }
)

const describe = (b: Bad) => b.kind === "text" || b.kind === "huge" ? `${b.kind} ${JSON.stringify(b.frame.slice(0, 150))} (${b.frame.length} chars)` : `${b.kind} ${Buffer.from(b.bytes).toString("hex").slice(0, 80)}`

t.test("property: a bad frame ends the session with the documented error and close code; other sessions go on", async (t) => {
  // A session opened before all the fuzzing, used again after it.
  const bystander = await open("stream-input", "?inactivity_timeout=180")
  t.teardown(() => bystander.destroy())
  bystander.send({ text: " " })

  await fc.assert(fc.asyncProperty(fc.constantFrom("stream-input", "multi-stream-input"), fc.boolean(), badArb, async (path, greet, bad) => {
    const ws = await open(path)
    try {
      if (greet) ws.send(path === "stream-input" ? { text: " " } : { text: " ", context_id: "c1" })
      if (bad.kind === "binary") ws.sendBinary(bad.bytes)
      else if (bad.kind === "notUtf8") ws.sendRawText(bad.bytes)
      else ws.send(bad.frame)
      const frames = await until(ws, () => false)
      const close = frames[frames.length - 1]!
      const errors = frames.filter((f) => f.error !== undefined)
      const what = `${path} ${greet ? "after a greeting" : "first frame"}: ${describe(bad)} → ${JSON.stringify(frames).slice(0, 300)}`
      if (bad.kind === "notUtf8") {
        // uWS drops the connection itself (no session frame); only the close matters here.
        if (close.close === undefined) throw new Error(`no close: ${what}`)
        return
      }
      const [code, status] = bad.kind === "huge" ? ["message_too_big", CLOSE_TOO_BIG] : ["invalid_message", CLOSE_POLICY]
      if (errors.length !== 1 || errors[0]!.error.code !== code || typeof errors[0]!.error.message !== "string") throw new Error(`expected one ${code} error frame: ${what}`)
      if (close.close !== status) throw new Error(`expected close ${status}: ${what}`)
      if (frames.some((f) => typeof f.audio === "string")) throw new Error(`audio for a bad frame: ${what}`)
    } finally {
      ws.destroy()
    }
  }), { seed: 0x77a3, numRuns: 60 })

  const health = await fetch(`${service.siteUrl}/healthz`)
  t.equal(health.status, 200, "the server still answers HTTP")
  bystander.send({ text: "Tere hommikust.", flush: true })
  const frames: Array<Frame> = await until(bystander, (f) => f.flushDone === true)
  t.ok(frames.some((f) => typeof f.audio === "string"), "the session opened before the fuzzing still synthesizes")
  t.ok(frames.every((f) => f.error === undefined), "with no error")
  const fresh = await open("stream-input")
  t.teardown(() => fresh.destroy())
  fresh.send({ text: " " })
  fresh.send({ text: "Veel üks.", flush: true })
  t.ok((await until(fresh, (f) => f.flushDone === true)).some((f) => typeof f.audio === "string"), "a new session synthesizes too")
})
