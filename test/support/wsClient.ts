/**
 * A minimal RFC 6455 client for tests, over `node:http` upgrade: text frames, close, ping/pong.
 * Written here rather than taken from the `ws` package (only a transitive dependency) and
 * because tests need the raw socket: `pause()` stops reading so the server sees a client that
 * does not read, and a refused upgrade resolves with its HTTP status and body.
 *
 * Events are queued in arrival order; `next()` takes them one at a time with a generous safety
 * timeout, so tests assert on message sequences.
 */
import { randomBytes } from "node:crypto"
import * as http from "node:http"
import type { Socket } from "node:net"

export type WsEvent =
  | { readonly type: "message"; readonly data: string }
  | { readonly type: "close"; readonly code: number; readonly reason: string }

export interface Refused {
  readonly status: number
  readonly headers: http.IncomingHttpHeaders
  readonly body: string
}

export class WsClient {
  private readonly events: Array<WsEvent> = []
  private readonly waiters: Array<(e: WsEvent) => void> = []
  private pending: Buffer = Buffer.alloc(0)
  private fragments: Array<Buffer> = []
  closed = false

  constructor(readonly socket: Socket, head: Buffer) {
    socket.on("data", (chunk: Buffer) => this.onData(chunk))
    socket.on("close", () => this.push({ type: "close", code: 1006, reason: "connection lost" }))
    socket.on("error", () => {})
    if (head.length > 0) this.onData(head)
  }

  send(frame: unknown): void {
    this.write(0x1, Buffer.from(typeof frame === "string" ? frame : JSON.stringify(frame), "utf8"))
  }

  /** A text frame of arbitrary bytes (e.g. invalid UTF-8), which no conforming client sends. */
  sendRawText(bytes: Uint8Array): void {
    this.write(0x1, Buffer.from(bytes))
  }

  sendBinary(bytes: Uint8Array): void {
    this.write(0x2, Buffer.from(bytes))
  }

