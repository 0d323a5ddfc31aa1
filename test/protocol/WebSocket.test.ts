/**
 * The WebSocket text-to-speech endpoints against the running service, asserted as message
 * sequences: upgrade refusals (401, 404, 400, 503), SPEC 4.2 thresholds and control frames,
 * idle close, speed clamp, the audio format, cancel, backpressure (a client that stops reading
 * pauses its own synthesis), and ElevenLabs' multi-context protocol.
 *
 * No timing thresholds: waits are for events, with generous safety timeouts only.
 */
import { Effect } from "effect"
import t, { type Test } from "tap"
import { MAX_PENDING_CHARS } from "../../actors/TtsSession.ts"
import { CLOSE_NORMAL, CLOSE_POLICY, CLOSE_SERVER_ERROR } from "../../protocol/ws/CloseCodes.ts"
import { startTestService, type TestService } from "../support/service.ts"
import { audioChunks, connectWs, type Frame, isAudio, isChunkEnd, isRefused, type Refused, refused, spoken, until, type WsClient } from "../support/wsClient.ts"

const service = await startTestService(t)
const { apiKey } = await service.newUser(1_000_000)

const wsUrl = (s: TestService, voice: string, path = "stream-input", query = "") =>
  `${s.base}/text-to-speech/${encodeURIComponent(voice)}/${path}${query === "" ? "" : `?${query}`}`

const open = async (t: Test, options: { voice?: string; path?: string; query?: string; headers?: Record<string, string>; s?: TestService } = {}) => {
  // A key's first use makes the upgrade asynchronous, which this uWS build may answer with an
  // early 1006 (README, known issue; seen here under load): one HTTP call first caches the key.
  const headers = options.headers ?? { "xi-api-key": apiKey }
  if (Object.keys(headers).length > 0) await fetch(`${(options.s ?? service).base}/user`, { headers })
  const r = await connectWs(wsUrl(options.s ?? service, options.voice ?? "mari", options.path, options.query), options.headers ?? { "xi-api-key": apiKey })
  if (isRefused(r)) throw new Error(`upgrade refused: ${r.status} ${r.body}`)
  t.teardown(() => r.destroy())
  return r
}


/** s16le mono 24 kHz: samples, duration in ms and RMS (full scale 1). */
const decode = (frames: ReadonlyArray<Frame>) => {
  const bytes = Buffer.concat(frames.filter(isAudio).map((f) => Buffer.from(f.audio, "base64")))
  const samples = new Int16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >> 1)
  let sum = 0
  for (const s of samples) sum += (s / 32768) ** 2
  return { bytes: bytes.byteLength, samples: samples.length, durationMs: (samples.length * 1000) / 24000, rms: Math.sqrt(sum / Math.max(1, samples.length)) }
}

const sentence = (n: number, seed = "Tere") => {
  let s = `${seed} `
  while (s.length < n) s += "ja veel "
  return s.slice(0, n).replace(/\s$/, "x")
}

const metrics = async (s: TestService) => {
  const text = await (await fetch(`${s.siteUrl}/metrics`)).text()
  // A counter never updated yet is absent from the output: 0.
  const read = (name: string) => Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "m").exec(text)?.[1] ?? 0)
  return {
    active: read("tts_ws_sessions_active"),
    backpressured: read("tts_ws_sessions_backpressured"),
    buffered: read("tts_ws_buffered_bytes"),
    synthesized: read("tts_ws_chunks_synthesized_total"),
    sent: read("tts_ws_audio_frames_sent_total")
  }
}

