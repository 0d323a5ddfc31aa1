/**
 * What ElevenLabs clients (LiveKit, Pipecat, the SDKs) rely on beyond SPEC 4.2's basics:
 * `output_format` on multi-stream-input, `inactivity_timeout`, Estonian as the default language of
 * every preset, characters counted as code points, and close codes for frames uWS refuses.
 *
 * No timing thresholds: waits are for events, with generous safety timeouts only.
 */
import { Effect } from "effect"
import t, { type Test } from "tap"
import WebSocket from "ws"
import { MAX_PENDING_CHARS } from "../../actors/TtsSession.ts"
import { CLOSE_POLICY } from "../../protocol/ws/CloseCodes.ts"
import { mulawDecode } from "../../engines/audio/Mulaw.ts"
import { startTestService } from "../support/service.ts"
import { audioChunks, connectWs, type Frame, isAudio, isChunkEnd, isRefused, type Refused, refused, spoken, until, type WsClient } from "../support/wsClient.ts"

const service = await startTestService(t)
const { apiKey } = await service.newUser(1_000_000)

const wsUrl = (voice: string, path: string, query = "") =>
  `${service.base}/text-to-speech/${encodeURIComponent(voice)}/${path}${query === "" ? "" : `?${query}`}`

/**
 * A key's first use makes the upgrade asynchronous, which this uWS build may answer with an early
 * 1006 (README, known issue); one HTTP call first puts the key in the cache.
 */
const warmed = new Set<string>()
const warm = async (key: string) => {
  if (warmed.has(key)) return
  await fetch(`${service.base}/user`, { headers: { "xi-api-key": key } })
  warmed.add(key)
}

const open = async (t: Test, options: { voice?: string; path?: string; query?: string; key?: string } = {}) => {
  await warm(options.key ?? apiKey)
  const r = await connectWs(wsUrl(options.voice ?? "mari", options.path ?? "stream-input", options.query), { "xi-api-key": options.key ?? apiKey })
  if (isRefused(r)) throw new Error(`upgrade refused: ${r.status} ${r.body}`)
  t.teardown(() => r.destroy())
  return r
}

const refusedWithKey = async (url: string): Promise<Refused> => {
  await warm(apiKey)
  return refused(url, { "xi-api-key": apiKey })
}

const audioBytes = (frames: ReadonlyArray<Frame>) => Buffer.concat(frames.filter(isAudio).map((f) => Buffer.from(f.audio, "base64")))

/** Audio of `text` in one flush, on either endpoint. */
const speak = async (t: Test, text: string, options: { voice?: string; path?: string; query?: string } = {}) => {
  const ws = await open(t, options)
  const multi = options.path === "multi-stream-input"
  ws.send(multi ? { text: " ", context_id: "c" } : { text: " " })
  ws.send(multi ? { text, context_id: "c", flush: true } : { text, flush: true })
  const frames = await until(ws, (f) => f.flushDone === true)
  ws.destroy()
  return frames
}

const TEXT = "Tere! Kuidas sul täna läheb? Loodan, et kõik on hästi ja päike paistab."

t.test("multi-stream-input honours output_format: pcm_22050 is 22050 samples per second of speech (LiveKit's default)", async (t) => {
  // Reference: SPEC 4.2's stream-input, fixed at 24 kHz whatever output_format says.
  const reference = audioBytes(await speak(t, TEXT, { query: "output_format=pcm_22050" }))
  const seconds = reference.byteLength / 2 / 24000
  const lk = await speak(t, TEXT, { path: "multi-stream-input", query: "output_format=pcm_22050" })
  const samples = audioBytes(lk).byteLength / 2
  const rate = samples / seconds
  t.comment(`LiveKit audio rate: ${rate.toFixed(0)} samples per second of speech for pcm_22050`)
  t.ok(Math.abs(rate - 22050) < 22050 * 0.005, `pcm_22050 gives ${rate.toFixed(0)} samples/s`)
  t.equal(spoken(lk), TEXT, "alignment unchanged: chars spell the text")
  const lastChunk = audioChunks(lk).at(-1)!
  const lastMs = (lastChunk.bytes.byteLength / 2 / 22050) * 1000
  const a = lastChunk.alignment
  t.ok(a.charStartTimesMs.every((ms: number, i: number) => ms + a.charDurationsMs[i] <= lastMs + 1), "alignment stays in ms inside the 22050 Hz audio")

  const same = audioBytes(await speak(t, TEXT, { path: "multi-stream-input", query: "output_format=pcm_24000" }))
  t.equal(same.byteLength, reference.byteLength, "pcm_24000 is the 24 kHz audio")
  const k48Frames = await speak(t, TEXT, { path: "multi-stream-input", query: "output_format=pcm_48000" })
  const k48 = audioBytes(k48Frames)
  // Each chunk's length is rounded on its own: at most one sample per chunk from exactly twice.
  const twice = reference.byteLength
  t.ok(Math.abs(k48.byteLength / 2 - twice) <= k48Frames.filter(isChunkEnd).length, `pcm_48000: ${k48.byteLength / 2} samples, twice 24 kHz's (${twice})`)
})

