/**
 * Mixed client traffic for bench/cluster.ts, every request through nginx: streamed TTS over
 * HTTP, WebSocket stream-input sessions (reconnecting through nginx when theirs breaks),
 * synchronous STT, recognition jobs with webhooks, voice-clone creation. Every call is recorded
 * with the instance that answered (nginx's `x-upstream`), so failures of calls that were on a
 * killed instance can be told from failures that must not happen.
 */
import { readFileSync } from "node:fs"
import WebSocket from "ws"

export const SPEECH = readFileSync("/usr/share/pocketsphinx/test/data/librivox/sense_and_sensibility_01_austen_64kb-0870.wav")

export interface Call {
  readonly kind: string
  readonly startedAt: number
  endedAt: number
  upstream: string
  ok: boolean
  error?: string
}

export interface Traffic {
  readonly calls: Array<Call>
  readonly jobs: Array<string>
  /** WebSocket sessions per client that ended with isFinal after the kill. */
  readonly wsAfterKill: Map<number, number>
  /** Sessions that broke and were followed by a good one of the same client. */
  wsReconnects: number
  /** Clients whose last session broke and whose retries (3 at most) failed too. */
  wsUnrecovered: number
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Runs `f` as a recorded call; `f` reports the answering upstream as soon as it knows it. */
const record = async (traffic: Traffic, kind: string, f: (upstream: (u: string | null) => void) => Promise<void>): Promise<void> => {
  await recordReturning(traffic, kind, f)
}

const recordReturning = async (traffic: Traffic, kind: string, f: (upstream: (u: string | null) => void) => Promise<void>): Promise<Call> => {
  const call: Call = { kind, startedAt: Date.now(), endedAt: 0, upstream: "", ok: false }
  traffic.calls.push(call)
  try {
    await f((u) => (call.upstream = u ?? ""))
    call.ok = true
  } catch (e) {
    call.error = String((e as Error).message ?? e)
  }
  call.endedAt = Date.now()
  return call
}

const checked = async (res: Response, upstream: (u: string | null) => void) => {
  upstream(res.headers.get("x-upstream"))
  if (res.status >= 300) throw new Error(`${res.status} ${(await res.text()).slice(0, 200)}`)
  return res
}

export interface TrafficOptions {
  readonly site: string
  readonly apiKey: string
  readonly webhookId: string
  readonly until: () => boolean
  /** Pause between jobs started, ms. */
  readonly jobEveryMs: number
  readonly killAt: () => number | undefined
}

export const runTraffic = async (o: TrafficOptions): Promise<Traffic> => {
  const traffic: Traffic = { calls: [], jobs: [], wsAfterKill: new Map(), wsReconnects: 0, wsUnrecovered: 0 }
  const api = `${o.site}/api/v1`
  const auth = { "xi-api-key": o.apiKey }
  const loop = async (pauseMs: number, body: (i: number) => Promise<void>) => {
    for (let i = 0; !o.until(); i++) {
      await body(i)
      await sleep(pauseMs)
    }
  }

  const tts = loop(200, () =>
    record(traffic, "tts_stream", async (up) => {
      const res = await checked(await fetch(`${api}/text-to-speech/emma-en/stream?output_format=pcm_16000`, {
        method: "POST",
        headers: { ...auth, "content-type": "application/json" },
        body: JSON.stringify({ text: "The cluster answers through nginx. Every instance shares one database." })
      }), up)
      if ((await res.arrayBuffer()).byteLength < 1000) throw new Error("short audio")
    }))

  const stt = loop(500, () =>
    record(traffic, "stt_sync", async (up) => {
      const form = new FormData()
      form.append("model_id", "scribe_v1")
      form.append("file", new Blob([SPEECH], { type: "audio/wav" }), "speech.wav")
      const res = await checked(await fetch(`${api}/speech-to-text`, { method: "POST", headers: auth, body: form }), up)
      const body = await res.json() as { text?: string }
      if (typeof body.text !== "string" || body.text.length === 0) throw new Error("no text")
    }))

  const clones = loop(1500, (i) =>
    record(traffic, "voice_clone", async (up) => {
      const form = new FormData()
      form.append("name", `cluster clone ${process.pid}-${i}-${Math.random().toString(36).slice(2, 8)}`)
      form.append("files", new Blob([SPEECH], { type: "audio/wav" }), "sample.wav")
      await (await checked(await fetch(`${api}/voices/add`, { method: "POST", headers: auth, body: form }), up)).json()
    }))

  const jobs = loop(o.jobEveryMs, () =>
    record(traffic, "job_start", async (up) => {
      const json = { ...auth, "content-type": "application/json" }
      const reserved = await (await checked(await fetch(`${api}/recognition/uploads`, { method: "POST", headers: json, body: JSON.stringify({ content_type: "audio/wav" }) }), up)).json() as { job_id: string; upload_url: string }
      await checked(await fetch(reserved.upload_url, { method: "PUT", body: SPEECH }), up)
      await checked(await fetch(`${api}/recognition/jobs/${reserved.job_id}/start`, { method: "POST", headers: json, body: JSON.stringify({ webhook: true, webhook_id: o.webhookId }) }), up)
      traffic.jobs.push(reserved.job_id)
    }))

  const wsClient = async (client: number) => {
    const wsUrl = `${o.site.replace(/^http/u, "ws")}/api/v1/text-to-speech/emma-en/stream-input?output_format=pcm_16000`
    let broke = 0
    // A broken session is retried even after the end, so every client shows whether it recovered.
    while (!o.until() || (broke > 0 && broke < 4)) {
      const last = await recordReturning(traffic, "ws_session", (up) => wsSession(wsUrl, o.apiKey, up))
      if (!last.ok) {
        broke++
        continue
      }
      if (broke > 0) traffic.wsReconnects++
      broke = 0
      const killAt = o.killAt()
      if (killAt !== undefined && last.startedAt > killAt) traffic.wsAfterKill.set(client, (traffic.wsAfterKill.get(client) ?? 0) + 1)
      await sleep(100)
    }
    if (broke > 0) traffic.wsUnrecovered++
  }

  await Promise.all([tts, stt, clones, jobs, wsClient(0), wsClient(1)])
  return traffic
}

/** One stream-input session: two sentences, flush, `{text: ""}`, until isFinal. */
const wsSession = (url: string, apiKey: string, upstream: (u: string | null) => void) =>
  new Promise<void>((resolve, reject) => {
    const ws = new WebSocket(url, { headers: { "xi-api-key": apiKey } })
    let audio = 0
    const timer = setTimeout(() => (ws.terminate(), reject(new Error("session timed out"))), 60_000)
    ws.on("upgrade", (res) => upstream((res.headers["x-upstream"] as string | undefined) ?? null))
    ws.on("unexpected-response", (_req, res) => {
      upstream((res.headers["x-upstream"] as string | undefined) ?? null)
      clearTimeout(timer)
      reject(new Error(`upgrade refused: ${res.statusCode}`))
    })
    ws.on("open", () => {
      ws.send(JSON.stringify({ text: " " }))
      ws.send(JSON.stringify({ text: "Sessions reconnect through the balancer. " }))
      ws.send(JSON.stringify({ text: "Another instance answers them.", flush: true }))
      ws.send(JSON.stringify({ text: "" }))
    })
    ws.on("message", (data) => {
      const m = JSON.parse(data.toString()) as { audio?: string | null; isFinal?: boolean }
      if (typeof m.audio === "string") audio += m.audio.length
      if (m.isFinal === true) {
        clearTimeout(timer)
        ws.close(1000)
        audio > 0 ? resolve() : reject(new Error("no audio"))
      }
    })
    ws.on("error", (e) => (clearTimeout(timer), reject(e)))
    ws.on("close", (code) => (clearTimeout(timer), reject(new Error(`closed ${code} before isFinal`))))
  })
