/**
 * The WebSocket text-to-speech wire (protocol/ws/): client frames decoded into session messages,
 * session messages encoded into frames, and the close code of each way a session ends.
 */
import t from "tap"
import { CLOSE_NORMAL, CLOSE_POLICY, CLOSE_SERVER_ERROR, closeCode } from "../../../protocol/ws/CloseCodes.ts"
import { binaryFrame, decodeClientFrame, encodeOutput, MAX_CONTEXT_ID_CHARS, textFramePayload } from "../../../protocol/ws/TtsFrames.ts"

t.test("decode: fields of a frame; unknown fields ignored; null is absent", async (t) => {
  t.same(decodeClientFrame(JSON.stringify({ text: "Tere ", flush: true, voice_settings: { speed: 1.5 }, context_id: "c", xi_api_key: "k", text_extra: 1 })), {
    _tag: "Request",
    text: "Tere ",
    speed: 1.5,
    contextId: "c",
    tryTrigger: false,
    flush: true,
    closeContext: false,
    closeSocket: false,
    cancel: false
  })
  t.same(decodeClientFrame(JSON.stringify({ text: null, cancel: true, voice_settings: null })), {
    _tag: "Request",
    text: undefined,
    speed: undefined,
    contextId: undefined,
    tryTrigger: false,
    flush: false,
    closeContext: false,
    closeSocket: false,
    cancel: true
  })
})

t.test("decode: malformed frames are Unreadable with the reason", async (t) => {
  const reason = (raw: string) => {
    const input = decodeClientFrame(raw)
    return input._tag === "Unreadable" ? input.message : "decoded"
  }
  t.equal(reason("{"), "frame is not valid JSON")
  t.equal(reason("[1]"), "frame must be a JSON object")
  t.equal(reason(JSON.stringify({ text: 5 })), "text must be a string")
  t.equal(reason(JSON.stringify({ voice_settings: [] })), "voice_settings must be an object")
  t.equal(reason(JSON.stringify({ voice_settings: { speed: "fast" } })), "voice_settings.speed must be a number")
  t.equal(reason(JSON.stringify({ context_id: "x".repeat(MAX_CONTEXT_ID_CHARS + 1) })), `context_id must be a string of 1 to ${MAX_CONTEXT_ID_CHARS} characters`)
  t.equal(reason(JSON.stringify({ flush: "yes" })), "flush must be a boolean")
  t.same(binaryFrame, { _tag: "Unreadable", message: "binary frames are not accepted; send JSON text frames" })
})

t.test("textFramePayload: UTF-8 is decoded as sent; anything else is undefined (the server closes with 1007), never U+FFFD text", async (t) => {
  const bytes = (...b: Array<number>) => new Uint8Array(b)
  t.equal(textFramePayload(Buffer.from('{"text":"Tere 👋 sõber"}')), '{"text":"Tere 👋 sõber"}')
  t.equal(textFramePayload(bytes(0xef, 0xbb, 0xbf, 0x7b, 0x7d)), "\uFEFF{}", "a leading BOM is kept, as before")
  t.equal(textFramePayload(bytes()), "")
  const invalid: Record<string, Uint8Array> = {
    "a stray byte": bytes(0x7b, 0xff, 0x7d),
    "an overlong NUL": bytes(0xc0, 0x80),
    "a UTF-16 surrogate": bytes(0xed, 0xa0, 0x80),
    "past U+10FFFF": bytes(0xf4, 0x90, 0x80, 0x80),
    "a truncated sequence": bytes(0x7b, 0xe2, 0x82)
  }
  for (const [name, b] of Object.entries(invalid)) t.equal(textFramePayload(b), undefined, name)
})

t.test("encode: single-stream control frames carry audio: null; multi-context ones carry contextId and no audio", async (t) => {
  t.equal(encodeOutput({ _tag: "FlushDone", contextId: undefined }), `{"audio":null,"flushDone":true}`)
  t.equal(encodeOutput({ _tag: "Final", contextId: "c" }), `{"isFinal":true,"contextId":"c"}`)
  t.equal(encodeOutput({ _tag: "Cancelled", contextId: undefined }), `{"audio":null,"cancelled":true}`)
  t.equal(encodeOutput({ _tag: "Error", code: "text_too_long", message: "m", contextId: undefined }), `{"error":{"code":"text_too_long","message":"m"}}`)
  t.equal(encodeOutput({ _tag: "Error", code: "x", message: "m", contextId: "c" }), `{"error":{"code":"x","message":"m"},"contextId":"c"}`)
})

t.test("encode: audio is base64 with the chunk's alignment in integer ms", async (t) => {
  const frame = JSON.parse(encodeOutput({
    _tag: "Audio",
    contextId: undefined,
    audio: new Uint8Array([1, 2, 3, 4]),
    text: " Hi",
    lead: 1,
    words: [{ text: "Hi", startMs: 0, endMs: 100, charStart: 0, charEnd: 2 }],
    durationMs: 100
  }))
  t.equal(frame.audio, Buffer.from([1, 2, 3, 4]).toString("base64"))
  t.equal(frame.isFinal, false)
  t.same(frame.alignment.chars, [" ", "H", "i"], "the chars spell the text as sent, whitespace included")
  t.equal(frame.alignment.charStartTimesMs.length, 3)
  t.ok(frame.alignment.charStartTimesMs.every(Number.isInteger))
  t.same(frame.normalizedAlignment, frame.alignment)
  t.notOk("contextId" in frame)
})

t.test("close codes of the endings", async (t) => {
  t.equal(closeCode({ kind: "Normal", reason: "end of stream" }), CLOSE_NORMAL)
  t.equal(closeCode({ kind: "Violation", reason: "x" }), CLOSE_POLICY)
  t.equal(closeCode({ kind: "Failure", reason: "x" }), CLOSE_SERVER_ERROR)
})
