/**
 * A deployment's Piper voices end to end: a Piper-contract ONNX model the test builds itself,
 * placed in PIPER_VOICES_DIR, is listed by GET /voices and speaks through the sync endpoint.
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import t from "tap"
import { parseWav } from "../../engines/audio/Wav.ts"
import { writeTinyVoice } from "../engines/tts/tinyPiperModel.ts"
import { startTestService } from "../support/service.ts"

const dir = mkdtempSync(path.join(tmpdir(), "piper-voices-"))
writeTinyVoice(dir, "en_US-tiny-low", { espeakVoice: "en-us", languageCode: "en_US" })
const service = await startTestService(t, { PIPER_VOICES_DIR: dir })
const { apiKey } = await service.newUser()

t.test("the Piper voice is listed as <name>-<language>", async (t) => {
  const res = await fetch(`${service.base}/voices`, { headers: { "xi-api-key": apiKey } })
  const { voices } = await res.json() as { voices: Array<{ voice_id: string; labels: Record<string, string> }> }
  const piper = voices.find((v) => v.voice_id === "tiny-en")
  t.ok(piper, "tiny-en listed")
  t.equal(piper?.labels.engine, "piper")
  t.equal(voices[0]?.voice_id, "mari", "catalogue presets stay first")
})

t.test("the Piper voice synthesizes through the server", async (t) => {
  const res = await fetch(`${service.base}/text-to-speech/tiny-en?output_format=wav_16000`, {
    method: "POST",
    headers: { "xi-api-key": apiKey, "content-type": "application/json" },
    body: JSON.stringify({ text: "Hello there, this is a test." })
  })
  t.equal(res.status, 200)
  const wav = parseWav(new Uint8Array(await res.arrayBuffer()))
  t.equal(wav.sampleRate, 16000)
  const samples = wav.channelData[0]!
  t.ok(samples.length > 1600, `${samples.length} samples`)
  t.ok(samples.some((x) => Math.abs(x) > 0.01), "not silent")
})
