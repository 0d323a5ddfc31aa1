/**
 * A webhook receiver for tests: an https server on loopback with a throwaway certificate (the
 * service trusts it through URL_FETCH_CA_FILE) that records every delivery with its raw body
 * and answers with scripted statuses (then 200). `stop` / `start` take it down and bring it
 * back on the same port, for "the receiver was down" cases.
 */
import * as fs from "node:fs"
import type { IncomingHttpHeaders } from "node:http"
import * as https from "node:https"
import type { AddressInfo } from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { selfSignedCert } from "./selfSignedCert.ts"

export interface Received {
  readonly headers: IncomingHttpHeaders
  readonly rawBody: string
  readonly status: number
}

export interface WebhookReceiver {
  readonly url: string
  readonly certFile: string
  readonly received: Array<Received>
  /** Statuses for the next deliveries, in order; 200 after they run out. */
  readonly answers: Array<number>
  readonly stop: () => Promise<void>
  readonly start: () => Promise<void>
  /** Polls until `n` deliveries arrived (60 s at most). */
  readonly waitFor: (n: number) => Promise<void>
}

export const startWebhookReceiver = async (t: { teardown: (fn: () => unknown) => void }): Promise<WebhookReceiver> => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "webhook-receiver-"))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const { certFile, keyFile } = selfSignedCert(dir, ["IP:127.0.0.1"])
  const received: Array<Received> = []
  const answers: Array<number> = []
  const server = https.createServer({ cert: fs.readFileSync(certFile), key: fs.readFileSync(keyFile) }, (req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      const status = answers.shift() ?? 200
      received.push({ headers: req.headers, rawBody: Buffer.concat(chunks).toString("utf8"), status })
      res.writeHead(status, { "content-type": "text/plain" }).end(status === 200 ? "ok" : "not now")
    })
  })
  let port = 0
  const start = () =>
    new Promise<void>((resolve, reject) => {
      server.once("error", reject)
      server.listen(port, "127.0.0.1", () => {
        port = (server.address() as AddressInfo).port
        resolve()
      })
    })
  const stop = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve())
      server.closeAllConnections()
    })
  await start()
  t.teardown(stop)
  const waitFor = async (n: number) => {
    for (let i = 0; i < 600 && received.length < n; i++) await new Promise((r) => setTimeout(r, 100))
    if (received.length < n) throw new Error(`the receiver got ${received.length} deliveries, not ${n}`)
  }
  return { url: `https://127.0.0.1:${port}/hooks/speech`, certFile, received, answers, stop, start, waitFor }
}
