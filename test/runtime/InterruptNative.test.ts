/**
 * A client that gives up while its request's task runs native inference (onnxruntime in the
 * Silero VAD pass) must not end the process (issue 9 item 1). Terminating a worker thread inside
 * `InferenceSession.run` aborted the whole process (`terminate called after throwing an instance
 * of 'Napi::Error'`), which no JavaScript handler can catch: found by an outside attack.
 *
 * The real process entry runs as a child; requests are cut at many points of the pipeline.
 */
import * as net from "node:net"
import t from "tap"
import { encodeWav } from "../../engines/audio/Wav.ts"
import { startServiceProcess } from "../support/serviceProcess.ts"

const service = await startServiceProcess(t)
const { child, siteUrl } = service
const apiKey = await service.newKey(1_000_000)

// 60 s of noise: the VAD pass over it takes long enough to be cut in the middle.
let seed = 7
const noise = Int16Array.from({ length: 16000 * 60 }, () => ((seed = (seed * 1103515245 + 12345) >>> 0) % 20000) - 10000)
const wav = encodeWav(noise, 16000)

/** Sends the whole upload on a raw socket, then drops the connection after `cutMs`. */
const cutRequest = (cutMs: number) =>
  new Promise<void>((resolve) => {
    const boundary = "cutboundary42"
    const body = Buffer.concat([
      Buffer.from(`--${boundary}\r\ncontent-disposition: form-data; name="model_id"\r\n\r\nscribe_v1\r\n` +
        `--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="noise.wav"\r\ncontent-type: application/octet-stream\r\n\r\n`),
      Buffer.from(wav),
      Buffer.from(`\r\n--${boundary}--\r\n`)
    ])
    const url = new URL(siteUrl)
    const socket = net.connect(Number(url.port), "127.0.0.1", () => {
      socket.write(`POST /api/v1/speech-to-text HTTP/1.1\r\nhost: x\r\nxi-api-key: ${apiKey}\r\n` +
        `content-type: multipart/form-data; boundary=${boundary}\r\ncontent-length: ${body.length}\r\n\r\n`)
      socket.write(body)
      setTimeout(() => {
        socket.destroy()
        resolve()
      }, cutMs)
    })
    socket.on("error", () => resolve())
  })

t.test("clients that give up mid-recognition never end the process", async (t) => {
  // The first request loads the models; the cuts after it land in decoding, VAD and the rest.
  for (const cutMs of [2000, 150, 200, 250, 300, 350, 400, 450, 500, 600, 700, 900]) {
    await cutRequest(cutMs)
    await new Promise((r) => setTimeout(r, 1_000))
    if (child.exitCode !== null || child.signalCode !== null) {
      t.fail(`the process ended after a client gave up at ${cutMs} ms: ${service.output().slice(-600)}`)
      return
    }
  }
  t.equal((await fetch(`${siteUrl}/healthz`)).status, 200, "still serving after twelve cut requests")
  const form = new FormData()
  form.append("model_id", "scribe_v1")
  form.append("file", new Blob([wav as Uint8Array<ArrayBuffer>], { type: "application/octet-stream" }), "noise.wav")
  t.equal((await fetch(`${siteUrl}/api/v1/speech-to-text`, { method: "POST", headers: { "xi-api-key": apiKey }, body: form })).status, 200, "and still recognising")
})
