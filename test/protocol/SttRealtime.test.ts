/**
 * `GET /v1/speech-to-text/realtime` through the official SDK's realtime client
 * (`speechToText.realtime.connect`, wrapper/realtime/ in @elevenlabs/elevenlabs-js) against a
 * running service, with the LibriVox reading of pocketsphinx-testdata: the message sequence,
 * manual and VAD commits, pcm_16000 and ulaw_8000, timestamps, and the committed words compared
 * with the synchronous endpoint's. Credits: a session pays for the audio it received.
 */
import { AudioFormat, CommitStrategy, ElevenLabsClient, RealtimeEvents } from "@elevenlabs/elevenlabs-js"
import { Effect } from "effect"
import t from "tap"
import { linearToMulaw } from "../../engines/audio/Mulaw.ts"
import { normalizeWords, tally, wer } from "../engines/asr/wer.ts"
import { LIBRIVOX_WAV, pcmOf, SPEECH } from "../support/librivoxSpeech.ts"
import { startTestService } from "../support/service.ts"

const service = await startTestService(t, { WORKERS: "2" })
const { apiKey } = await service.newUser(1_000_000)
const client = new ElevenLabsClient({ apiKey, baseUrl: `${service.siteUrl}/api`, maxRetries: 0 })

const PCM = pcmOf(LIBRIVOX_WAV)
const ULAW = (() => {
  // 16 kHz → 8 kHz by taking every other sample of a 2-tap average (enough for a test signal), then G.711.
  const out = Buffer.alloc(Math.floor(PCM.length / 4))
  for (let i = 0; i < out.length; i++) {
    const a = PCM.readInt16LE(i * 4)
    const b = PCM.readInt16LE(i * 4 + 2)
    out[i] = linearToMulaw((a + b) >> 1)
  }
  return out
})()

/** ULAW as a G.711 µ-law WAV (format 7, 8 kHz, 8 bits): the same bytes the realtime session gets, for the synchronous endpoint. */
const ULAW_WAV = (() => {
  const header = Buffer.alloc(44)
  header.write("RIFF", 0, "latin1")
  header.writeUInt32LE(36 + ULAW.length, 4)
  header.write("WAVEfmt ", 8, "latin1")
  header.writeUInt32LE(16, 16)
  header.writeUInt16LE(7, 20)
  header.writeUInt16LE(1, 22)
  header.writeUInt32LE(8000, 24)
  header.writeUInt32LE(8000, 28)
  header.writeUInt16LE(1, 32)
  header.writeUInt16LE(8, 34)
  header.write("data", 36, "latin1")
  header.writeUInt32LE(ULAW.length, 40)
  return Buffer.concat([header, ULAW])
})()

/** The synchronous endpoint's words of a recording: the reference the realtime words are held to. */
const syncText = async (wav: Buffer = SPEECH): Promise<string> => {
  const form = new FormData()
  form.append("model_id", "scribe_v1")
  form.append("file", new Blob([wav], { type: "audio/wav" }), "speech.wav")
  const res = await fetch(`${service.base}/speech-to-text`, { method: "POST", headers: { "xi-api-key": apiKey }, body: form })
  const body = await res.json() as { text: string }
  return body.text
}

type Message = { message_type: string } & Record<string, any>

/** Opens a session with the SDK and records every message until it closes. */
const session = async (options: Record<string, unknown>) => {
  const connection = await client.speechToText.realtime.connect({ modelId: "scribe_v2_realtime", ...options } as never)
  const messages: Array<Message> = []
  const waiters: Array<() => void> = []
  const record = (m: Message) => {
    messages.push(m)
    for (const w of waiters.splice(0)) w()
  }
  for (const type of ["session_started", "partial_transcript", "committed_transcript", "committed_transcript_with_timestamps"] as const) {
    connection.on(type as RealtimeEvents, (m: unknown) => record(m as Message))
  }
  let closed = false
  connection.on(RealtimeEvents.ERROR, (m: any) => record("message_type" in m ? m : { message_type: "socket_error", error: String(m) }))
  connection.on(RealtimeEvents.CLOSE, () => {
    closed = true
    record({ message_type: "closed" })
  })
  const until = async (stop: (m: Message) => boolean): Promise<Message> => {
    for (;;) {
      const found = messages.find(stop)
      if (found !== undefined) return found
      if (closed) throw new Error(`closed before the message: ${JSON.stringify(messages.map((m) => m.message_type))}`)
      await new Promise<void>((resolve) => waiters.push(resolve))
    }
  }
  return { connection, messages, until }
}

/** Chunks of `ms` of audio, base64, as a client streams them. */
const chunksOf = (audio: Buffer, bytesPerMs: number, ms = 250): Array<string> => {
  const size = Math.round(bytesPerMs * ms)
  const out: Array<string> = []
  for (let i = 0; i < audio.length; i += size) out.push(audio.subarray(i, i + size).toString("base64"))
  return out
}

