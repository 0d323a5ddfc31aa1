/**
 * bench/soak: mixed traffic against one service process for minutes, watching for errors,
 * latency drift, audio underruns and leaks (memory, file descriptors, child processes).
 *
 * The service runs as a child process (bench/support.ts) with WORKERS=2, on DATABASE_URL (a
 * fresh schema, dropped afterwards) when set, else on embedded PGlite. Traffic, all at once:
 * - HTTP callers (closed loop with a short think time), each call picked at random: sync TTS as
 *   WAV, pcm_16000 and ulaw_8000; /stream and /stream/with-timestamps (latency = first byte);
 *   sync STT (multipart WAV of real speech, pocketsphinx-testdata); a translation chunk (when
 *   en→es is installed); GET /voices and /user; and, at BENCH_SOAK_BAD_RATE, a deliberately bad
 *   request (unknown voice, MP3, wrong key, malformed JSON, STT without a file, unknown language
 *   pair, unknown job, WebSocket upgrade for an unknown voice): a 4xx is an expected error.
 * - Voice-agent sessions on stream-input: 2-3 turns of LLM-like tokens (1-4 words every 50-100
 *   ms), flush, the next turn once a virtual listener has played the last one. Each turn plays
 *   on a virtual real-time clock from its first audio frame; an underrun is an audio frame that
 *   arrives after the audio before it has finished playing (the session is still speaking).
 * - multi-stream-input sessions with two contexts spoken at once, flushed, closed, close_socket.
 * - Recognition jobs, one at a time: reserve, PUT the WAV, start, poll to a terminal state.
 *
 * Every 10 s: the service's VmRSS (the process, its worker threads included), open fds
 * (/proc/<pid>/fd) and child processes; printed with first/last values and least-squares
 * slopes per minute over the whole run and over its second half (after warm-up).
 *
 * Run: npm run bench:soak [-- --minutes N]. Knobs: BENCH_SOAK_MINUTES (10), BENCH_SOAK_HTTP (4
 * callers), BENCH_SOAK_WS (8 agent sessions), BENCH_SOAK_MULTI (1), BENCH_SOAK_JOBS (1),
 * BENCH_SOAK_BAD_RATE (0.05), BENCH_SOAK_THINK_MS (300). `--smoke`: 20 s, and any unexpected
 * error fails the run (non-zero exit).
 */
import { execFileSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { loadavg } from "node:os"
import { Effect } from "effect"
import WebSocket from "ws"
import { adminStatement } from "../storage/Database.ts"
import { root, smoke, startService, stop } from "./support.ts"

const arg = process.argv.indexOf("--minutes")
const minutes = Number(arg > 0 ? process.argv[arg + 1] : process.env.BENCH_SOAK_MINUTES ?? 10)
const durationMs = smoke ? 20_000 : minutes * 60_000
const knob = (name: string, fallback: number) => Number(process.env[`BENCH_SOAK_${name}`] ?? fallback)
const HTTP_CALLERS = knob("HTTP", 4), AGENTS = knob("WS", 8), MULTIS = knob("MULTI", 1)
const JOBS = knob("JOBS", 1), BAD_RATE = knob("BAD_RATE", 0.05), THINK_MS = knob("THINK_MS", 300)
const SAMPLE_MS = 10_000
const TIMEOUT_MS = 60_000
const pg = process.env.DATABASE_URL
/** Real speech (Debian pocketsphinx-testdata): a 3 s and a 3.3 s LibriVox reading, two short utterances. */
const SPEECH_FILES = ["librivox/sense_and_sensibility_01_austen_64kb-0880", "librivox/sense_and_sensibility_01_austen_64kb-0930", "cards/001", "cards/003"]
  .map((f) => `/usr/share/pocketsphinx/test/data/${f}.wav`).filter((f) => existsSync(f)).map((f) => new Uint8Array(readFileSync(f)))
const JOB_AUDIO = SPEECH_FILES[0]

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, ms)))

