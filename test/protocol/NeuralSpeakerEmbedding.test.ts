/**
 * A neural speaker embedding from SPEAKER_EMBEDDING_DIR, end to end in a service process: the
 * workers load the model from the directory and diarize with it; a model that cannot be loaded
 * answers the request with a 502 that names it instead of falling back unseen; a directory
 * without a manifest stops the service at start with a message naming the setting.
 * The model is the tiny ONNX graph of test/engines/speaker/tinySpeakerModel.ts.
 */
import { spawn } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import t from "tap"
import { writeTinySpeakerModel } from "../engines/speaker/tinySpeakerModel.ts"
import { conversationWav, LIBRIVOX_WAV, pcmOf } from "../support/librivoxSpeech.ts"
import { startServiceProcess } from "../support/serviceProcess.ts"

const scratch = mkdtempSync(path.join(tmpdir(), "neural-speaker-"))
t.teardown(() => rmSync(scratch, { recursive: true, force: true }))
const conversation = conversationWav([pcmOf(LIBRIVOX_WAV), pcmOf("/usr/share/pocketsphinx/test/data/cards/005.wav")], 500)

const transcribe = async (siteUrl: string, apiKey: string) => {
  const form = new FormData()
  form.append("model_id", "scribe_v1")
  form.append("diarize", "true")
  form.append("file", new Blob([conversation], { type: "audio/wav" }), "conversation.wav")
  const res = await fetch(`${siteUrl}/api/v1/speech-to-text`, { method: "POST", headers: { "xi-api-key": apiKey }, body: form })
  return { status: res.status, body: await res.json() as { words?: Array<{ type: string; speaker_id?: string }>; detail?: { code?: string; message?: string } } }
}

t.test("diarization runs on the model from the directory", async (t) => {
  const dir = writeTinySpeakerModel(path.join(scratch, "good"))
  const service = await startServiceProcess(t, { env: { SPEAKER_EMBEDDING_DIR: dir, WORKERS: "1" } })
  const key = await service.newKey(100_000)
  const { status, body } = await transcribe(service.siteUrl, key)
  t.equal(status, 200, JSON.stringify(body).slice(0, 300))
  const words = (body.words ?? []).filter((w) => w.type === "word")
  t.ok(words.length >= 15, `${words.length} words`)
  t.ok(words.every((w) => /^speaker_\d+$/.test(w.speaker_id ?? "")), "every word has a speaker")
})

t.test("a model that no longer loads is a 502 naming it, not a silent fallback", async (t) => {
  const dir = writeTinySpeakerModel(path.join(scratch, "broken"))
  const service = await startServiceProcess(t, { env: { SPEAKER_EMBEDDING_DIR: dir, WORKERS: "1" } })
  // Valid at start (the manifest and file are checked), broken before the workers load it.
  writeFileSync(path.join(dir, "tiny.onnx"), "not an onnx model")
  const key = await service.newKey(100_000)
  const { status, body } = await transcribe(service.siteUrl, key)
  t.equal(status, 502, JSON.stringify(body).slice(0, 300))
  t.match(JSON.stringify(body), /tiny\.onnx could not be loaded/)
  // The service is still up for requests that need no speakers.
  const health = await fetch(`${service.siteUrl}/healthz`)
  t.equal(health.status, 200, "still healthy")
})

t.test("a directory without a manifest stops the service at start, naming the setting", async (t) => {
  const empty = mkdtempSync(path.join(scratch, "empty-"))
  const child = spawn(process.execPath, ["--import", "tsx", "runtime/main.ts"], {
    cwd: path.resolve(import.meta.dirname, "../.."),
    env: { ...process.env, PORT: "0", DATA_DIR: path.join(scratch, "data"), SPEAKER_EMBEDDING_DIR: empty, DATABASE_URL: "" },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let output = ""
  child.stdout.on("data", (d: Buffer) => (output += d.toString()))
  child.stderr.on("data", (d: Buffer) => (output += d.toString()))
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve))
  t.not(code, 0, "exits with an error")
  t.match(output, /SPEAKER_EMBEDDING_DIR: .*has no speaker-embedding\.json/)
})
