/**
 * HTTP/1.1 at the byte level for framing tests: send exact bytes on one connection, then split
 * what came back into responses, knowing which requests were HEAD (their answers have no body
 * whatever their Content-Length says).
 */
import * as net from "node:net"

export interface RawResponse {
  readonly status: number
  readonly headers: Record<string, string>
  readonly body: string
}

export interface Conversation {
  /** Every byte received, latin1. */
  readonly text: string
  /** True when the server ended the connection (FIN or reset) before the wait was over. */
  readonly closed: boolean
  readonly reset: boolean
}

/**
 * Writes `pieces` in order (a pause of `gapMs` between them; with `ready`, piece i > 0 waits
 * until `ready(i, text)` holds for what has arrived), then waits until the server closes or
 * until `done(text)` holds, at most `waitMs`.
 */
export const converse = (
  port: number,
  pieces: ReadonlyArray<string | Buffer>,
  options: {
    readonly gapMs?: number
    readonly waitMs?: number
    readonly done?: (text: string) => boolean
    readonly ready?: (piece: number, text: string) => boolean
  } = {}
): Promise<Conversation> =>
  new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1")
    let text = ""
    let closed = false
    let reset = false
    let settled = false
    let wake: (() => void) | undefined
    const finish = () => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      wake?.()
      socket.destroy()
      resolve({ text, closed, reset })
    }
    const timer = setTimeout(finish, options.waitMs ?? 5000)
    socket.on("data", (d) => {
      text += d.toString("latin1")
      if (options.done?.(text)) finish()
      wake?.()
    })
    socket.on("error", (e: NodeJS.ErrnoException) => {
      if (e.code === "ECONNRESET") reset = true
    })
    socket.on("close", () => {
      closed = true
      finish()
    })
    socket.on("connect", async () => {
      for (let i = 0; i < pieces.length; i++) {
        if (i > 0 && (options.gapMs ?? 0) > 0) await new Promise((r) => setTimeout(r, options.gapMs))
        const ready = options.ready
        if (i > 0 && ready !== undefined) {
          while (!ready(i, text) && !settled) await new Promise<void>((r) => (wake = r))
        }
        if (socket.destroyed) return
        socket.write(pieces[i]!)
      }
    })
  })

/**
 * Splits a byte stream into responses. `isHead(i)` says whether the i-th request was HEAD. A
 * response without Content-Length or chunked framing that says Connection: close runs to the
 * end (uWS's own error pages).
 * Returns what parsed and the bytes left over (a partial or malformed response).
 */
export const parseResponses = (text: string, isHead: (i: number) => boolean): { responses: Array<RawResponse>; rest: string } => {
  const responses: Array<RawResponse> = []
  let at = 0
  while (at < text.length) {
    const headEnd = text.indexOf("\r\n\r\n", at)
    if (headEnd < 0) break
    const lines = text.slice(at, headEnd).split("\r\n")
    const m = /^HTTP\/1\.1 (\d{3})/.exec(lines[0]!)
    if (!m) break
    const headers: Record<string, string> = {}
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(":")
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
    }
    let bodyStart = headEnd + 4
    let body = ""
    const framed = headers["content-length"] !== undefined || headers["transfer-encoding"] !== undefined
    if (!framed && /close/i.test(headers["connection"] ?? "")) {
      // uWS's own error pages: no length, the body runs to the close (whatever the method).
      body = text.slice(bodyStart)
      bodyStart = text.length
    } else if (isHead(responses.length)) {
      // no body
    } else if (headers["content-length"] !== undefined) {
      const n = Number(headers["content-length"])
      if (text.length < bodyStart + n) break
      body = text.slice(bodyStart, bodyStart + n)
      bodyStart += n
    } else if (/chunked/i.test(headers["transfer-encoding"] ?? "")) {
      let p = bodyStart
      let complete = false
      while (true) {
        const lineEnd = text.indexOf("\r\n", p)
        if (lineEnd < 0) break
        const size = parseInt(text.slice(p, lineEnd), 16)
        if (Number.isNaN(size)) break
        if (size === 0) {
          if (text.slice(lineEnd, lineEnd + 4) === "\r\n\r\n") {
            p = lineEnd + 4
            complete = true
          }
          break
        }
        if (text.length < lineEnd + 2 + size + 2) break
        body += text.slice(lineEnd + 2, lineEnd + 2 + size)
        p = lineEnd + 2 + size + 2
      }
      if (!complete) break
      bodyStart = p
    } else {
      body = text.slice(bodyStart)
      bodyStart = text.length
    }
    responses.push({ status: Number(m[1]), headers, body })
    at = bodyStart
  }
  return { responses, rest: text.slice(at) }
}