// ---- what the run saw ------------------------------------------------------------------------
const latencies = new Map<string, Array<number>>()
const unexpected = new Map<string, number>()
const expected = new Map<string, number>()
const firstMessage = new Map<string, string>()
const count = (m: Map<string, number>, key: string) => m.set(key, (m.get(key) ?? 0) + 1)
const ok = (route: string, ms: number) => (latencies.get(route) ?? latencies.set(route, []).get(route)!).push(ms)
const fail = (key: string, message = "") => (count(unexpected, key), !firstMessage.has(key) && message !== "" && firstMessage.set(key, message.slice(0, 300)))
const agentStats = { sessions: 0, withUnderrun: 0, underruns: 0, turns: 0, worstLateMs: 0 }

// ---- text like an LLM's (seeded) -------------------------------------------------------------
const prng = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), seed | 1)
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}
const random = prng(0x50a6)
const pick = <A>(xs: ReadonlyArray<A>): A => xs[Math.floor(random() * xs.length)]!
const WORDS = ("täna homme hommikul õhtul linn maja aed mets meri järv tee rong buss ilm päike vihm tuul lumi inimesed lapsed " +
  "sõbrad pere raamat kiri töö kool pood kohv kiiresti aeglaselt vaikselt kindlasti muidugi juba veel alati läks tuli nägi " +
  "ütles arvas tegi võttis andis luges rääkis küsis vastas ootas suur väike uus vana ilus hea soe külm pikk huvitav lihtne").split(" ")
const sentence = (): string => {
  const target = 40 + Math.floor(random() * 60)
  let s = ""
  while (s.length < target) s = s === "" ? pick(WORDS).replace(/^./, (c) => c.toUpperCase()) : `${s}${random() < 0.1 ? "," : ""} ${pick(WORDS)}`
  return s + pick([".", ".", "!", "?"])
}
const paragraph = (n: number) => Array.from({ length: n }, sentence).join(" ")
/** Pieces of 1-4 words, each with its trailing space, as an LLM streams them. */
const tokens = (text: string): Array<string> => {
  const words = text.split(" ")
  const out: Array<string> = []
  for (let i = 0, n = 0; i < words.length; i += n) out.push(words.slice(i, i + (n = 1 + Math.floor(random() * 4))).join(" ") + " ")
  return out
}

// ---- the service -----------------------------------------------------------------------------
const schema = pg === undefined ? undefined : `bench_soak_${randomBytes(5).toString("hex")}`
if (pg !== undefined) await Effect.runPromise(adminStatement(pg, `CREATE SCHEMA ${schema}`))
const dbUrl = pg === undefined ? undefined : new URL(pg)
dbUrl?.searchParams.set("options", `-c search_path=${schema}`)
const env: Record<string, string> = { WORKERS: "2", TRANSLATE_RATE_PER_S: "1000", TRANSLATE_BURST: "1000", ...(dbUrl ? { DATABASE_URL: dbUrl.toString() } : {}) }
const service = await startService(env)
const pid = service.child.pid!
const serverLog = { warn: 0, error: 0, messages: new Map<string, number>() }
let tail = ""
service.child.stdout!.setEncoding("utf8").on("data", (d: string) => {
  const lines = (tail + d).split("\n")
  tail = lines.pop()!
  for (const line of lines) {
    const level = /"level":"(warn|error|fatal)"/.exec(line)?.[1]
    if (level === undefined) continue
    level === "warn" ? serverLog.warn++ : serverLog.error++
    count(serverLog.messages, `${level}: ${/"msg":"([^"]*)"/.exec(line)?.[1] ?? line.slice(0, 120)}`)
  }
})
let stopping = false
let serviceDied = false
service.child.once("exit", (code, signal) => {
  if (stopping) return
  serviceDied = true
  console.error(`the service exited during the run: code ${code}, signal ${signal}`)
})
const created = execFileSync(process.execPath, ["--import", "tsx", "runtime/admin.ts", "create-user", "--name", "soak", "--credits", "1000000000", "--json"], {
  cwd: root, env: { ...process.env, ...env, DATA_DIR: service.dataDir }, encoding: "utf8"
})
const apiKey = (JSON.parse(created.trim().split("\n").at(-1)!) as { api_key: string }).api_key
const api = `${service.site}/api/v1`
const wsBase = `ws://127.0.0.1:${service.port}/api/v1`
const auth = { "xi-api-key": apiKey }
const jsonHeaders = { ...auth, "content-type": "application/json" }
const pairs = (await (await fetch(`${api}/translate/languages`)).json()) as { pairs: Array<{ source: string; target: string }> }
const canTranslate = pairs.pairs.some((p) => p.source === "en" && p.target === "es")