  /** Next event; rejects after `timeoutMs` (a safety net, not a timing assertion). */
  next(timeoutMs = 30_000): Promise<WsEvent> {
    const e = this.events.shift()
    if (e !== undefined) return Promise.resolve(e)
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no WebSocket event within ${timeoutMs} ms`)), timeoutMs)
      this.waiters.push((ev) => {
        clearTimeout(timer)
        resolve(ev)
      })
    })
  }

  /** Next event parsed as a JSON frame; a close event is returned as `{ close: code }`. */
  async nextJson(timeoutMs?: number): Promise<Record<string, any>> {
    const e = await this.next(timeoutMs)
    return e.type === "message" ? JSON.parse(e.data) : { close: e.code, reason: e.reason }
  }

  /** Events queued and not yet taken. */
  get queued(): number {
    return this.events.length
  }

  pause(): void {
    this.socket.pause()
  }

  resume(): void {
    this.socket.resume()
  }

  close(code = 1000): void {
    const payload = Buffer.alloc(2)
    payload.writeUInt16BE(code)
    this.write(0x8, payload)
  }

  destroy(): void {
    this.socket.destroy()
  }

  private push(e: WsEvent): void {
    if (this.closed) return
    if (e.type === "close") this.closed = true
    const w = this.waiters.shift()
    if (w !== undefined) w(e)
    else this.events.push(e)
  }

  /** Client frames are masked (RFC 6455 5.3). */
  private write(opcode: number, payload: Buffer): void {
    if (this.socket.destroyed) return
    const mask = randomBytes(4)
    const n = payload.length
    const header = n < 126 ? Buffer.alloc(2) : n < 65536 ? Buffer.alloc(4) : Buffer.alloc(10)
    header[0] = 0x80 | opcode
    if (n < 126) header[1] = 0x80 | n
    else if (n < 65536) {
      header[1] = 0x80 | 126
      header.writeUInt16BE(n, 2)
    } else {
      header[1] = 0x80 | 127
      header.writeBigUInt64BE(BigInt(n), 2)
    }
    const masked = Buffer.alloc(n)
    for (let i = 0; i < n; i++) masked[i] = payload[i]! ^ mask[i & 3]!
    this.socket.write(Buffer.concat([header, mask, masked]))
  }

  private onData(chunk: Buffer): void {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk])
    for (;;) {
      const b = this.pending
      if (b.length < 2) return
      const fin = (b[0]! & 0x80) !== 0
      const opcode = b[0]! & 0x0f
      let len = b[1]! & 0x7f
      let at = 2
      if (len === 126) {
        if (b.length < 4) return
        len = b.readUInt16BE(2)
        at = 4
      } else if (len === 127) {
        if (b.length < 10) return
        len = Number(b.readBigUInt64BE(2))
        at = 10
      }
      if (b.length < at + len) return // server frames are never masked
      const payload = b.subarray(at, at + len)
      this.pending = b.subarray(at + len)
      this.onFrame(fin, opcode, Buffer.from(payload))
    }
  }

  private onFrame(fin: boolean, opcode: number, payload: Buffer): void {
    if (opcode === 0x8) {
      const code = payload.length >= 2 ? payload.readUInt16BE(0) : 1005
      this.push({ type: "close", code, reason: payload.subarray(2).toString("utf8") })
      this.socket.end()
      return
    }
    if (opcode === 0x9) return this.write(0xa, payload)
    if (opcode === 0xa) return
    this.fragments.push(payload)
    if (!fin) return
    const data = Buffer.concat(this.fragments).toString("utf8")
    this.fragments = []
    this.push({ type: "message", data })
  }
}

/**
 * Opens a WebSocket to `url` (http:// form). Resolves with the client on 101, or with the HTTP
 * refusal (status, headers, body) otherwise.
 */
export const connectWs = (url: string, headers: Record<string, string> = {}): Promise<WsClient | Refused> =>
  new Promise((resolve, reject) => {
    const req = http.request(url, {
      headers: {
        Connection: "Upgrade",
        Upgrade: "websocket",
        "Sec-WebSocket-Key": randomBytes(16).toString("base64"),
        "Sec-WebSocket-Version": "13",
        ...headers
      }
    })
    req.on("upgrade", (_res, socket, head) => resolve(new WsClient(socket, head)))
    req.on("response", (res) => {
      let body = ""
      res.setEncoding("utf8")
      res.on("data", (c: string) => (body += c))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }))
    })
    req.on("error", reject)
    req.end()
  })

export const isRefused = (r: WsClient | Refused): r is Refused => !(r instanceof WsClient)

/** A JSON frame as the tests read it (`close` is set on the pseudo-frame for a close). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Frame = Record<string, any>

/** Frames up to and including the first one `stop` accepts, or the close. */
export const until = async (ws: WsClient, stop: (f: Frame) => boolean): Promise<Array<Frame>> => {
  const frames: Array<Frame> = []
  for (;;) {
    const f = await ws.nextJson()
    frames.push(f)
    if (stop(f) || f.close !== undefined) return frames
  }
}

/** Opens `url` expecting a refusal before the upgrade; fails the test if it was accepted. */
export const refused = async (url: string, headers: Record<string, string> = {}): Promise<Refused> => {
  const r = await connectWs(url, headers)
  if (!isRefused(r)) {
    r.destroy()
    throw new Error("upgrade was accepted")
  }
  return r
}

export const isAudio = (f: Frame) => typeof f.audio === "string"
/**
 * The last frame of a chunk: audio is streamed in blocks as the engine makes them, and only the
 * chunk's last frame carries its alignment (earlier blocks carry an empty one).
 */
export const isChunkEnd = (f: Frame) => isAudio(f) && f.alignment.chars.length > 0
/** Characters the alignments of the audio frames spell, in order. */
export const spoken = (frames: ReadonlyArray<Frame>) => frames.filter(isAudio).map((f) => f.alignment.chars.join("")).join("")

/** Audio frames grouped by chunk: each chunk's bytes and its alignment (times from the chunk's start). */
export const audioChunks = (frames: ReadonlyArray<Frame>) => {
  const chunks: Array<{ readonly bytes: Buffer; readonly frames: number; readonly alignment: Frame }> = []
  let pending: Array<Buffer> = []
  for (const f of frames.filter(isAudio)) {
    pending.push(Buffer.from(f.audio, "base64"))
    if (isChunkEnd(f)) {
      chunks.push({ bytes: Buffer.concat(pending), frames: pending.length, alignment: f.alignment })
      pending = []
    }
  }
  return chunks
}
