/**
 * Uploads refused before their body is read, through the official ElevenLabs SDK and Node's
 * fetch against the whole service: a transcription with a wrong key (401, checked before the
 * body) and a voice clone whose file is over the 10 MB limit (413 from Content-Length). The
 * client must get the status and the error body, not `fetch failed` (write EPIPE): the server
 * reads and drops the rest of the body so a client still uploading is not reset first.
 *
 * The clients run in a child process: with client and server on one event loop the reset
 * never overtakes the answer, and the failure this guards against does not show.
 */
import { execFile } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import t from "tap"
import { startTestService } from "../support/service.ts"

const service = await startTestService(t)
const { apiKey } = await service.newUser(1_000_000)
const dir = mkdtempSync(path.join(tmpdir(), "speech-early-refusal-"))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))

const fileOf = (name: string, bytes: number) => {
  const file = path.join(dir, name)
  writeFileSync(file, Buffer.alloc(bytes, 1))
  return file
}
const bigWav = fileOf("big.wav", 3 * 1024 * 1024)
const hugeWav = fileOf("huge.wav", 11 * 1024 * 1024)

interface Outcome {
  readonly status?: number
  readonly body?: unknown
  readonly error?: string
}

/** Runs `calls` (an ES module body that sets `outcomes`) in a fresh node process. */
const inChild = (code: string): Promise<Array<Outcome>> =>
  new Promise((resolve, reject) => {
    const script = `
      import { ElevenLabsClient, ElevenLabsError } from "@elevenlabs/elevenlabs-js"
      import { createReadStream, readFileSync } from "node:fs"
      const site = ${JSON.stringify(service.siteUrl)}
      const outcomes = []
      const attempt = async (call) => {
        try {
          const r = await call()
          if (r instanceof Response) outcomes.push({ status: r.status, body: await r.json() })
          else outcomes.push({ status: 200 })
        } catch (e) {
          if (e instanceof ElevenLabsError && e.statusCode !== undefined) outcomes.push({ status: e.statusCode, body: e.body })
          else outcomes.push({ error: String(e?.cause?.code ?? e?.cause?.message ?? e?.message ?? e) })
        }
      }
      ${code}
      console.log(JSON.stringify(outcomes))
    `
    execFile(process.execPath, ["--input-type=module", "-e", script], { cwd: process.cwd(), timeout: 60_000 }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`${err.message}\n${stderr}`))
      resolve(JSON.parse(stdout.trim().split("\n").pop()!) as Array<Outcome>)
    })
  })

t.test("speechToText.convert of a 3 MB file with a wrong key: 401 with its body", async (t) => {
  const outcomes = await inChild(`
    const client = new ElevenLabsClient({ apiKey: "sk_wrong", baseUrl: site + "/api", maxRetries: 0 })
    for (let i = 0; i < 2; i++) {
      await attempt(() => client.speechToText.convert({ file: createReadStream(${JSON.stringify(bigWav)}), modelId: "scribe_v1" }))
      await attempt(() => client.speechToText.convert({ file: new Blob([readFileSync(${JSON.stringify(bigWav)})], { type: "audio/wav" }), modelId: "scribe_v1" }))
    }
  `)
  t.equal(outcomes.length, 4)
  for (const o of outcomes) {
    t.equal(o.status, 401, JSON.stringify(o))
    t.match(o.body, { detail: { status: "invalid_api_key" } })
  }
})

t.test("voices.ivc.create of an 11 MB file: 413 with its body", async (t) => {
  const outcomes = await inChild(`
    const client = new ElevenLabsClient({ apiKey: ${JSON.stringify(apiKey)}, baseUrl: site + "/api", maxRetries: 0 })
    for (let i = 0; i < 2; i++) {
      await attempt(() => client.voices.ivc.create({ name: "too big", files: [createReadStream(${JSON.stringify(hugeWav)})] }))
    }
  `)
  t.equal(outcomes.length, 2)
  for (const o of outcomes) {
    t.equal(o.status, 413, JSON.stringify(o))
    t.match(o.body, { detail: { status: "payload_too_large" } })
  }
})

t.test("the same refusal through Node's fetch with FormData", async (t) => {
  const outcomes = await inChild(`
    for (let i = 0; i < 5; i++) {
      const form = new FormData()
      form.append("model_id", "scribe_v1")
      form.append("file", new Blob([readFileSync(${JSON.stringify(bigWav)})], { type: "audio/wav" }), "a.wav")
      await attempt(() => fetch(site + "/api/v1/speech-to-text", { method: "POST", headers: { "xi-api-key": "sk_wrong" }, body: form }))
    }
  `)
  t.equal(outcomes.length, 5)
  for (const o of outcomes) {
    t.equal(o.status, 401, JSON.stringify(o))
    t.match(o.body, { detail: { status: "invalid_api_key" } })
  }
})
