/**
 * A realtime speech-to-text client that sends its audio, the last chunk with `commit: true`, and
 * closes at once (the SDK's `url` option with manual commit does this). The close handshake
 * ends the socket, so the committed transcript cannot reach it (README "Realtime
 * speech-to-text", Ends); what must hold is the bill: the audio the service RECEIVED is charged
 * (one credit per started second), including the chunks still waiting in the session's inbox
 * when the close arrived, and nothing stays reserved.
 */
import { Effect } from "effect"
import t from "tap"
import { CreditPurpose } from "../../actors/CreditPolicy.ts"
import { LIBRIVOX_WAV, pcmOf } from "../support/librivoxSpeech.ts"
import { startTestService } from "../support/service.ts"
import { connectWs, isRefused } from "../support/wsClient.ts"

const service = await startTestService(t, { WORKERS: "1" })
const PCM = pcmOf(LIBRIVOX_WAV)
/** 250 ms of 16 kHz s16le. */
const CHUNK_BYTES = 8000

const sessionDebits = async (userId: string, sessionId: string) =>
  (await Effect.runPromise(service.credits.ledger(userId, { limit: 100 }))).filter((e) => e.kind === "debit" && e.purpose === CreditPurpose.sttRealtime && e.reference === sessionId)

t.test("the last chunk with commit: true, then the close at once: every received second is charged, nothing left reserved", async (t) => {
  const user = await service.newUser(100)
  const ws = await connectWs(`${service.base}/speech-to-text/realtime?model_id=m&audio_format=pcm_16000`, { "xi-api-key": user.apiKey })
  if (isRefused(ws)) throw new Error(`refused: ${ws.status}`)
  const started = await ws.nextJson()
  t.equal(started.message_type, "session_started")
  // 5.25 s of speech in 21 chunks, the last one committing: 6 started seconds.
  const chunks = 21
  for (let i = 0; i < chunks; i++) {
    ws.send({ message_type: "input_audio_chunk", audio_base_64: PCM.subarray(i * CHUNK_BYTES, (i + 1) * CHUNK_BYTES).toString("base64"), commit: i === chunks - 1, sample_rate: 16000 })
  }
  ws.close()
  // The session's finalizer settles once the close was handled: wait for its debit (safety net only).
  let debits = await sessionDebits(user.userId, started.session_id)
  for (let i = 0; i < 600 && debits.length === 0; i++) {
    await new Promise((r) => setTimeout(r, 100))
    debits = await sessionDebits(user.userId, started.session_id)
  }
  const expected = Math.ceil((chunks * CHUNK_BYTES) / 32000)
  t.same(debits.map((d) => d.amount), [-expected], `one debit of the ${expected} started seconds received`)
  t.equal(await Effect.runPromise(service.credits.reserved(user.userId)), 0, "nothing stays reserved")
  const balance = await Effect.runPromise(service.users.balance(user.userId))
  t.equal(balance, 100 - expected)
  const sum = (await Effect.runPromise(service.credits.ledger(user.userId, { limit: 100 }))).reduce((s, e) => s + e.amount, 0)
  t.equal(sum, balance, "ledger sum = balance + reserved")
})