// ---- HTTP ------------------------------------------------------------------------------------
/**
 * One request. `expect: "ok"` records the latency (to the first body byte when `stream`, else
 * to the end of the body) or an unexpected error; `expect: "4xx"` counts an expected error.
 */
const call = async (route: string, url: string, init: RequestInit, expect: "ok" | "4xx" = "ok", stream = false): Promise<Uint8Array | undefined> => {
  const t0 = performance.now()
  try {
    const res = await fetch(url, { ...init, signal: AbortSignal.timeout(TIMEOUT_MS) })
    let firstMs = NaN
    const parts: Array<Uint8Array> = []
    for await (const chunk of res.body ?? []) {
      if (parts.length === 0) firstMs = performance.now() - t0
      parts.push(chunk as Uint8Array)
    }
    const body = Buffer.concat(parts)
    if (expect === "4xx") {
      if (res.status >= 400 && res.status < 500) count(expected, `${route} → ${res.status}`)
      else fail(`${route}: status ${res.status} (a 4xx expected)`, body.toString("utf8"))
      return undefined
    }
    if (res.status < 200 || res.status >= 300) return void fail(`${route}: status ${res.status}`, body.toString("utf8"))
    if (body.length === 0) return void fail(`${route}: empty body`)
    ok(route, stream ? firstMs : performance.now() - t0)
    return body
  } catch (e) {
    const err = e as Error & { cause?: { code?: string; message?: string } }
    if (err.name === "TimeoutError") fail(`${route}: timeout (${TIMEOUT_MS / 1000} s)`)
    else fail(`${route}: network error ${err.cause?.code ?? err.message}`, `${err.message} ${err.cause?.message ?? ""}`)
    return undefined
  }
}
const post = (body: unknown, headers: Record<string, string> = jsonHeaders): RequestInit =>
  ({ method: "POST", headers, body: typeof body === "string" ? body : JSON.stringify(body) })
const sttForm = (audio?: Uint8Array) => {
  const form = new FormData()
  form.append("model_id", "scribe_v1")
  if (audio !== undefined) form.append("file", new Blob([audio], { type: "audio/wav" }), "speech.wav")
  return { method: "POST", headers: auth, body: form }
}
let translated = ""

