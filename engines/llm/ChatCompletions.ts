/**
 * A client for any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, llama.cpp's
 * server, Ollama, LiteLLM): `POST {baseUrl}/chat/completions` with `stream: true`, answering the
 * content deltas as an Effect stream. Used by LlmTranslator.ts and LlmSummarizer.ts.
 *
 * - Every connection goes to an address the caller's `pin` checked and pinned (the service's one
 *   outbound address guard; engines cannot import storage, so the runtime passes it in), with
 *   `agent: false` so no pooled socket skips the check.
 * - 429 and 5xx (and a connection that fails) are retried before the first content arrives, up
 *   to `maxRetries` times, waiting what `Retry-After` asks (capped) or 0.5 s, 1 s, 2 s … ; after
 *   content has been delivered a retry would repeat it, so a failure then is final.
 * - `timeoutMs` bounds the whole call, `idleMs` each silence between chunks. A stream that ends
 *   without `[DONE]` or a finish reason is a failure, not a short answer.
 * - A server that answers plain JSON although a stream was asked is accepted (one delta).
 * - Interrupting the stream aborts the HTTP request.
 */
import { Data, Effect, Stream } from "effect"
import * as http from "node:http"
import * as https from "node:https"
import type { LookupFunction } from "node:net"

export class ChatError extends Data.TaggedError("ChatError")<{
  /**
   * `Unavailable`: the endpoint cannot be reached (address refused, DNS, connection) or refuses
   * our credentials. `RateLimited`: still 429 after the retries. `Failed`: a wrong or broken
   * answer. `TimedOut`: `timeoutMs` or `idleMs` passed.
   */
  readonly reason: "Unavailable" | "RateLimited" | "Failed" | "TimedOut"
  readonly message: string
}> {}

export interface ChatEndpoint {
  /** The part before `/chat/completions`, e.g. `http://127.0.0.1:11434/v1`. */
  readonly baseUrl: URL
  readonly model: string
  /** Sent as `Authorization: Bearer`; none when undefined. */
  readonly apiKey?: string | undefined
  readonly timeoutMs: number
  readonly idleMs: number
  readonly maxRetries: number
  /** Resolves and checks a host; rejects when it may not be reached. */
  readonly pin: (host: string) => Promise<LookupFunction>
}

export interface ChatMessage {
  readonly role: "system" | "user" | "assistant"
  readonly content: string
}

export interface ChatOptions {
  readonly temperature?: number
  readonly maxTokens?: number
}

/** Most bytes of one SSE line or of a plain JSON answer: a runaway server cannot fill memory. */
const MAX_ANSWER_BYTES = 4 * 1024 * 1024
/** Longest wait a Retry-After may impose, ms. */
const MAX_RETRY_WAIT_MS = 20_000
const RETRYABLE = new Set([429, 500, 502, 503, 504])

class Attempt extends Error {
  constructor(readonly failure: ChatError, readonly retryable: boolean, readonly waitMs?: number) {
    super(failure.message)
  }
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, ms)
    signal.addEventListener("abort", () => (clearTimeout(timer), reject(signal.reason)), { once: true })
  })

/** Retry-After in ms: delta-seconds or an HTTP date; undefined when absent or unreadable. */
export const retryAfterMs = (header: string | undefined, now = Date.now()): number | undefined => {
  if (header === undefined || header.trim() === "") return undefined
  const seconds = Number(header)
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000)
  const date = Date.parse(header)
  return Number.isNaN(date) ? undefined : Math.max(0, date - now)
}

const upstreamMessage = (status: number, body: string) => {
  try {
    const parsed = JSON.parse(body) as { error?: { message?: unknown } | string }
    const m = typeof parsed.error === "string" ? parsed.error : parsed.error?.message
    if (typeof m === "string") return `HTTP ${status}: ${m.slice(0, 300)}`
  } catch { /* not JSON */ }
  return `HTTP ${status}${body.trim() === "" ? "" : `: ${body.trim().slice(0, 300)}`}`
}

