/**
 * bench/sttRealtime's client: a thin `ws` client of `GET /v1/speech-to-text/realtime` (not the
 * SDK: the bench measures the service, and the SDK's event plumbing would add its own delay),
 * streaming recordings at 1× real time in 100 ms chunks and timestamping every message on
 * arrival (performance.now(), ms).
 */
import WebSocket from "ws"
import { words as normalize } from "./realSpeechWer.ts"

export interface Received {
  readonly at: number
  readonly type: string
  readonly text: string
  readonly error?: string
}

/** One recording as the client sends it: its bytes in the session's format, and its sync words. */
export interface Clip {
  readonly name: string
  readonly bytes: Buffer
  /** The synchronous recognizer's words of the same audio: text (normalized) and end, ms from the clip's start. */
  readonly words: ReadonlyArray<{ readonly text: string; readonly endMs: number }>
}

export interface Format {
  readonly audioFormat: "pcm_16000" | "ulaw_8000"
  readonly sampleRate: number
  readonly bytesPer100Ms: number
}
export const PCM16K: Format = { audioFormat: "pcm_16000", sampleRate: 16000, bytesPer100Ms: 3200 }
export const ULAW8K: Format = { audioFormat: "ulaw_8000", sampleRate: 8000, bytesPer100Ms: 800 }

const until = (t: number) => new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, t - performance.now())))

export interface Session {
  readonly messages: Array<Received>
  readonly failed: () => string | undefined
  readonly wait: (stop: (m: Received) => boolean) => Promise<Received>
  readonly chunk: (bytes: Buffer, commit: boolean) => void
  readonly close: () => Promise<void>
}

/** Opens a session and resolves once `session_started` arrived. */
export const openSession = (port: number, apiKey: string, format: Format, query: Record<string, string> = {}): Promise<Session> =>
  new Promise((resolve, reject) => {
    const q = new URLSearchParams({ model_id: "scribe_v2_realtime", audio_format: format.audioFormat, ...query })
    const ws = new WebSocket(`ws://127.0.0.1:${port}/api/v1/speech-to-text/realtime?${q}`, { headers: { "xi-api-key": apiKey } })
    const messages: Array<Received> = []
    const waiters = new Set<() => void>()
    let failure: string | undefined
    const wake = () => {
      for (const w of [...waiters]) w()
    }
    ws.on("message", (data) => {
      const at = performance.now()
      const m = JSON.parse(String(data)) as { message_type: string; text?: string; error?: string }
      messages.push({ at, type: m.message_type, text: m.text ?? "", ...(m.error === undefined ? {} : { error: m.error }) })
      if (m.error !== undefined) failure ??= `${m.message_type}: ${m.error}`
      wake()
    })
    ws.on("close", (code) => {
      failure ??= `closed ${code}`
      wake()
      reject(new Error(failure))
    })
    ws.on("error", (e) => {
      failure ??= String(e)
      wake()
      reject(e)
    })
    const wait = (stop: (m: Received) => boolean) =>
      new Promise<Received>((done, fail) => {
        const check = () => {
          const found = messages.find(stop)
          if (found !== undefined || failure !== undefined) waiters.delete(check)
          if (found !== undefined) done(found)
          else if (failure !== undefined) fail(new Error(failure))
        }
        waiters.add(check)
        check()
      })
    const session: Session = {
      messages,
      failed: () => failure,
      wait,
      chunk: (bytes, commit) =>
        ws.send(JSON.stringify({ message_type: "input_audio_chunk", audio_base_64: bytes.toString("base64"), commit, sample_rate: format.sampleRate })),
      close: () =>
        new Promise((done) => {
          failure ??= "closed by the bench"
          if (ws.readyState === WebSocket.CLOSED) return done()
          ws.once("close", () => done())
          ws.close()
        })
    }
    wait((m) => m.type === "session_started").then(() => resolve(session), reject)
  })

/**
 * Streams `bytes` at 1× real time from `t0` (chunk i goes out when its audio has ended,
 * t0 + (i + 1) × 100 ms); resolves when the last chunk is out, with that time.
 */
export const streamRealTime = async (s: Session, format: Format, bytes: Buffer, t0: number): Promise<number> => {
  for (let i = 0, at = 0; at < bytes.length; i++, at += format.bytesPer100Ms) {
    await until(t0 + (i + 1) * 100)
    if (s.failed() !== undefined) throw new Error(s.failed())
    s.chunk(bytes.subarray(at, at + format.bytesPer100Ms), false)
  }
  return performance.now()
}

/**
 * Partial latency of each word of `clip` (streamed from `t0`): from the end of its audio
 * (t0 + endMs) to the first partial received since t0 holding it. "Holding it": the partial
 * has the word's text at least as often as the sync words have it up to this one, so a
 * repeated "the" waits for its second occurrence. Negative when a partial had the word before
 * its audio ended; words no partial ever held are counted apart.
 */
export const partialLatencies = (messages: ReadonlyArray<Received>, clip: Clip, t0: number) => {
  const partials = messages.filter((m) => m.type === "partial_transcript" && m.at >= t0).map((m) => ({ at: m.at, words: normalize(m.text) }))
  const latencies: Array<number> = []
  let missed = 0
  const seen = new Map<string, number>()
  for (const w of clip.words) {
    const occurrence = (seen.get(w.text) ?? 0) + 1
    seen.set(w.text, occurrence)
    const first = partials.find((p) => p.words.filter((x) => x === w.text).length >= occurrence)
    if (first === undefined) missed++
    else latencies.push(first.at - (t0 + w.endMs))
  }
  return { latencies, missed }
}

/** Nearest-rank percentile of `xs` (p in 0..1); NaN when empty. */
export const percentile = (xs: ReadonlyArray<number>, p: number): number => {
  if (xs.length === 0) return NaN
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))]!
}
