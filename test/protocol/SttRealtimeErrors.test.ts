/**
 * `GET /v1/speech-to-text/realtime` refusing what it must: each bad input gets the SDK's error
 * message type, then the close, and nothing else breaks (the next session works). Auth: a
 * missing or wrong key (auth_error), a `realtime_scribe` single-use token with no key (through
 * the SDK), a deleted key closing its session. Credits: a 5-credit user streaming 20 s gets
 * quota_exceeded and is charged 5; a fast-check property over random frame sequences: never a
 * crash, never a debit without audio, and the ledger sums to balance + reserved.
 */
import { AudioFormat, ElevenLabsClient, RealtimeEvents } from "@elevenlabs/elevenlabs-js"
import { Effect } from "effect"
import fc from "fast-check"
import t, { type Test } from "tap"
import { LIBRIVOX_WAV, pcmOf } from "../support/librivoxSpeech.ts"
import { startTestService } from "../support/service.ts"
import { connectWs, isRefused, type WsClient } from "../support/wsClient.ts"

const service = await startTestService(t, { WORKERS: "2" })
const { apiKey } = await service.newUser(1_000_000)
const wsBase = `${service.base}/speech-to-text/realtime`
const PCM = pcmOf(LIBRIVOX_WAV)

const open = async (query: string, headers: Record<string, string> = { "xi-api-key": apiKey }): Promise<WsClient> => {
  const ws = await connectWs(`${wsBase}?${query}`, headers)
  if (isRefused(ws)) throw new Error(`refused: ${ws.status} ${ws.body}`)
  return ws
}

/** Messages until the close; the close last as `{close, reason}`. */
const rest = async (ws: WsClient) => {
  const out: Array<Record<string, any>> = []
  for (;;) {
    const m = await ws.nextJson()
    out.push(m)
    if ("close" in m) return out
  }
}

const started = async (ws: WsClient) => {
  const first = await ws.nextJson()
  if (first.message_type !== "session_started") throw new Error(`expected session_started, got ${JSON.stringify(first)}`)
}

const chunk = (audio: Buffer, extra: Record<string, unknown> = {}) => ({ message_type: "input_audio_chunk", audio_base_64: audio.toString("base64"), commit: false, sample_rate: 16000, ...extra })

/** The error message then the close, and only those after what came before. */
const refusedWith = async (t: Test, ws: WsClient, type: string, code: number) => {
  const messages = (await rest(ws)).filter((m) => m.message_type !== "partial_transcript")
  t.equal(messages.at(-2)?.message_type, type, `${type} is sent`)
  t.type(messages.at(-2)?.error, "string", "with a reason")
  t.equal(messages.at(-1)?.close, code, `then the close ${code}`)
}

t.test("bad query values: input_error then close, never a silent default", async (t) => {
  for (const q of ["model_id=m&audio_format=mp3_44100", "model_id=m&commit_strategy=auto", "model_id=m&vad_threshold=2", "model_id=m&include_timestamps=yes", "audio_format=pcm_16000", "model_id=m&language_code=fr"]) {
    const ws = await open(q)
    await refusedWith(t, ws, "input_error", 1008)
  }
})

t.test("auth: no key, a wrong key → auth_error then close", async (t) => {
  await refusedWith(t, await open("model_id=m", {}), "auth_error", 1008)
  await refusedWith(t, await open("model_id=m", { "xi-api-key": "sk_nope" }), "auth_error", 1008)
})

t.test("bad frames: garbage base64, a wrong sample_rate, non-JSON, binary, an oversized chunk", async (t) => {
  const cases: Array<[(ws: WsClient) => void, string, number]> = [
    [(ws) => ws.send({ message_type: "input_audio_chunk", audio_base_64: "@@not base64!!", commit: false, sample_rate: 16000 }), "input_error", 1008],
    [(ws) => ws.send(chunk(PCM.subarray(0, 3200), { sample_rate: 8000 })), "input_error", 1008],
    [(ws) => ws.send("this is not JSON"), "input_error", 1008],
    [(ws) => ws.sendBinary(PCM.subarray(0, 3200)), "input_error", 1008],
    [(ws) => ws.send(chunk(Buffer.alloc(16000 * 2 * 6))), "chunk_size_exceeded", 1009]
  ]
  for (const [act, type, code] of cases) {
    const ws = await open("model_id=m&audio_format=pcm_16000")
    await started(ws)
    act(ws)
    await refusedWith(t, ws, type, code)
  }
})