/** The content of one streamed chunk or plain answer; throws on an `error` object. */
const contentOf = (json: unknown, streamed: boolean): { text: string; finished: boolean } => {
  const o = json as { error?: unknown; choices?: Array<{ delta?: { content?: unknown }; message?: { content?: unknown }; finish_reason?: unknown }> }
  if (o.error !== undefined) {
    const m = typeof o.error === "object" && o.error !== null && "message" in o.error ? String((o.error as { message: unknown }).message) : String(o.error)
    throw new Attempt(new ChatError({ reason: "Failed", message: `the model reported an error: ${m.slice(0, 300)}` }), false)
  }
  const choice = o.choices?.[0]
  const content = streamed ? choice?.delta?.content : choice?.message?.content
  return { text: typeof content === "string" ? content : "", finished: choice?.finish_reason != null && choice.finish_reason !== "" }
}

/** One POST; resolves with the response once its headers arrived. */
const post = async (endpoint: ChatEndpoint, url: URL, body: string, signal: AbortSignal): Promise<http.IncomingMessage> => {
  let lookup: LookupFunction
  try {
    lookup = await endpoint.pin(url.hostname)
  } catch (e) {
    throw new Attempt(new ChatError({ reason: "Unavailable", message: `the model endpoint may not be reached: ${(e as Error).message}` }), false)
  }
  const client = url.protocol === "https:" ? https : http
  return new Promise((resolve, reject) => {
    const req = client.request(url, {
      method: "POST",
      lookup,
      agent: false,
      signal,
      headers: {
        "content-type": "application/json",
        accept: "text/event-stream, application/json",
        "content-length": Buffer.byteLength(body),
        ...(endpoint.apiKey !== undefined ? { authorization: `Bearer ${endpoint.apiKey}` } : {})
      }
    }, resolve)
    req.on("error", (e: NodeJS.ErrnoException) => {
      if (signal.aborted) return reject(signal.reason)
      reject(new Attempt(new ChatError({ reason: "Unavailable", message: `cannot reach the model endpoint: ${e.code ?? e.message}` }), true))
    })
    req.end(body)
  })
}

const readAll = async (res: http.IncomingMessage): Promise<string> => {
  let size = 0
  const parts: Array<Buffer> = []
  for await (const chunk of res as AsyncIterable<Buffer>) {
    size += chunk.length
    if (size > MAX_ANSWER_BYTES) throw new Attempt(new ChatError({ reason: "Failed", message: "the model's answer is too large" }), false)
    parts.push(chunk)
  }
  return Buffer.concat(parts).toString("utf8")
}

/** Arms the idle limit while we wait on the network; `rest` disarms it during a retry's backoff. */
interface IdleWatch {
  readonly busy: () => void
  readonly rest: () => void
}