const goodCalls: Array<[number, () => Promise<unknown>]> = [
  [2, () => call("POST tts wav", `${api}/text-to-speech/${pick(["mari", "tambet"])}`, post({ text: paragraph(1 + Math.floor(random() * 2)) }))],
  [2, () => call("POST tts pcm_16000", `${api}/text-to-speech/mari?output_format=pcm_16000`, post({ text: paragraph(1) }))],
  [2, () => call("POST tts ulaw_8000", `${api}/text-to-speech/tambet?output_format=ulaw_8000`, post({ text: paragraph(1) }))],
  [2, () => call("POST tts /stream (first byte)", `${api}/text-to-speech/mari/stream`, post({ text: paragraph(3) }), "ok", true)],
  [2, () => call("POST tts /stream/with-timestamps (first byte)", `${api}/text-to-speech/liis/stream/with-timestamps?output_format=pcm_24000`, post({ text: paragraph(2) }), "ok", true)],
  [SPEECH_FILES.length > 0 ? 1 : 0, () => call("POST stt (multipart WAV)", `${api}/speech-to-text`, sttForm(pick(SPEECH_FILES)))],
  [canTranslate ? 2 : 0, async () => {
    const words = pick(["good morning everyone and thanks for joining", "the test results look much better than last week", "please send the updated schedule to the team"]).split(" ")
    const body = await call("POST translate/chunk", `${api}/translate/chunk`, post({ new_source: words.slice(0, 3 + Math.floor(random() * 4)).join(" "), source: "en", target: "es", previous: translated.slice(-200) }))
    if (body !== undefined) translated = (translated + (JSON.parse(Buffer.from(body).toString("utf8")) as { appended: string }).appended).slice(-400)
  }],
  [1, () => call("GET voices", `${api}/voices`, { headers: auth })],
  [1, () => call("GET user", `${api}/user`, { headers: auth })]
]
const badCalls: Array<() => Promise<unknown>> = [
  () => call("bad: unknown voice", `${api}/text-to-speech/no-such-voice`, post({ text: "Tere." }), "4xx"),
  () => call("bad: mp3 output_format", `${api}/text-to-speech/mari?output_format=mp3_44100_128`, post({ text: "Tere." }), "4xx"),
  () => call("bad: wrong api key", `${api}/user`, { headers: { "xi-api-key": "sk_wrong" } }, "4xx"),
  () => call("bad: malformed JSON", `${api}/text-to-speech/mari`, post("{\"text\": \"Tere"), "4xx"),
  () => call("bad: stt without a file", `${api}/speech-to-text`, sttForm(), "4xx"),
  () => call("bad: unknown language pair", `${api}/translate/chunk`, post({ new_source: "hello", source: "en", target: "xx", previous: "" }), "4xx"),
  () => call("bad: unknown job", `${api}/recognition/jobs/job_doesnotexist`, { headers: auth }, "4xx"),
  () => new Promise<void>((resolve) => {
    const ws = new WebSocket(`${wsBase}/text-to-speech/no-such-voice/stream-input`, { headers: auth })
    let settled = false
    const settle = (f: () => void) => (settled ? undefined : (settled = true, f(), ws.terminate(), resolve()))
    ws.once("unexpected-response", (_req, res) => settle(() => {
      const s = res.statusCode ?? 0
      s >= 400 && s < 500 ? count(expected, `bad: ws upgrade, unknown voice → ${s}`) : fail(`bad: ws upgrade, unknown voice: status ${s} (a 4xx expected)`)
      res.resume()
    }))
    ws.once("open", () => settle(() => fail("bad: ws upgrade, unknown voice: accepted")))
    ws.on("error", (e) => settle(() => fail(`bad: ws upgrade: ${e.message}`)))
  })
]
const totalWeight = goodCalls.reduce((a, [w]) => a + w, 0)
const httpCaller = async (until: number) => {
  while (performance.now() < until && !serviceDied) {
    if (random() < BAD_RATE) await pick(badCalls)()
    else {
      let r = random() * totalWeight
      const [, f] = goodCalls.find(([w]) => (r -= w) < 0) ?? goodCalls[0]!
      await f()
    }
    await sleep(THINK_MS * (0.5 + random()))
  }
}

