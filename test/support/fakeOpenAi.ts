/**
 * A small OpenAI-compatible chat-completions server for tests of the LLM engines: it answers
 * `POST /v1/chat/completions` as scripted, streamed (SSE `data:` chunks and `[DONE]`) or as one
 * JSON body, and can fail the ways real servers fail: an HTTP status with Retry-After, a stream
 * cut off mid-answer, a stream that stalls. It records every request and counts requests whose
 * client went away before the answer was complete (to check that an interrupt aborts upstream).
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"

export interface FakeReply {
  /** Non-200 status answered with an OpenAI error body. */
  readonly status?: number
  readonly retryAfter?: string
  /** Content pieces sent as stream chunks (when the request asked for a stream). */
  readonly pieces?: ReadonlyArray<string>
  /** Answer as one JSON body even though a stream was asked. */
  readonly plainJson?: boolean
  /** After this many pieces the socket is destroyed: a broken stream. */
  readonly breakAfter?: number
  /** After this many pieces nothing more is sent (the socket stays open): a stalled stream. */
  readonly stallAfter?: number
  /** Milliseconds between pieces. */
  readonly delayMs?: number
}

export interface FakeRequest {
  readonly body: { model?: string; stream?: boolean; messages?: Array<{ role: string; content: string }> } & Record<string, unknown>
  readonly authorization: string | undefined
}

export interface FakeOpenAi {
  /** Base URL to configure (`http://127.0.0.1:<port>/v1`). */
  readonly url: string
  readonly requests: Array<FakeRequest>
  /** Replies used in order, one per request, before `respond` is asked. */
  readonly script: (...replies: ReadonlyArray<FakeReply>) => void
  /** The answer when the script is empty. */
  respond: (request: FakeRequest) => FakeReply
  /** Requests whose client closed the connection before the answer ended. */
  readonly abandoned: () => number
  readonly close: () => Promise<void>
}

const chunk = (content: string, finish: string | null) =>
  `data: ${JSON.stringify({ id: "chatcmpl-fake", object: "chat.completion.chunk", model: "fake", choices: [{ index: 0, delta: finish === null ? { content } : {}, finish_reason: finish }] })}\n\n`

export const startFakeOpenAi = async (): Promise<FakeOpenAi> => {
  const requests: Array<FakeRequest> = []
  const queue: Array<FakeReply> = []
  let abandoned = 0
  const sockets = new Set<import("node:net").Socket>()
  const fake: FakeOpenAi = {
    url: "",
    requests,
    script: (...replies) => void queue.push(...replies),
    respond: () => ({ pieces: ["ok"] }),
    abandoned: () => abandoned,
    close: () => new Promise((resolve) => {
      for (const s of sockets) s.destroy()
      server.close(() => resolve())
    })
  }
  const server = http.createServer(async (req, res) => {
    const parts: Array<Buffer> = []
    for await (const c of req as AsyncIterable<Buffer>) parts.push(c)
    if (req.method !== "POST" || req.url !== "/v1/chat/completions") return void res.writeHead(404).end()
    const request: FakeRequest = { body: JSON.parse(Buffer.concat(parts).toString("utf8")), authorization: req.headers.authorization }
    requests.push(request)
    const reply = queue.shift() ?? fake.respond(request)
    let finished = false
    res.on("close", () => {
      if (!finished) abandoned++
    })
    if (reply.status !== undefined && reply.status !== 200) {
      finished = true
      return void res.writeHead(reply.status, { "content-type": "application/json", ...(reply.retryAfter !== undefined ? { "retry-after": reply.retryAfter } : {}) })
        .end(JSON.stringify({ error: { message: `scripted ${reply.status}`, type: "server_error" } }))
    }
    const pieces = reply.pieces ?? []
    if (reply.plainJson === true || request.body.stream !== true) {
      finished = true
      return void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({
        id: "chatcmpl-fake",
        object: "chat.completion",
        choices: [{ index: 0, message: { role: "assistant", content: pieces.join("") }, finish_reason: "stop" }]
      }))
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
    for (let i = 0; i < pieces.length; i++) {
      if (reply.breakAfter === i) return void res.destroy()
      if (reply.stallAfter === i) return
      if (reply.delayMs !== undefined) await new Promise((r) => setTimeout(r, reply.delayMs))
      if (res.destroyed) return
      // Flushed before the next step: destroy() would drop what is still queued.
      await new Promise((r) => res.write(chunk(pieces[i]!, null), r))
    }
    if (reply.breakAfter === pieces.length) return void res.destroy()
    if (reply.stallAfter === pieces.length) return
    finished = true
    res.end(`${chunk("", "stop")}data: [DONE]\n\n`)
  })
  server.on("connection", (s) => {
    sockets.add(s)
    s.on("close", () => sockets.delete(s))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as AddressInfo).port
  Object.assign(fake, { url: `http://127.0.0.1:${port}/v1` })
  return fake
}
