/**
 * `commit_strategy=vad` with a pause shorter than the silence threshold: the pause starts the
 * commit's prepared final pass (actors/RealtimeTranscription.ts), the speech that resumes must
 * still be in the one committed transcript (the prepared words, which end at the pause, must not
 * be answered). LibriVox 0880 ("he was not an ill disposed young man"), 0.7 s of silence, 0930
 * ("he might even have been made amiable himself"), then 1.6 s of silence: one commit, both parts.
 * The second part and its silence come as ONE chunk (4.9 s), so the VAD sees the speech resume
 * and the threshold pass within one push, with no new pause between: only the loud frames since
 * the prepare can tell that its words are stale.
 */
import t from "tap"
import { pcmOf } from "../support/librivoxSpeech.ts"
import { startTestService } from "../support/service.ts"
import { connectWs, isRefused } from "../support/wsClient.ts"

const service = await startTestService(t, { WORKERS: "1" })
const { apiKey } = await service.newUser(1000)
const DIR = "/usr/share/pocketsphinx/test/data/librivox"
const silence = (ms: number) => Buffer.alloc(ms * 32)

t.test("a pause under the threshold, then more speech: one commit holding both parts", async (t) => {
  const first = Buffer.concat([pcmOf(`${DIR}/sense_and_sensibility_01_austen_64kb-0880.wav`), silence(700)])
  const second = Buffer.concat([pcmOf(`${DIR}/sense_and_sensibility_01_austen_64kb-0930.wav`), silence(1600)])
  const ws = await connectWs(`${service.base}/speech-to-text/realtime?model_id=m&audio_format=pcm_16000&commit_strategy=vad&vad_silence_threshold_secs=1.5`, { "xi-api-key": apiKey })
  if (isRefused(ws)) throw new Error(`refused: ${ws.status}`)
  t.equal((await ws.nextJson()).message_type, "session_started")
  // 8.6 s at once (under the 10 s backlog bound): the first part in 250 ms chunks, the second whole.
  const send = (audio: Buffer) => ws.send({ message_type: "input_audio_chunk", audio_base_64: audio.toString("base64"), commit: false, sample_rate: 16000 })
  for (let at = 0; at < first.length; at += 8000) send(first.subarray(at, at + 8000))
  send(second)
  let committed: Record<string, any> | undefined
  while (committed === undefined) {
    const m = await ws.nextJson(180_000)
    if ("close" in m || m.error !== undefined) throw new Error(`ended: ${JSON.stringify(m)}`)
    if (m.message_type === "committed_transcript") committed = m
  }
  t.comment(`committed: "${committed.text}"`)
  t.match(committed.text, /young man/, "the words before the pause")
  t.match(committed.text, /might even have been/, "and the speech that resumed after it")
  ws.close()
})