// ---- recognition jobs ------------------------------------------------------------------------
const jobLoop = async (until: number) => {
  while (JOB_AUDIO !== undefined && performance.now() < until && !serviceDied) {
    const t0 = performance.now()
    const reserved = await call("POST recognition/uploads", `${api}/recognition/uploads`, post({ content_type: "audio/wav" }))
    if (reserved === undefined) { await sleep(1000); continue }
    const r = JSON.parse(Buffer.from(reserved).toString("utf8")) as { job_id: string; upload_url: string; headers?: Record<string, string> }
    if ((await call("PUT upload", r.upload_url, { method: "PUT", headers: r.headers ?? {}, body: JOB_AUDIO })) === undefined) continue
    if ((await call("POST recognition/jobs/start", `${api}/recognition/jobs/${r.job_id}/start`, post({}))) === undefined) continue
    for (const deadline = performance.now() + 180_000; ;) {
      await sleep(500)
      if (performance.now() > deadline) { fail("recognition job: not terminal after 180 s"); break }
      const res = await fetch(`${api}/recognition/jobs/${r.job_id}`, { headers: auth, signal: AbortSignal.timeout(TIMEOUT_MS) }).catch((e: Error) => e)
      if (res instanceof Error) { fail(`GET recognition/jobs/{id}: ${res.name}`, res.message); continue }
      if (res.status !== 200) { fail(`GET recognition/jobs/{id}: status ${res.status}`, await res.text()); continue }
      const s = (await res.json()) as { state: string; error?: { code: string; message: string } }
      if (s.state === "succeeded") { ok("recognition job (reserve → succeeded)", performance.now() - t0); break }
      if (s.state === "failed" || s.state === "cancelled") { fail(`recognition job: ${s.state} ${s.error?.code ?? ""}`, s.error?.message); break }
    }
    await sleep(1000)
  }
}

// ---- WebSocket sessions ----------------------------------------------------------------------
type Frame = Record<string, any>
/** A socket whose frames go to `onFrame`, with `until(predicate)` to wait for one. */
interface Socket {
  readonly ws: WebSocket
  readonly until: (p: (f: Frame) => boolean, what: string) => Promise<boolean>
  readonly onFrame: { f: (f: Frame, at: number) => void }
  readonly closed: Promise<number>
  /** Ends the connection from this side; its close is not counted as an error. */
  readonly abort: () => void
}
const openSocket = (route: string, url: string) => new Promise<Socket | undefined>((resolve) => {
  const ws = new WebSocket(url, { headers: auth, perMessageDeflate: false })
  const onFrame = { f: (_f: Frame, _at: number) => {} }
  const waiters = new Set<{ p: (f: Frame) => boolean; done: (v: boolean) => void }>()
  let frames = 0
  let errorSeen = false
  let aborted = false
  let settled = false
  const abort = () => (aborted = true, ws.terminate())
  const closed = new Promise<number>((r) => ws.once("close", (code) => {
    if (code !== 1000 && !aborted) fail(frames === 0 && code === 1006 ? `${route}: dropped at open (1006, no frame)` : `${route}: close ${code}`)
    for (const w of waiters) w.done(false)
    r(code)
  }))
  ws.on("message", (data: Buffer) => {
    const at = performance.now()
    frames++
    const f = ((): Frame | undefined => { try { return JSON.parse(data.toString("utf8")) } catch { return undefined } })()
    if (f === undefined) return fail(`${route}: a frame that is not JSON`, data.toString("utf8"))
    if (f.error !== undefined && !errorSeen) (errorSeen = true, fail(`${route}: error frame ${f.error.code}`, f.error.message))
    onFrame.f(f, at)
    for (const w of waiters) if (w.p(f)) (waiters.delete(w), w.done(true))
  })
  const until = (p: (f: Frame) => boolean, what: string) => ws.readyState !== WebSocket.OPEN ? Promise.resolve(false) : new Promise<boolean>((done) => {
    const timer = setTimeout(() => (waiters.delete(w), fail(`${route}: timeout waiting for ${what}`), done(false)), TIMEOUT_MS)
    const w = { p, done: (v: boolean) => (clearTimeout(timer), done(v)) }
    waiters.add(w)
  })
  ws.once("open", () => (settled = true, resolve({ ws, until, onFrame, closed, abort })))
  ws.once("unexpected-response", (_req, res) => (settled = true, fail(`${route}: upgrade refused ${res.statusCode}`), abort(), resolve(undefined)))
  ws.on("error", (e) => settled ? undefined : (settled = true, aborted = true, fail(`${route}: ${e.message}`), resolve(undefined)))
})
const sendJson = (ws: WebSocket, frame: unknown) => ws.readyState === WebSocket.OPEN && ws.send(JSON.stringify(frame))
const closeWithin = (s: Socket, route: string) => {
  const timer = setTimeout(() => (fail(`${route}: no close within 10 s`), s.abort()), 10_000)
  return s.closed.then(() => clearTimeout(timer))
}

