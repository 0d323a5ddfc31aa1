/**
 * A session that never commits is committed by the service once its utterance reaches
 * STT_REALTIME_MAX_UTTERANCE_S (outside attack: 238 s streamed without a commit, whose commit
 * then re-decoded it all and held a worker thread for 57 s while a TTS request on it timed out).
 * Manual commit strategy, 4 s of real speech in 100 ms chunks with `commit: false`, a 2 s cap:
 * a committed transcript arrives before the client commits, and the client's own commit still
 * answers the rest. Waits for the messages, never for a clock.
 */
import t from "tap"
import { LIBRIVOX_WAV, pcmOf } from "../support/librivoxSpeech.ts"
import { startTestService } from "../support/service.ts"
import { connectWs, isRefused } from "../support/wsClient.ts"

const service = await startTestService(t, { STT_REALTIME_MAX_UTTERANCE_S: "2" })
const PCM = pcmOf(LIBRIVOX_WAV)

t.test("an utterance reaching the cap is committed by the service", async (t) => {
  const user = await service.newUser(1000)
  const ws = await connectWs(`${service.base}/speech-to-text/realtime?model_id=m&commit_strategy=manual`, { "xi-api-key": user.apiKey })
  if (isRefused(ws)) return t.fail(`refused: ${ws.status}`)
  t.teardown(() => ws.close())
  t.match(await ws.nextJson(), { message_type: "session_started" })
  for (let at = 0; at + 3200 <= 4 * 32000; at += 3200) {
    ws.send({ message_type: "input_audio_chunk", audio_base_64: PCM.subarray(at, at + 3200).toString("base64"), commit: false, sample_rate: 16000 })
  }
  const seen: Array<string> = []
  for (;;) {
    const m = await ws.nextJson()
    if (m.message_type === "committed_transcript") break
    if ("close" in m || m.message_type !== "partial_transcript") return t.fail(`before any commit: ${JSON.stringify(m)}`)
    seen.push(m.message_type)
  }
  t.pass("committed without the client's commit")
  ws.send({ message_type: "input_audio_chunk", audio_base_64: "", commit: true, sample_rate: 16000 })
  for (;;) {
    const m = await ws.nextJson()
    if (m.message_type === "committed_transcript") break
    if ("close" in m) return t.fail("closed before the client's commit was answered")
  }
  t.pass("the client's own commit answers the rest")
})