t.test("multi-stream-input: ulaw_8000 is one µ-law byte per 8 kHz sample, and not silence", async (t) => {
  const reference = audioBytes(await speak(t, TEXT))
  const frames = await speak(t, TEXT, { path: "multi-stream-input", query: "output_format=ulaw_8000" })
  const ulaw = audioBytes(frames)
  // Each chunk's length is rounded on its own: at most one sample per frame apart.
  const expected = reference.byteLength / 2 / 3
  t.ok(Math.abs(ulaw.byteLength - expected) <= frames.filter(isChunkEnd).length, `${ulaw.byteLength} bytes: 24000 / 3 samples (${expected}), one byte each`)
  const pcm = mulawDecode(ulaw)
  let sum = 0
  for (const s of pcm) sum += (s / 32768) ** 2
  t.ok(Math.sqrt(sum / pcm.length) > 0.01, "speech, not silence")
})

t.test("multi-stream-input: an output_format it cannot send is refused before the upgrade with 415", async (t) => {
  for (const format of ["mp3_44100_128", "opus_48000_64", "pcm_12345", "wav_24000", "nonsense"]) {
    const r = await refusedWithKey(wsUrl("mari", "multi-stream-input", `output_format=${format}`))
    t.equal(r.status, 415, format)
    t.match(JSON.parse(r.body), { detail: { status: "unsupported_output_format", message: /pcm_<rate>.*ulaw_8000/ } }, format)
  }
  // stream-input keeps SPEC 4.2's "output_format is ignored".
  const ws = await open(t, { query: "output_format=mp3_44100_128" })
  ws.send({ text: " " })
  ws.send({ text: "Tere!", flush: true })
  t.ok((await until(ws, (f) => f.flushDone === true)).some(isAudio))
})

t.test("inactivity_timeout (s) replaces the 60 s idle limit on both endpoints; bad values are 400", async (t) => {
  for (const path of ["stream-input", "multi-stream-input"]) {
    const ws = await open(t, { path, query: "inactivity_timeout=1" })
    ws.send(path === "stream-input" ? { text: " " } : { text: " ", context_id: "c" })
    // The safety timeout (30 s) lies far below the 60 s default: only the parameter can close it.
    const error = await ws.nextJson()
    t.match(error, { error: { code: "idle_timeout", message: /no frame for 1 s/ } }, path)
    t.match(await ws.nextJson(), { close: 1011 }, path)
  }
  for (const bad of ["0", "-5", "abc", "1e999", "0.0001", "1e-300", "0x10", "0.5"]) {
    const r = await refusedWithKey(wsUrl("mari", "stream-input", `inactivity_timeout=${bad}`))
    t.equal(r.status, 400, bad)
    t.match(JSON.parse(r.body), { detail: { status: "invalid_request", message: /inactivity_timeout/ } }, bad)
  }
  // Above ElevenLabs' cap of 180 s the value is clamped, not refused: LiveKit's plugins send 300.
  const livekit = await speak(t, "Tere!", { path: "multi-stream-input", query: "output_format=pcm_22050&inactivity_timeout=300" })
  t.ok(livekit.some(isAudio), "LiveKit's inactivity_timeout=300 is accepted")
  const capped = await open(t, { query: "inactivity_timeout=100000" })
  capped.send({ text: " " })
  capped.send({ text: "Tere!", flush: true })
  t.ok((await until(capped, (f) => f.flushDone === true)).some(isAudio))
})