/** A voice agent on stream-input: turns of tokens, each played by a virtual real-time listener. */
const agentSession = async () => {
  const route = "ws stream-input agent"
  const s = await openSocket(route, `${wsBase}/text-to-speech/${pick(["mari", "kristjan"])}/stream-input`)
  if (s === undefined) return sleep(1000)
  agentStats.sessions++
  let sessionUnderruns = 0
  sendJson(s.ws, { text: " " })
  for (let turn = 0, turns = 2 + Math.floor(random() * 2); turn < turns; turn++) {
    const started = performance.now()
    let firstAt = NaN
    let playEnd = 0
    s.onFrame.f = (f, at) => {
      if (typeof f.audio !== "string") return
      const seconds = Buffer.byteLength(f.audio, "base64") / 48000 // s16le mono 24 kHz
      if (Number.isNaN(firstAt)) (firstAt = at, playEnd = at)
      else if (at > playEnd) (sessionUnderruns++ === 0 && agentStats.withUnderrun++, agentStats.underruns++, agentStats.worstLateMs = Math.max(agentStats.worstLateMs, at - playEnd))
      playEnd = Math.max(playEnd, at) + seconds * 1000
    }
    for (const piece of tokens(paragraph(1 + Math.floor(random() * 2)))) {
      sendJson(s.ws, { text: piece })
      await sleep(50 + random() * 50)
    }
    sendJson(s.ws, { flush: true })
    if (!(await s.until((f) => f.flushDone === true, "flushDone"))) return void s.abort()
    if (Number.isNaN(firstAt)) fail(`${route}: a turn without audio`)
    else ok("ws stream-input first audio (per turn)", firstAt - started)
    agentStats.turns++
    await sleep(playEnd - performance.now() + 300 + random() * 700)
  }
  s.onFrame.f = () => {}
  sendJson(s.ws, { text: "" })
  if (await s.until((f) => f.isFinal === true, "isFinal")) await closeWithin(s, route)
  s.abort()
}

/** multi-stream-input: two contexts spoken at once, flushed, closed, then close_socket. */
const multiSession = async () => {
  const route = "ws multi-stream-input"
  const s = await openSocket(route, `${wsBase}/text-to-speech/tambet/multi-stream-input`)
  if (s === undefined) return sleep(1000)
  const started = performance.now()
  const first = new Map<string, number>()
  s.onFrame.f = (f, at) => void (typeof f.audio === "string" && !first.has(f.contextId) && first.set(f.contextId, at - started))
  const ids = ["a", "b"]
  for (const id of ids) sendJson(s.ws, { text: " ", context_id: id })
  const pieces = ids.map(() => tokens(paragraph(2)))
  for (let i = 0; i < Math.max(...pieces.map((p) => p.length)); i++) {
    ids.forEach((id, j) => pieces[j]![i] !== undefined && sendJson(s.ws, { text: pieces[j]![i], context_id: id }))
    await sleep(50 + random() * 50)
  }
  for (const id of ids) sendJson(s.ws, { context_id: id, flush: true })
  const flushed = await Promise.all(ids.map((id) => s.until((f) => f.flushDone === true && f.contextId === id, `flushDone of context ${id}`)))
  if (!flushed.every(Boolean)) return void s.abort()
  for (const id of ids) first.has(id) ? ok("ws multi-stream-input first audio (per context)", first.get(id)!) : fail(`${route}: context without audio`)
  const finals = ids.map((id) => s.until((f) => f.isFinal === true && f.contextId === id, `isFinal of context ${id}`))
  for (const id of ids) sendJson(s.ws, { context_id: id, close_context: true })
  if ((await Promise.all(finals)).every(Boolean)) {
    sendJson(s.ws, { close_socket: true })
    await closeWithin(s, route)
  }
  s.abort()
  await sleep(500 + random() * 1000)
}