/** Content deltas of one call, with retries before the first delta. */
async function* deltas(endpoint: ChatEndpoint, messages: ReadonlyArray<ChatMessage>, options: ChatOptions, signal: AbortSignal, idle: IdleWatch): AsyncGenerator<string> {
  const url = new URL("chat/completions", endpoint.baseUrl.href.endsWith("/") ? endpoint.baseUrl : new URL(`${endpoint.baseUrl.href}/`))
  const body = JSON.stringify({
    model: endpoint.model,
    messages,
    stream: true,
    ...(options.temperature !== undefined ? { temperature: options.temperature } : {}),
    ...(options.maxTokens !== undefined ? { max_tokens: options.maxTokens } : {})
  })
  for (let attempt = 0;; attempt++) {
    let delivered = false
    try {
      idle.busy()
      const res = await post(endpoint, url, body, signal)
      const status = res.statusCode ?? 0
      if (status !== 200) {
        const text = await readAll(res).catch(() => "")
        const retryable = RETRYABLE.has(status)
        const reason = status === 429 ? "RateLimited" : status === 401 || status === 403 || status === 404 ? "Unavailable" : "Failed"
        throw new Attempt(new ChatError({ reason, message: `the model endpoint answered ${upstreamMessage(status, text)}` }), retryable, retryAfterMs(res.headers["retry-after"] as string | undefined))
      }
      if (!(res.headers["content-type"] ?? "").includes("text/event-stream")) {
        const text = await readAll(res)
        let json: unknown
        try {
          json = JSON.parse(text)
        } catch {
          throw new Attempt(new ChatError({ reason: "Failed", message: "the model endpoint answered something that is not JSON" }), false)
        }
        const { text: content } = contentOf(json, false)
        if (content !== "") yield content
        return
      }
      let buffered = ""
      let finished = false
      res.setEncoding("utf8")
      for await (const chunk of res as AsyncIterable<string>) {
        idle.busy()
        buffered += chunk
        if (buffered.length > MAX_ANSWER_BYTES) throw new Attempt(new ChatError({ reason: "Failed", message: "an event of the model's stream is too large" }), false)
        for (let nl = buffered.indexOf("\n"); nl >= 0; nl = buffered.indexOf("\n")) {
          const line = buffered.slice(0, nl).replace(/\r$/u, "")
          buffered = buffered.slice(nl + 1)
          if (!line.startsWith("data:")) continue // comments, event names, blank separators
          const data = line.slice(5).trim()
          if (data === "[DONE]") return
          let json: unknown
          try {
            json = JSON.parse(data)
          } catch {
            throw new Attempt(new ChatError({ reason: "Failed", message: "the model's stream carried an event that is not JSON" }), false)
          }
          const piece = contentOf(json, true)
          finished ||= piece.finished
          if (piece.text !== "") {
            delivered = true
            yield piece.text
          }
        }
      }
      if (!finished) throw new Attempt(new ChatError({ reason: "Failed", message: "the model's stream ended before the answer was complete" }), !delivered)
      return
    } catch (e) {
      if (signal.aborted) throw signal.reason
      const failure = e instanceof Attempt
        ? e
        : new Attempt(new ChatError({ reason: "Failed", message: `the model's stream broke: ${(e as Error).message}` }), true)
      if (delivered || !failure.retryable || attempt >= endpoint.maxRetries) throw failure.failure
      idle.rest()
      await sleep(Math.min(MAX_RETRY_WAIT_MS, failure.waitMs ?? 500 * 2 ** attempt), signal)
    }
  }
}

/** The reply's content deltas in order; interrupting the stream aborts the request. */
export const chatStream = (endpoint: ChatEndpoint, messages: ReadonlyArray<ChatMessage>, options: ChatOptions = {}): Stream.Stream<string, ChatError> =>
  Stream.suspend(() => {
    const controller = new AbortController()
    const total = setTimeout(() => controller.abort(new ChatError({ reason: "TimedOut", message: `the model took longer than ${endpoint.timeoutMs} ms` })), endpoint.timeoutMs)
    let idle: NodeJS.Timeout | undefined
    const watch: IdleWatch = {
      busy: () => {
        clearTimeout(idle)
        idle = setTimeout(() => controller.abort(new ChatError({ reason: "TimedOut", message: `the model sent nothing for ${endpoint.idleMs} ms` })), endpoint.idleMs)
      },
      rest: () => clearTimeout(idle)
    }
    const source = deltas(endpoint, messages, options, controller.signal, watch)
    return Stream.fromAsyncIterable(source, (e) =>
      e instanceof ChatError ? e : new ChatError({ reason: "Failed", message: `the model call failed: ${String((e as Error)?.message ?? e)}` })
    ).pipe(
      Stream.ensuring(Effect.sync(() => {
        clearTimeout(total)
        clearTimeout(idle)
        controller.abort(new ChatError({ reason: "Failed", message: "the call was stopped" }))
      }))
    )
  })

/** The whole reply as one string (streamed underneath, so the idle limit still applies). */
export const chatText = (endpoint: ChatEndpoint, messages: ReadonlyArray<ChatMessage>, options: ChatOptions = {}): Effect.Effect<string, ChatError> =>
  chatStream(endpoint, messages, options).pipe(Stream.runFold(() => "", (acc: string, piece: string) => acc + piece))