t.test("language: without query or header every preset speaks Estonian (SPEC 4.2), an English Flite preset too", async (t) => {
  const sentence = "Tere hommikust, see lause on eesti keeles."
  const plain = await speak(t, sentence, { voice: "emma-en" })
  const estonian = await speak(t, sentence, { voice: "emma-en", query: "language=et" })
  const english = await speak(t, sentence, { voice: "emma-en", query: "language_code=en" })
  t.same(audioBytes(plain), audioBytes(estonian), "no language = Estonian")
  t.notSame(audioBytes(plain), audioBytes(english), "language_code=en still gives English")
})

t.test("characters are code points: 4001 emoji are not over the 8000-character pending bound", async (t) => {
  const ws = await open(t)
  ws.send({ text: " " })
  ws.send({ text: "😀".repeat(4001) })
  ws.send({ cancel: true })
  const frames = await until(ws, (f) => f.cancelled === true)
  t.notOk(frames.some((f) => f.error !== undefined), "no text_too_long")
  t.same(frames.at(-1), { audio: null, cancelled: true })

  const over = await open(t)
  over.send({ text: " " })
  over.send({ text: "😀".repeat(MAX_PENDING_CHARS + 1) })
  t.match(await over.nextJson(), { error: { code: "text_too_long" } }, "8001 emoji are over it")
  t.match(await over.nextJson(), { close: CLOSE_POLICY })
})

t.test("credits: one per code point of the chunk", async (t) => {
  const user = await service.newUser(1000)
  const ws = await open(t, { key: user.apiKey })
  ws.send({ text: " " })
  const text = "Tere 👋👋👋 sõber!" // 15 code points, 18 UTF-16 units
  ws.send({ text, flush: true })
  t.ok((await until(ws, (f) => f.flushDone === true)).some(isAudio))
  t.equal(await Effect.runPromise(service.users.balance(user.userId)), 1000 - 15)
})

/** A `ws` client (the library most Node clients use): its view of the close. */
const wsLibraryClose = async (path: string, send: (c: WebSocket) => void) => {
  await warm(apiKey)
  return new Promise<{ code: number; reason: string }>((resolve, reject) => {
    const c = new WebSocket(wsUrl("mari", path), { headers: { "xi-api-key": apiKey } })
    c.on("open", () => send(c))
    c.on("close", (code, reason) => resolve({ code, reason: reason.toString() }))
    c.on("error", () => {})
    c.on("unexpected-response", (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)))
  })
}

t.test("a frame over 64 KiB closes with 1009 and a reason, on both endpoints", async (t) => {
  for (const path of ["stream-input", "multi-stream-input"]) {
    const closed = await wsLibraryClose(path, (c) => c.send(JSON.stringify({ text: "x".repeat(70 * 1024) })))
    t.equal(closed.code, 1009, path)
    t.match(closed.reason, /64 KiB/, path)
  }
  // Just under the bound is an ordinary frame (here: too much pending text, 1008).
  const under = await wsLibraryClose("stream-input", (c) => c.send(JSON.stringify({ text: "x".repeat(60 * 1024) })))
  t.equal(under.code, CLOSE_POLICY)
})

/**
 * uWS (this build) drops the TCP connection without a close frame for a text frame that is not
 * UTF-8 and for a message over its own limit (1 MiB): the client sees 1006, not 1007 / 1009, and
 * the server cannot change that (uWebSockets issue #1321). What is ours to keep: the session
 * ends, nothing of the frame is spoken, the server goes on.
 */
t.test("invalid UTF-8 in a text frame, and a frame over 1 MiB: the connection ends (uWS: 1006), the server goes on", async (t) => {
  const raw = await open(t)
  raw.send({ text: " " })
  raw.sendRawText(Buffer.from([...Buffer.from('{"text":"'), 0xff, 0xfe, ...Buffer.from('"}')]))
  const invalid = await raw.next()
  t.equal(invalid.type, "close", "no frame answers it")
  t.ok(invalid.type === "close" && (invalid.code === 1006 || invalid.code === 1007), `closed with ${invalid.type === "close" ? invalid.code : "?"}`)
  const huge = await wsLibraryClose("stream-input", (c) => c.send("x".repeat(2 * 1024 * 1024)))
  t.ok(huge.code === 1006 || huge.code === 1009, `closed with ${huge.code}`)
  const ws = await open(t)
  ws.send({ text: " " })
  ws.send({ text: "Tere!", flush: true })
  t.ok((await until(ws, (f) => f.flushDone === true)).some(isAudio), "the server still speaks")
})