const slot = async (until: number, delayMs: number, session: () => Promise<unknown>) => {
  await sleep(delayMs)
  while (performance.now() < until && !serviceDied) await session()
}

// ---- the service seen from outside -----------------------------------------------------------
interface Sample { readonly minute: number; readonly rssMb: number; readonly fds: number; readonly children: number }
const samples: Array<Sample> = []
const childrenOf = (p: number) => readdirSync(`/proc/${p}/task`).flatMap((t) => readFileSync(`/proc/${p}/task/${t}/children`, "utf8").split(" ").filter((x) => x !== ""))
const cpuSeconds = () => {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
  return (Number(f[11]) + Number(f[12])) / 100
}
const t0 = performance.now()
const sample = () => {
  try {
    const rssKb = Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1])
    samples.push({ minute: (performance.now() - t0) / 60_000, rssMb: rssKb / 1024, fds: readdirSync(`/proc/${pid}/fd`).length, children: childrenOf(pid).length })
  } catch { /* the service is gone; reported elsewhere */ }
}
/** Least-squares slope of y per minute. */
const slope = (xs: ReadonlyArray<Sample>, y: (s: Sample) => number) => {
  if (xs.length < 2) return NaN
  const mx = xs.reduce((a, s) => a + s.minute, 0) / xs.length
  const my = xs.reduce((a, s) => a + y(s), 0) / xs.length
  const sxy = xs.reduce((a, s) => a + (s.minute - mx) * (y(s) - my), 0)
  const sxx = xs.reduce((a, s) => a + (s.minute - mx) ** 2, 0)
  return sxx === 0 ? NaN : sxy / sxx
}

// ---- run -------------------------------------------------------------------------------------
const cpu0 = cpuSeconds()
sample()
const sampler = setInterval(sample, SAMPLE_MS)
const until = performance.now() + durationMs
console.log(`bench/soak: ${(durationMs / 60_000).toFixed(2)} min, WORKERS=2, database ${pg !== undefined ? `PostgreSQL (schema ${schema})` : "embedded PGlite"}; ` +
  `${HTTP_CALLERS} HTTP callers (think ${THINK_MS} ms), ${AGENTS} stream-input agents, ${MULTIS} multi-stream-input, ${JOBS} job at a time, ` +
  `bad requests ${(BAD_RATE * 100).toFixed(0)} %; translation ${canTranslate ? "en→es" : "skipped (no en→es pair)"}; load average ${loadavg()[0]!.toFixed(2)} at the start`)
const progress = setInterval(() => {
  const n = [...latencies.values()].reduce((a, l) => a + l.length, 0)
  const last = samples.at(-1)
  console.error(`  … ${((performance.now() - t0) / 60_000).toFixed(1)} min: ${n} ok, ${[...unexpected.values()].reduce((a, b) => a + b, 0)} unexpected errors, ` +
    `${agentStats.underruns} underruns, RSS ${last?.rssMb.toFixed(0)} MB, ${last?.fds} fds, load ${loadavg()[0]!.toFixed(2)}`)
}, smoke ? 10_000 : 60_000)
await Promise.all([
  ...Array.from({ length: HTTP_CALLERS }, () => httpCaller(until)),
  ...Array.from({ length: AGENTS }, (_, i) => slot(until, (i * 4000) / Math.max(1, AGENTS), agentSession)),
  ...Array.from({ length: MULTIS }, (_, i) => slot(until, 1000 + i * 1500, multiSession)),
  ...Array.from({ length: JOBS }, () => jobLoop(until))
])
const wallMin = (performance.now() - t0) / 60_000
const cpuUsed = serviceDied ? NaN : cpuSeconds() - cpu0
sample()
clearInterval(sampler)
clearInterval(progress)