const reference = await syncText()
// The µ-law session is held to the synchronous words of the same µ-law audio, not of the 16 kHz
// original: the difference then is the realtime path's, not the telephone band's.
const ulawReference = await syncText(ULAW_WAV)

t.test("manual commit, pcm_16000 with timestamps: session_started, partials, the committed words of the recording", async (t) => {
  const s = await session({ audioFormat: AudioFormat.PCM_16000, sampleRate: 16000, commitStrategy: CommitStrategy.MANUAL, includeTimestamps: true })
  const started = await s.until((m) => m.message_type === "session_started")
  t.match(started.config, { audio_format: "pcm_16000", sample_rate: 16000, commit_strategy: "manual", include_timestamps: true, model_id: "scribe_v2_realtime" }, "the configuration is echoed")
  t.type(started.session_id, "string")
  for (const chunk of chunksOf(PCM, 32)) s.connection.send({ audioBase64: chunk })
  s.connection.commit()
  const committed = await s.until((m) => m.message_type === "committed_transcript")
  const stamped = await s.until((m) => m.message_type === "committed_transcript_with_timestamps")
  const types = s.messages.map((m) => m.message_type)
  t.equal(types[0], "session_started", "session_started comes first")
  t.ok(types.includes("partial_transcript"), "partials while the audio arrives")
  t.ok(types.indexOf("partial_transcript") < types.indexOf("committed_transcript"), "partials before the commit")
  const w = wer([tally(reference, committed.text)])
  t.comment(`realtime vs synchronous WER (pcm_16000, manual): ${(w * 100).toFixed(1)} %: "${committed.text}" vs "${reference}"`)
  t.ok(w <= 0.1, "the committed words match the synchronous endpoint's closely")
  t.equal(stamped.text, committed.text)
  const words = stamped.words as Array<Record<string, any>>
  t.same(words.filter((x) => x.type === "word").map((x) => x.text), normalizeWords(committed.text).length > 0 ? committed.text.split(" ") : [], "words as committed")
  t.ok(words.every((x) => x.start <= x.end && x.end <= PCM.length / 32000 + 0.01 && (x.type === "word" || x.type === "spacing") && typeof x.logprob === "number"), "times in seconds on the session clock")
  s.connection.close()
})

t.test("vad commits, ulaw_8000: the caller's pause commits without a commit message", async (t) => {
  const s = await session({ audioFormat: AudioFormat.ULAW_8000, sampleRate: 8000, commitStrategy: CommitStrategy.VAD, vadSilenceThresholdSecs: 0.5 })
  await s.until((m) => m.message_type === "session_started")
  // The recording, then 1 s of silence (µ-law 0xff is zero).
  for (const chunk of chunksOf(Buffer.concat([ULAW, Buffer.alloc(8000, 0xff)]), 8)) s.connection.send({ audioBase64: chunk })
  const committed = await s.until((m) => m.message_type === "committed_transcript")
  const w = wer([tally(ulawReference, committed.text)])
  t.comment(`realtime vs synchronous WER on the same µ-law audio (ulaw_8000, vad): ${(w * 100).toFixed(1)} %: "${committed.text}" vs "${ulawReference}" (the 16 kHz original: ${(wer([tally(reference, committed.text)]) * 100).toFixed(1)} %)`)
  t.ok(w <= 0.35, "the µ-law words are close to the synchronous endpoint's")
  s.connection.close()
})

t.test("credits: the session is charged the started seconds of audio it received", async (t) => {
  const user = await service.newUser(100)
  const own = new ElevenLabsClient({ apiKey: user.apiKey, baseUrl: `${service.siteUrl}/api`, maxRetries: 0 })
  const connection = await own.speechToText.realtime.connect({ modelId: "m", audioFormat: AudioFormat.PCM_16000, sampleRate: 16000 })
  const done = new Promise<void>((resolve) => connection.on(RealtimeEvents.COMMITTED_TRANSCRIPT, () => resolve()))
  await new Promise<void>((resolve) => connection.on(RealtimeEvents.SESSION_STARTED, () => resolve()))
  for (const chunk of chunksOf(PCM, 32)) connection.send({ audioBase64: chunk })
  connection.commit()
  await done
  const closed = new Promise<void>((resolve) => connection.on(RealtimeEvents.CLOSE, () => resolve()))
  connection.close()
  await closed
  const expected = 100 - Math.ceil(PCM.length / 32000)
  await waitFor(async () => (await balance(user.userId)) === expected && (await reserved(user.userId)) === 0)
  t.equal(await balance(user.userId), expected, "charged the started seconds")
})

const balance = (userId: string) => Effect.runPromise(service.users.balance(userId))
const reserved = (userId: string) => Effect.runPromise(service.credits.reserved(userId))
/** Polls a condition the service reaches after the socket closed (its finalizer settles). */
const waitFor = async (ok: () => Promise<boolean>) => {
  for (let i = 0; i < 200 && !(await ok()); i++) await new Promise((r) => setTimeout(r, 50))
}