t.test("previous_text only with the first chunk", async (t) => {
  const ws = await open("model_id=m")
  await started(ws)
  ws.send(chunk(PCM.subarray(0, 3200), { previous_text: "hello" }))
  ws.send(chunk(PCM.subarray(0, 3200), { previous_text: "again" }))
  await refusedWith(t, ws, "input_error", 1008)
})

t.test("audio far ahead of real time: queue_overflow once the backlog passes 10 s", async (t) => {
  const ws = await open("model_id=m")
  await started(ws)
  // 60 s of audio in one burst: the decoder cannot have taken it.
  const second = PCM.subarray(0, 32000)
  for (let i = 0; i < 60; i++) ws.send(chunk(second))
  await refusedWith(t, ws, "queue_overflow", 1008)
})

t.test("a disconnect mid-stream and a client that never reads: the service keeps serving", async (t) => {
  const gone = await open("model_id=m")
  await started(gone)
  gone.send(chunk(PCM.subarray(0, 32000)))
  gone.destroy()
  const silent = await open("model_id=m")
  silent.pause()
  for (let i = 0; i < 5; i++) silent.send(chunk(PCM.subarray(i * 32000, (i + 1) * 32000), { commit: true }))
  const ws = await open("model_id=m")
  await started(ws)
  for (let i = 0; i < 7; i++) ws.send(chunk(PCM.subarray(i * 32000, (i + 1) * 32000), { commit: i === 6 }))
  for (;;) {
    const m = await ws.nextJson()
    if (m.message_type === "committed_transcript") {
      t.ok(m.text.length > 0, "a new session transcribes")
      break
    }
  }
  silent.destroy()
  ws.close()
})

const balance = (userId: string) => Effect.runPromise(service.users.balance(userId))
const reserved = (userId: string) => Effect.runPromise(service.credits.reserved(userId))
const ledgerSum = async (userId: string) => (await Effect.runPromise(service.credits.ledger(userId, { limit: 500 }))).reduce((s, e) => s + e.amount, 0)
const settled = async (userId: string) => {
  // The session's finalizer settles after the close reached the client: wait for it.
  for (let i = 0; i < 200 && (await reserved(userId)) > 0; i++) await new Promise((r) => setTimeout(r, 50))
}

t.test("5 credits, 20 s of audio at a steady pace: quota_exceeded, charged what was accepted", async (t) => {
  const user = await service.newUser(5)
  const ws = await open("model_id=m", { "xi-api-key": user.apiKey })
  await started(ws)
  // Paced by events, not by a clock: one second of audio, a commit, and its committed_transcript
  // before the next second, so the backlog never nears its 10 s bound.
  let refusal: Record<string, any> | undefined
  for (let i = 0; i < 20 && refusal === undefined; i++) {
    ws.send(chunk(PCM.subarray((i % 7) * 32000, (i % 7 + 1) * 32000), { commit: true }))
    for (;;) {
      const m = await ws.nextJson()
      if (m.message_type === "quota_exceeded") refusal = m
      if (m.message_type === "committed_transcript" || refusal !== undefined || "close" in m) break
    }
  }
  const after = refusal !== undefined ? [refusal, ...(await rest(ws))] : await rest(ws)
  const types = after.map((m) => m.message_type ?? `close ${m.close}`).filter((x) => x !== "partial_transcript")
  t.same(types.slice(0, 2), ["quota_exceeded", "close 1008"], "quota_exceeded, then the close")
  await settled(user.userId)
  t.equal(await balance(user.userId), 0, "the 5 credits are spent")
  t.equal(await ledgerSum(user.userId), (await balance(user.userId)) + (await reserved(user.userId)), "ledger sum = balance + reserved")
})