// ---- report ----------------------------------------------------------------------------------
const quantile = (xs: ReadonlyArray<number>, q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.max(0, Math.ceil(q * xs.length) - 1))]!
const sum = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0)
const okTotal = [...latencies.values()].reduce((a, l) => a + l.length, 0)
const unexpectedTotal = sum(unexpected)
const attempts = okTotal + unexpectedTotal + sum(expected)
console.log(`ran ${wallMin.toFixed(2)} min (drain included); service CPU ${(cpuUsed / 60 / wallMin).toFixed(2)} cores on average; load average ${loadavg().map((l) => l.toFixed(2)).join(" ")} at the end`)
console.log(`\nlatency per route (ms; streams: to the first body byte / first audio)`)
console.log(`  ${"route".padEnd(48)} ${"n".padStart(6)} ${"p50".padStart(8)} ${"p99".padStart(8)} ${"max".padStart(8)}`)
for (const [route, xs] of [...latencies].sort(([a], [b]) => a.localeCompare(b))) {
  console.log(`  ${route.padEnd(48)} ${String(xs.length).padStart(6)} ${quantile(xs, 0.5).toFixed(0).padStart(8)} ${quantile(xs, 0.99).toFixed(0).padStart(8)} ${Math.max(...xs).toFixed(0).padStart(8)}`)
}
console.log(`\nunexpected errors: ${unexpectedTotal} of ${attempts} operations (${((100 * unexpectedTotal) / Math.max(1, attempts)).toFixed(3)} %)`)
for (const [key, n] of [...unexpected].sort(([, a], [, b]) => b - a)) console.log(`  ${String(n).padStart(5)}  ${key}${firstMessage.has(key) ? `  — first: ${firstMessage.get(key)}` : ""}`)
console.log(`expected errors (deliberate bad requests): ${sum(expected)}`)
for (const [key, n] of [...expected].sort(([a], [b]) => a.localeCompare(b))) console.log(`  ${String(n).padStart(5)}  ${key}`)
console.log(`\nstream-input agents: ${agentStats.sessions} sessions, ${agentStats.turns} turns; underruns: ${agentStats.withUnderrun} sessions with any, ${agentStats.underruns} in total, worst ${agentStats.worstLateMs.toFixed(0)} ms late`)
const half = samples.filter((s) => s.minute >= wallMin / 2)
const trend = (name: string, unit: string, y: (s: Sample) => number, digits: number) => {
  const ys = samples.map(y)
  console.log(`  ${name.padEnd(16)} first ${ys[0]?.toFixed(digits)} ${unit}, last ${ys.at(-1)?.toFixed(digits)}, max ${Math.max(...ys).toFixed(digits)}; ` +
    `slope ${slope(samples, y).toFixed(2)} ${unit}/min (all), ${slope(half, y).toFixed(2)} ${unit}/min (second half, ${half.length} samples)`)
}
console.log(`\nthe service process (pid ${pid}), ${samples.length} samples every ${SAMPLE_MS / 1000} s`)
trend("VmRSS", "MB", (s) => s.rssMb, 1)
trend("open fds", "fds", (s) => s.fds, 0)
trend("child processes", "procs", (s) => s.children, 0)
console.log(`server log: ${serverLog.warn} warn, ${serverLog.error} error lines`)
for (const [m, n] of [...serverLog.messages].sort(([, a], [, b]) => b - a).slice(0, 10)) console.log(`  ${String(n).padStart(5)}  ${m}`)

stopping = true
await stop(service.child)
rmSync(service.dataDir, { recursive: true, force: true })
if (pg !== undefined) await Effect.runPromise(adminStatement(pg, `DROP SCHEMA ${schema} CASCADE`).pipe(Effect.ignore))
if (serviceDied) console.error("FAILED: the service exited during the run")
if (smoke && unexpectedTotal > 0) console.error(`FAILED (--smoke): ${unexpectedTotal} unexpected errors`)
process.exit(serviceDied || (smoke && unexpectedTotal > 0) ? 1 : 0)