const pollUntil = async <A>(read: () => Promise<A>, ok: (a: A) => boolean, safetyMs = 60_000): Promise<A> => {
  const deadline = Date.now() + safetyMs
  for (;;) {
    const a = await read()
    if (ok(a)) return a
    if (Date.now() > deadline) throw new Error(`condition not reached; last ${JSON.stringify(a)}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

t.test("upgrade: the key may come from xi-api-key, Authorization: Bearer, xi_api_key or xi-api-key in the query", async (t) => {
  for (const [name, opts] of [
    ["xi-api-key header", { headers: { "xi-api-key": apiKey } }],
    ["bearer", { headers: { authorization: `Bearer ${apiKey}` } }],
    ["xi_api_key query", { headers: {}, query: `xi_api_key=${apiKey}` }],
    ["xi-api-key query", { headers: {}, query: `xi-api-key=${apiKey}` }]
  ] as const) {
    const ws = await open(t, opts)
    ws.send({ text: " " })
    ws.send({ text: "Tere!", flush: true })
    const frames = await until(ws, (f) => f.flushDone === true)
    t.ok(frames.some(isAudio), `${name}: audio`)
    t.same(frames.at(-1), { audio: null, flushDone: true }, name)
  }
})

t.test("upgrade: missing or wrong key is 401 before the upgrade, with WWW-Authenticate and the SPEC 2.1 body", async (t) => {
  const none = await refused(wsUrl(service, "mari"))
  t.equal(none.status, 401)
  t.match(none.headers["www-authenticate"], /^Bearer resource_metadata="http:\/\/.*\/\.well-known\/oauth-protected-resource"$/)
  t.match(JSON.parse(none.body), { detail: { status: "needs_authorization", message: String } })
  const bad = await refused(wsUrl(service, "mari"), { "xi-api-key": "sk_svc_not_a_real_key_at_all_0000000000" })
  t.equal(bad.status, 401)
  t.match(JSON.parse(bad.body), { detail: { status: "invalid_api_key" } })
  const badQuery = await refused(wsUrl(service, "mari", "stream-input", "xi_api_key=nope"))
  t.equal(badQuery.status, 401)
})

t.test("upgrade: unknown presets and clone ids are 404; clones point at the POST endpoint", async (t) => {
  const unknown = await refused(wsUrl(service, "nobody"), { "xi-api-key": apiKey })
  t.equal(unknown.status, 404)
  t.match(JSON.parse(unknown.body), { detail: { status: "voice_not_found" } })
  for (const path of ["stream-input", "multi-stream-input"]) {
    const clone = await refused(wsUrl(service, "vc_0123abcd", path), { "xi-api-key": apiKey })
    t.equal(clone.status, 404)
    const body = JSON.parse(clone.body)
    t.equal(body.detail.status, "voice_not_found")
    t.match(body.detail.message, /POST \/v1\/text-to-speech\/vc_0123abcd/)
  }
})

t.test("language: query beats the header, codes and English names work, unknown is 400", async (t) => {
  const bad = await refused(wsUrl(service, "mari"), { "xi-api-key": apiKey, "x-speak-language": "Klingon" })
  t.equal(bad.status, 400)
  t.match(JSON.parse(bad.body), { detail: { status: "invalid_request", message: /Klingon/ } })
  // The query wins, so the bad header is never looked at.
  const ws = await open(t, { query: "language=English", headers: { "xi-api-key": apiKey, "x-speak-language": "Klingon" } })
  ws.send({ text: " " })
  ws.send({ text: "Hello there, this is English spoken by an Estonian preset.", flush: true })
  const english = await until(ws, (f) => f.flushDone === true)
  const header = await open(t, { headers: { "xi-api-key": apiKey, "x-speak-language": "en" } })
  header.send({ text: " " })
  header.send({ text: "Hello there, this is English spoken by an Estonian preset.", flush: true })
  const viaHeader = await until(header, (f) => f.flushDone === true)
  const estonian = await open(t)
  estonian.send({ text: " " })
  estonian.send({ text: "Hello there, this is English spoken by an Estonian preset.", flush: true })
  const native = await until(estonian, (f) => f.flushDone === true)
  t.same(english.filter(isAudio).map((f) => f.audio), viaHeader.filter(isAudio).map((f) => f.audio), "query en = header en")
  t.not(english.find(isAudio)!.audio, native.find(isAudio)!.audio, "English rules differ from Estonian ones")
})

t.test("503 before the upgrade when WS_ENABLED=false", async (t) => {
  const off = await startTestService(t, { WS_ENABLED: "false" })
  const { apiKey: key } = await off.newUser()
  const r = await refused(wsUrl(off, "mari"), { "xi-api-key": key })
  t.equal(r.status, 503)
  t.match(JSON.parse(r.body), { detail: { status: "websocket_disabled", message: /WS_ENABLED/ } })
  const multi = await refused(wsUrl(off, "mari", "multi-stream-input"), { "xi-api-key": key })
  t.equal(multi.status, 503)
})

t.test("thresholds: 39 characters counting the '.' wait, 40 are synthesized at the boundary, 240 force a cut", async (t) => {
  const ws = await open(t)
  ws.send({ text: " " })
  const s39 = `${sentence(38)}.`
  ws.send({ text: `${s39} ` })
  ws.send({ text: "Lõpp." })
  ws.send({ flush: true })
  const a = await until(ws, (f) => f.flushDone === true)
  t.equal(a.filter(isChunkEnd).length, 1, "38 + '.': one synthesis, made by the flush")
  t.equal(spoken(a), `${s39} Lõpp.`)

  const s40 = `${sentence(39)}.`
  ws.send({ text: `${s40} ` })
  const first = await until(ws, isChunkEnd)
  t.ok(first.every(isAudio), "39 + '.' (40 held): synthesized without a flush")
  t.equal(spoken(first), `${s40} `, "the space after the sentence goes with it")
  ws.send({ text: "Lõpp.", flush: true })
  const b = await until(ws, (f) => f.flushDone === true)
  t.equal(spoken(b), "Lõpp.")

  let long = ""
  while (long.length < 250) long += "sõna "
  ws.send({ text: long })
  const forced = await until(ws, isChunkEnd)
  t.ok(forced.every(isAudio), "240 characters: synthesized without a boundary or flush")
  const cut = long.lastIndexOf(" ", 239)
  t.equal(spoken(forced), long.slice(0, cut), "cut at the last space before 240")
  ws.send({ flush: true })
  const rest = await until(ws, (f) => f.flushDone === true)
  t.equal(spoken(rest), long.slice(cut))
})

t.test("try_trigger_generation synthesizes the buffer now; a later flush only reports flushDone", async (t) => {
  const ws = await open(t)
  ws.send({ text: " " })
  ws.send({ text: "Tere hommikust", try_trigger_generation: true })
  const audio = await until(ws, isChunkEnd)
  t.ok(audio.every(isAudio))
  t.equal(spoken(audio), "Tere hommikust")
  t.ok(audio.every((f) => f.isFinal === false))
  ws.send({ flush: true })
  t.same(await ws.nextJson(), { audio: null, flushDone: true })
})

t.test("flush: flushDone follows all the audio of the flush; the session stays open", async (t) => {
  const ws = await open(t)
  ws.send({ text: " " })
  const text = `${sentence(60)}. ${sentence(70, "Teine")}! Lühike lõpp`
  for (const piece of text.match(/.{1,7}/gsu)!) ws.send({ text: piece })
  ws.send({ flush: true })
  const frames = await until(ws, (f) => f.flushDone === true)
  t.equal(frames.filter(isChunkEnd).length, 3)
  t.equal(spoken(frames), text)
  t.same(frames.at(-1), { audio: null, flushDone: true })
  ws.send({ text: "Ja veel üks lause pärast flushi.", flush: true })
  const again = await until(ws, (f) => f.flushDone === true)
  t.equal(spoken(again), "Ja veel üks lause pärast flushi.")
})

t.test("end of stream: {text:''} flushes, sends isFinal, closes with 1000", async (t) => {
  const ws = await open(t)
  ws.send({ text: " " })
  ws.send({ text: "Viimane lause enne lõppu" })
  ws.send({ text: "" })
  const frames = await until(ws, () => false)
  t.equal(spoken(frames), "Viimane lause enne lõppu")
  t.same(frames.at(-2), { audio: null, isFinal: true })
  t.match(frames.at(-1), { close: CLOSE_NORMAL })
})

t.test("keep-alive: a later {text:' '} is not appended", async (t) => {
  const ws = await open(t)
  ws.send({ text: " " })
  ws.send({ text: "Tere" })
  ws.send({ text: " " })
  ws.send({ text: "päevast", flush: true })
  const frames = await until(ws, (f) => f.flushDone === true)
  t.equal(spoken(frames), "Terepäevast")
})

t.test("audio is raw s16le mono at 24 kHz: non-silent, plausible duration, alignment inside it", async (t) => {
  const ws = await open(t)
  ws.send({ text: " " })
  const text = "Tere! Kuidas sul täna läheb? Loodan, et kõik on hästi ja päike paistab."
  ws.send({ text, flush: true })
  const frames = await until(ws, (f) => f.flushDone === true)
  const audio = decode(frames)
  t.equal(audio.bytes % 2, 0, "whole 16-bit samples")
  t.ok(audio.rms > 0.01, `RMS ${audio.rms.toFixed(3)} is not silence`)
  // About 70 characters of speech: a few seconds, not milliseconds or minutes.
  t.ok(audio.durationMs > 1500 && audio.durationMs < 20_000, `duration ${audio.durationMs} ms`)
  const chunks = audioChunks(frames)
  t.equal(spoken(frames), text, "the chunks' alignments spell the text")
  t.ok(chunks.some((c) => c.frames > 1), "audio streamed in blocks: chunks of several frames")
  for (const { bytes, alignment: a } of chunks) {
    const chunkMs = (bytes.byteLength / 2 / 24000) * 1000
    t.equal(a.chars.length, a.charStartTimesMs.length)
    t.equal(a.chars.length, a.charDurationsMs.length)
    t.ok(a.charStartTimesMs.every((ms: number, i: number) => Number.isInteger(ms) && ms >= 0 && ms + a.charDurationsMs[i] <= chunkMs + 1))
  }
  for (const f of frames.filter(isAudio)) t.same(f.normalizedAlignment, f.alignment)
})

t.test("speed: clamped to 0.5..2 on any frame, so 5 sounds like 2 and 0.1 like 0.5", async (t) => {
  const text = "Kiirus on siin mõõdetud ühe ja sama lausega."
  const durationAt = async (speed: number) => {
    const ws = await open(t)
    ws.send({ text: " " })
    ws.send({ text, voice_settings: { speed, stability: 0.5 }, flush: true })
    const frames = await until(ws, (f) => f.flushDone === true)
    return { ms: decode(frames).durationMs, audio: frames.filter(isAudio).map((f) => f.audio).join("") }
  }
  const [one, two, five, half, tenth] = [await durationAt(1), await durationAt(2), await durationAt(5), await durationAt(0.5), await durationAt(0.1)]
  t.ok(five.ms < one.ms, `speed 5 (${five.ms} ms) is shorter than speed 1 (${one.ms} ms)`)
  t.equal(five.audio, two.audio, "speed 5 is speed 2")
  t.equal(tenth.audio, half.audio, "speed 0.1 is speed 0.5")
  t.ok(half.ms > one.ms)
})

/**
 * Text for a client that stops reading: at speed 0.5 about a thousand seconds of audio (≈ 64 MB
 * of base64), far more than loopback socket buffers absorb, in sentences of 61 characters (one
 * chunk each) and under the pending-text bound.
 */
const stallText = () => {
  const sentences: Array<string> = []
  while (sentences.join(" ").length < MAX_PENDING_CHARS - 500) sentences.push(`${sentence(60, `Lause number ${sentences.length}`)}.`)
  return { sentences, text: sentences.join(" ") }
}

const sendInPieces = (ws: WsClient, text: string, extra: Record<string, unknown> = {}) => {
  for (let i = 0; i < text.length; i += 500) ws.send({ text: text.slice(i, i + 500), ...extra })
}

t.test("cancel: drops the speech in progress even while the client is not reading; acked in order; the session goes on", async (t) => {
  const ws = await open(t)
  ws.send({ text: " ", voice_settings: { speed: 0.5 } })
  const { sentences, text } = stallText()
  ws.pause()
  sendInPieces(ws, text)
  await pollUntil(() => metrics(service), (m) => m.backpressured === 1)
  ws.send({ cancel: true })
  ws.resume()
  const before = await until(ws, (f) => f.cancelled === true)
  t.same(before.at(-1), { audio: null, cancelled: true })
  t.ok(before.filter(isChunkEnd).length < sentences.length, `${before.filter(isChunkEnd).length} of ${sentences.length} chunks were spoken`)
  t.ok(text.startsWith(spoken(before)), "what was spoken is a prefix of the text")
  ws.send({ text: "Uus jutt pärast katkestust.", voice_settings: { speed: 1 }, flush: true })
  const after = await until(ws, (f) => f.flushDone === true)
  t.equal(spoken(after), "Uus jutt pärast katkestust.", "only the new text after the ack")
})

t.test("malformed frames: error frame invalid_message, then close 1008", async (t) => {
  for (const bad of ["{not json", JSON.stringify([1, 2]), JSON.stringify({ text: 5 }), JSON.stringify({ voice_settings: { speed: "fast" } })]) {
    const ws = await open(t)
    ws.send({ text: " " })
    ws.send(bad)
    const error = await ws.nextJson()
    t.match(error, { error: { code: "invalid_message", message: String } }, bad)
    t.match(await ws.nextJson(), { close: CLOSE_POLICY })
  }
  const ws = await open(t)
  ws.sendBinary(new Uint8Array([1, 2, 3]))
  t.match(await ws.nextJson(), { error: { code: "invalid_message" } })
  t.match(await ws.nextJson(), { close: CLOSE_POLICY })
})

t.test("pending text past the bound is refused with text_too_long and 1008", async (t) => {
  const ws = await open(t)
  ws.send({ text: " " })
  ws.send({ text: "x".repeat(MAX_PENDING_CHARS + 1) })
  t.match(await ws.nextJson(), { error: { code: "text_too_long" } })
  t.match(await ws.nextJson(), { close: CLOSE_POLICY })
})

t.test("credits: one per synthesized character; an empty account gets quota_exceeded and 1008", async (t) => {
  const poor = await service.newUser(30)
  const ws = await open(t, { headers: { "xi-api-key": poor.apiKey } })
  ws.send({ text: " " })
  ws.send({ text: "Kakskümmend tähte!", flush: true }) // 18 characters
  const paid = await until(ws, (f) => f.flushDone === true)
  t.ok(paid.some(isAudio))
  t.equal(await Effect.runPromise(service.users.balance(poor.userId)), 12)
  ws.send({ text: "See lause on pikem kui kaksteist tähte.", flush: true })
  const error = await ws.nextJson()
  t.match(error, { error: { code: "quota_exceeded", message: String } })
  t.match(await ws.nextJson(), { close: CLOSE_POLICY })
})

t.test("whitespace after a sentence that a flush cuts stays in the alignment (outside finding: it was dropped at each flush)", async (t) => {
  const ws = await open(t)
  ws.send({ text: " " })
  const pieces = [0, 1, 2, 3, 4, 5].map((k) => `Kontekst a lause ${k}. `)
  pieces.forEach((text, k) => ws.send({ text, flush: k % 3 === 2 }))
  const frames = [...await until(ws, (f) => f.flushDone === true), ...await until(ws, (f) => f.flushDone === true)]
  t.equal(spoken(frames), pieces.join(""), "every character, the spaces at the flushes included")
})

t.test("a chunk of punctuation only is silence: an empty frame that spells it, not charged (Flite made 7 ms of audio for it)", async (t) => {
  const user = await service.newUser(1000)
  const ws = await open(t, { voice: "walter-en", headers: { "xi-api-key": user.apiKey } })
  ws.send({ text: " " })
  ws.send({ text: "... ", flush: true })
  const silent = await until(ws, (f) => f.flushDone === true)
  t.equal(spoken(silent), "... ", "the alignment still spells the chunk")
  t.equal(decode(silent).bytes, 0, "no audio")
  ws.send({ text: "Hello there.", flush: true })
  const spokenFrames = await until(ws, (f) => f.flushDone === true)
  t.ok(decode(spokenFrames).durationMs > 300, "the next chunk is spoken")
  t.equal(await Effect.runPromise(service.users.balance(user.userId)), 1000 - "Hello there.".length, "only the spoken chunk is charged")
})

t.test("backpressure: a client that stops reading pauses its synthesis with bounded memory, then resumes", async (t) => {
  const ws = await open(t)
  ws.send({ text: " ", voice_settings: { speed: 0.5 } })
  const { sentences, text } = stallText()
  const start = await metrics(service)
  ws.pause()
  sendInPieces(ws, text)
  ws.send({ flush: true })

  // Stalled: the deliverer waits for the client, and the producer has filled the pipeline (one
  // chunk being sent, one in the result slot, one finished and waiting to enter it).
  const ahead = (m: Awaited<ReturnType<typeof metrics>>) => (m.synthesized - start.synthesized) - (m.sent - start.sent)
  const stalled = await pollUntil(() => metrics(service), (m) => m.backpressured === 1 && ahead(m) >= 3)
  const sent = stalled.sent - start.sent
  t.equal(ahead(stalled), 3, `synthesized ${stalled.synthesized - start.synthesized}, sent ${sent}: only the pipeline's chunks ahead`)
  t.ok(sent < sentences.length, `stalled after ${sent} of ${sentences.length} chunks`)
  t.ok(stalled.buffered <= 4 * 1024 * 1024, `socket buffers hold ${stalled.buffered} bytes`)
  await new Promise((r) => setTimeout(r, 500))
  const later = await metrics(service)
  t.equal(later.synthesized, stalled.synthesized, "no synthesis while the client does not read")
  t.equal(later.backpressured, 1)

  ws.resume()
  const frames = await until(ws, (f) => f.flushDone === true)
  t.equal(frames.filter(isChunkEnd).length, sentences.length, "every chunk arrives once reading resumes")
  t.equal(spoken(frames), text)
  const done = await metrics(service)
  t.equal(done.synthesized - start.synthesized, sentences.length)
  t.equal(done.backpressured, 0)
})

t.test("multi-stream-input: interleaved contexts, per-context flush, close_context, close_socket", async (t) => {
  const ws = await open(t, { path: "multi-stream-input" })
  ws.send({ text: " ", context_id: "a" })
  ws.send({ text: " ", context_id: "b", voice_settings: { speed: 1.2 } })
  const textA = "Esimene kontekst räägib oma lauset. Ja teist."
  const textB = "Teine kontekst räägib samal ajal midagi muud."
  const wordsA = textA.split(/(?<= )/u)
  const wordsB = textB.split(/(?<= )/u)
  for (let i = 0; i < Math.max(wordsA.length, wordsB.length); i++) {
    if (wordsA[i] !== undefined) ws.send({ text: wordsA[i], context_id: "a" })
    if (wordsB[i] !== undefined) ws.send({ text: wordsB[i], context_id: "b" })
  }
  ws.send({ context_id: "a", flush: true })
  ws.send({ context_id: "b", flush: true })
  const frames: Array<Frame> = []
  const flushed = new Set<string>()
  while (flushed.size < 2) {
    const f = await ws.nextJson()
    frames.push(f)
    if (f.flushDone === true) flushed.add(f.contextId)
  }
  for (const id of ["a", "b"]) {
    const mine = frames.filter((f) => f.contextId === id)
    t.equal(spoken(mine), id === "a" ? textA : textB, `context ${id} spells its text`)
    t.same(mine.at(-1), { flushDone: true, contextId: id }, `flushDone of ${id} follows its audio`)
    t.ok(mine.filter(isAudio).every((f) => f.isFinal === false))
  }
  t.ok(frames.every((f) => f.contextId === "a" || f.contextId === "b"))

  // Empty text is a keep-alive here, not an end.
  ws.send({ text: "", context_id: "a" })
  // close_context: flushed speech finishes, unflushed text is dropped, then isFinal.
  ws.send({ text: "Lühike jupp mida ei öelda", context_id: "b" })
  ws.send({ context_id: "b", close_context: true })
  t.same(await ws.nextJson(), { isFinal: true, contextId: "b" })
  ws.send({ text: "Flush ja sulgemine kohe järel.", context_id: "a", flush: true })
  ws.send({ context_id: "a", close_context: true })
  const closing = await until(ws, (f) => f.isFinal === true)
  t.equal(spoken(closing), "Flush ja sulgemine kohe järel.")
  t.same(closing.slice(-2), [{ flushDone: true, contextId: "a" }, { isFinal: true, contextId: "a" }])

  // A closed id may be used again as a new context; close_socket flushes it and closes normally.
  ws.send({ text: "Uus elu vanal nimel", context_id: "a" })
  ws.send({ close_socket: true })
  const end = await until(ws, () => false)
  t.equal(spoken(end), "Uus elu vanal nimel")
  t.same(end.at(-2), { isFinal: true, contextId: "a" })
  t.match(end.at(-1), { close: CLOSE_NORMAL })
})

t.test("multi-stream-input: more than 10 open contexts is refused with too_many_contexts", async (t) => {
  const ws = await open(t, { path: "multi-stream-input" })
  for (let i = 0; i < 11; i++) ws.send({ text: " ", context_id: `c${i}` })
  t.match(await ws.nextJson(), { error: { code: "too_many_contexts" }, contextId: "c10" })
  t.match(await ws.nextJson(), { close: CLOSE_POLICY })
})

t.test("metrics: active WebSocket sessions are a gauge", async (t) => {
  const before = (await metrics(service)).active
  const ws = await open(t)
  ws.send({ text: " " })
  await pollUntil(() => metrics(service), (m) => m.active === before + 1)
  ws.close()
  t.match(await ws.nextJson(), { close: Number })
  const after = await pollUntil(() => metrics(service), (m) => m.active === before)
  t.equal(after.active, before)
})

t.test("idle: no inbound frame for WS_IDLE_TIMEOUT_S gives an error frame and close 1011", async (t) => {
  const idle = await startTestService(t, { WS_IDLE_TIMEOUT_S: "1" })
  const { apiKey: key } = await idle.newUser()
  const ws = await open(t, { s: idle, headers: { "xi-api-key": key } })
  ws.send({ text: " " })
  ws.send({ text: "Tere!", flush: true })
  await until(ws, (f) => f.flushDone === true)
  t.match(await ws.nextJson(), { error: { code: "idle_timeout", message: String } })
  t.match(await ws.nextJson(), { close: CLOSE_SERVER_ERROR })

  // A client that stops reading is idle too: its session ends instead of holding memory.
  const stuck = await open(t, { s: idle, headers: { "xi-api-key": key } })
  stuck.send({ text: " ", voice_settings: { speed: 0.5 } })
  stuck.pause()
  sendInPieces(stuck, stallText().text)
  await pollUntil(() => metrics(idle), (m) => m.backpressured === 1)
  await pollUntil(() => metrics(idle), (m) => m.active === 0)
  stuck.resume()
  const frames = await until(stuck, () => false)
  t.match(frames.at(-2), { error: { code: "idle_timeout" } })
  t.match(frames.at(-1), { close: CLOSE_SERVER_ERROR })
})