t.test("a single-use token and no key, through the SDK", async (t) => {
  const user = await service.newUser(1000)
  const minter = new ElevenLabsClient({ apiKey: user.apiKey, baseUrl: `${service.siteUrl}/api`, maxRetries: 0 })
  const { token } = await minter.tokens.singleUse.create("realtime_scribe")
  const anonymous = new ElevenLabsClient({ apiKey: "", baseUrl: `${service.siteUrl}/api`, maxRetries: 0 })
  const connection = await anonymous.speechToText.realtime.connect({ modelId: "m", audioFormat: AudioFormat.PCM_16000, sampleRate: 16000, token })
  const committed = new Promise<string>((resolve) => connection.on(RealtimeEvents.COMMITTED_TRANSCRIPT, (m: any) => resolve(m.text)))
  await new Promise<void>((resolve) => connection.on(RealtimeEvents.SESSION_STARTED, () => resolve()))
  connection.send({ audioBase64: PCM.toString("base64").slice(0, 4 * 40000) })
  connection.commit()
  t.ok((await committed).length > 0, "transcribed with the token's user")
  connection.close()
  await settled(user.userId)
  t.ok((await balance(user.userId)) < 1000, "the token's user paid")
  // Used once: the same token again is an auth_error.
  const again = await open(`model_id=m&token=${token}`, {})
  await refusedWith(t, again, "auth_error", 1008)
})

t.test("a deleted key closes its session", async (t) => {
  const user = await service.newUser(1000)
  const ws = await open("model_id=m", { "xi-api-key": user.apiKey })
  await started(ws)
  await Effect.runPromise(service.keys.deleteKey(user.keyId))
  await refusedWith(t, ws, "auth_error", 1008)
})

t.test("property: random frame sequences never crash the service nor debit without audio", async (t) => {
  const user = await service.newUser(1_000_000)
  const frame = fc.oneof(
    fc.record({ kind: fc.constant("audio" as const), ms: fc.integer({ min: 0, max: 600 }), commit: fc.boolean() }),
    fc.record({ kind: fc.constant("text" as const), text: fc.string({ maxLength: 40 }) }),
    fc.record({ kind: fc.constant("base64" as const), b64: fc.string({ maxLength: 12 }) })
  )
  let audioMs = 0
  await fc.assert(fc.asyncProperty(fc.array(frame, { maxLength: 8 }), async (frames) => {
    const ws = await open("model_id=m", { "xi-api-key": user.apiKey })
    await started(ws)
    for (const f of frames) {
      if (f.kind === "audio") {
        ws.send(chunk(PCM.subarray(0, f.ms * 32), { commit: f.commit }))
        audioMs += f.ms
      } else if (f.kind === "text") ws.send(f.text)
      else ws.send({ message_type: "input_audio_chunk", audio_base_64: f.b64, commit: false, sample_rate: 16000 })
    }
    ws.close()
    const last = (await rest(ws)).at(-1)
    return last !== undefined && "close" in last
  }), { numRuns: 25 })
  await settled(user.userId)
  const spent = 1_000_000 - (await balance(user.userId))
  t.ok(spent <= Math.ceil(audioMs / 1000) + 25, `charged ${spent} credits for at most ${audioMs} ms of audio sent`)
  t.equal(await ledgerSum(user.userId), (await balance(user.userId)) + (await reserved(user.userId)), "ledger sum = balance + reserved")
  const debits = (await Effect.runPromise(service.credits.ledger(user.userId, { limit: 500 }))).filter((e) => e.kind === "debit")
  t.ok(debits.every((e) => e.purpose === "stt_realtime" && e.amount < 0), "only stt_realtime debits")
})

t.test("1,000 sessions opened and dropped: none left open, nothing reserved, the next one works", async (t) => {
  const user = await service.newUser(1000)
  // 20 at a time, each dropped without a close frame (half right after the upgrade, half after a chunk).
  for (let batch = 0; batch < 50; batch++) {
    await Promise.all(Array.from({ length: 20 }, async (_, i) => {
      const ws = await open("model_id=m", { "xi-api-key": user.apiKey })
      if (i % 2 === 1) ws.send(chunk(PCM.subarray(0, 3200)))
      ws.destroy()
    }))
  }
  const active = async () => Number(/^stt_realtime_sessions_active (\d+)/m.exec(await (await fetch(`${service.siteUrl}/metrics`)).text())?.[1])
  for (let i = 0; i < 200 && (await active()) > 0; i++) await new Promise((r) => setTimeout(r, 50))
  t.equal(await active(), 0, "every dropped session is gone")
  await settled(user.userId)
  t.equal(await reserved(user.userId), 0, "no reservation left")
  t.equal(await ledgerSum(user.userId), (await balance(user.userId)) + (await reserved(user.userId)), "ledger sum = balance + reserved")
  const ws = await open("model_id=m", { "xi-api-key": user.apiKey })
  await started(ws)
  t.pass("a new session starts")
  ws.close()
})
