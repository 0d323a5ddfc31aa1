/**
 * The WebSocket half of bench/tts (`/text-to-speech/{voice}/stream-input`), run against the
 * service bench/tts started. The sessions come from bench/ttsWsLoad.ts in two child processes,
 * so that the service's process is what is measured; they share the machine's cores with it,
 * and each line says how much CPU they took.
 *
 * 1. Memory per open idle session: the service's VmRSS (/proc/<pid>/status) before and after
 *    1,000 sessions that sent only the init frame, divided by 1,000.
 * 2. Peak memory with clients that stop reading: 50 sessions send a long text and flush, read
 *    their first audio frames, then pause their sockets; while they stay paused the service's
 *    VmHWM (reset first through /proc/<pid>/clear_refs) and VmRSS are sampled with the
 *    `tts_ws_buffered_bytes` and `tts_ws_sessions_backpressured` gauges.
 * 3. Concurrent sessions kept at real time: N voice-agent sessions (two turns each: an LLM reply
 *    streamed a few words every 50-100 ms, sentences of 60-120 characters, flushed; the next
 *    turn once the listener has heard the previous one), starting spread over one turn's length.
 *    Each turn plays on a virtual clock from its first audio frame; a session is real time when
 *    no audio frame arrived after the audio before it would have finished playing, and every
 *    turn's audio covers the wall time from its first frame to its last (within 100 ms).
 *    N steps through BENCH_WS_LEVELS (default 200, 300, 400: the target and beyond, about 40 s
 *    each) until fewer than 99 % of the sessions are real time; then one level halfway between
 *    the last pass (or 0) and that failure is tried.
 *
 * `--smoke` (bench/support.ts): 20 idle, 4 stalled (held 1-3 s), one level of 4 real-time
 * sessions of one one-sentence turn over a 1 s ramp, short RSS settling; any session that
 * fails fails the run.
 *
 * Sessions that the server drops right after the upgrade (close 1006 before any frame: seen
 * under CPU contention with concurrent upgrades) are reopened, as a client would, and counted
 * on the line.
 */
import { type ChildProcess, fork } from "node:child_process"
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { availableParallelism, loadavg, tmpdir } from "node:os"
import * as path from "node:path"
import { cpuSeconds, freePort, root, serviceArgs, shellNumber, smoke, startProcess } from "./support.ts"
import type { Command, Reply, SessionResult } from "./ttsWsLoad.ts"
import WebSocket from "ws"

const fmt = (n: number, digits = 2) => n.toFixed(digits)
const progress = (what: string) => console.error(`  … ${what}`)
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/** File descriptors the service gets: 1,000 idle sessions plus everything else, with room. */
const WANTED_FDS = 65536

/**
 * bench/support's `startService`, with the open-file limit of the service raised to
 * min(65536, hard limit) by the shell that execs it; `fdLimit` is what the service got.
 */
export async function startServiceWithFds(env: Record<string, string>) {
  const soft = shellNumber("ulimit -n")
  const hard = shellNumber("ulimit -Hn")
  const limit = Math.max(soft, Math.min(WANTED_FDS, hard))
  const port = await freePort()
  const dataDir = mkdtempSync(path.join(tmpdir(), "speech-bench-"))
  const child = await startProcess(
    "sh",
    ["-c", `ulimit -n ${Number.isFinite(limit) ? limit : "unlimited"} && exec "$0" "$@"`, process.execPath, ...serviceArgs()],
    { PORT: String(port), HOST: "127.0.0.1", DATA_DIR: dataDir, LOG_LEVEL: "info", ...env },
    /"msg":"listening"/
  )
  const limits = readFileSync(`/proc/${child.pid}/limits`, "utf8")
  const fdLimit = Number(/^Max open files\s+(\d+)/m.exec(limits)?.[1] ?? NaN)
  return { child, port, site: `http://127.0.0.1:${port}`, dataDir, fdLimit, shellSoftLimit: soft }
}

// ---------------------------------------------------------------------------------------------
// The service process, seen from outside
// ---------------------------------------------------------------------------------------------

/** A field of /proc/<pid>/status, kB. */
const statusKb = (pid: number, field: "VmRSS" | "VmHWM"): number =>
  Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1])

/**
 * Waits until VmRSS has stayed within 2 MB for 3 s (V8 shrinks its heap some time after a burst
 * of work, which would otherwise land inside a measurement), at most `safetyMs`.
 */
const settledRss = async (pid: number, safetyMs = 20_000) => {
  if (smoke) safetyMs = Math.min(safetyMs, 1000)
  const started = performance.now()
  const window: Array<{ at: number; kb: number }> = []
  for (;;) {
    const now = performance.now()
    window.push({ at: now, kb: statusKb(pid, "VmRSS") })
    while (window[0]!.at < now - 3000) window.shift()
    const kbs = window.map((w) => w.kb)
    const steady = now - started >= 3000 && Math.max(...kbs) - Math.min(...kbs) <= 2048
    if (steady || now - started >= safetyMs) return { steady, waitedS: (now - started) / 1000 }
    await sleep(250)
  }
}

/** Median VmRSS over a few samples, kB: one GC mid-read does not decide the number. */
const steadyRssKb = async (pid: number, samples = 5, everyMs = 200) => {
  const values: Array<number> = []
  for (let i = 0; i < samples; i++) {
    values.push(statusKb(pid, "VmRSS"))
    await sleep(everyMs)
  }
  return values.sort((a, b) => a - b)[Math.floor(samples / 2)]!
}

const metrics = async (port: number) => {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()
  const read = (name: string) => Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "m").exec(text)?.[1] ?? 0)
  return {
    active: read("tts_ws_sessions_active"),
    backpressured: read("tts_ws_sessions_backpressured"),
    buffered: read("tts_ws_buffered_bytes"),
    synthesized: read("tts_ws_chunks_synthesized_total")
  }
}

const until = async <A>(read: () => Promise<A>, ok: (a: A) => boolean, safetyMs = 60_000, everyMs = 100): Promise<A> => {
  const deadline = performance.now() + safetyMs
  for (;;) {
    const a = await read()
    if (ok(a) || performance.now() > deadline) return a
    await sleep(everyMs)
  }
}

// ---------------------------------------------------------------------------------------------
// Load generator children
// ---------------------------------------------------------------------------------------------

class Generator {
  private constructor(private readonly child: ChildProcess) {}

  static async start(): Promise<Generator> {
    const child = fork(path.join(root, "bench", "ttsWsLoad.ts"), [], {
      cwd: root,
      execArgv: ["--import", "tsx"],
      stdio: ["ignore", "inherit", "inherit", "ipc"]
    })
    await new Promise<void>((resolve, reject) => {
      child.once("message", () => resolve())
      child.once("exit", (code) => reject(new Error(`ws load generator exited with ${code}`)))
    })
    return new Generator(child)
  }

  ask<K extends Reply["kind"]>(command: Extract<Command, { kind: K }>): Promise<Extract<Reply, { kind: K }>> {
    return new Promise((resolve, reject) => {
      const onExit = (code: number | null) => reject(new Error(`ws load generator exited with ${code} during "${command.kind}"`))
      this.child.once("exit", onExit)
      this.child.once("message", (reply: Extract<Reply, { kind: K }>) => {
        this.child.off("exit", onExit)
        resolve(reply)
      })
      this.child.send(command)
    })
  }

  stop(): void {
    if (this.child.exitCode === null) this.child.kill()
  }
}

// ---------------------------------------------------------------------------------------------
// The measurements
// ---------------------------------------------------------------------------------------------

export interface WsBenchOptions {
  /** The raw engine's first block for `PROBE_SENTENCE`, p50 ms: what a flush's first audio is compared with. */
  readonly rawFirstBlockMs: number
  readonly child: ChildProcess
  readonly port: number
  readonly apiKey: string
  readonly voiceId: string
  readonly fdLimit: number
  readonly shellSoftLimit: number
}

/** Sessions kept at real time: no underrun, and the audio covered its wall time within this. */
const ALLOWANCE_S = 0.1
const PASS_SHARE = 0.99
const TURNS = smoke ? 1 : 2
const SENTENCES_PER_TURN = smoke ? 1 : 2
/** About one turn's audio (2 sentences of 60-120 characters at ~14 characters per second). */
const RAMP_MS = smoke ? 1000 : 12_000

/** A voice agent's sentence, as an LLM would finish one before flushing (65 characters). */
export const PROBE_SENTENCE = "Selge, ma vaatan kohe üle ja helistan teile homme hommikul tagasi."

/**
 * A voice agent's flush on a quiet socket: one stream-input session sends the sentence with
 * `flush: true`, `runs` times, and times the first audio frame after each send (ms).
 */
async function flushToFirstAudio(url: string, apiKey: string, runs: number): Promise<Array<number>> {
  const ws = new WebSocket(url, { headers: { "xi-api-key": apiKey } })
  await new Promise((resolve, reject) => {
    ws.once("open", resolve)
    ws.once("error", reject)
  })
  const times: Array<number> = []
  try {
    ws.send(JSON.stringify({ text: " " }))
    for (let i = 0; i < runs; i++) {
      const started = performance.now()
      let first = NaN
      await new Promise<void>((resolve, reject) => {
        const onMessage = (data: Buffer) => {
          const frame = JSON.parse(data.toString()) as { audio?: string | null; flushDone?: boolean; error?: unknown }
          if (frame.error !== undefined) reject(new Error(`flush probe: ${JSON.stringify(frame.error)}`))
          if (typeof frame.audio === "string" && Number.isNaN(first)) first = performance.now() - started
          if (frame.flushDone === true) {
            ws.off("message", onMessage)
            resolve()
          }
        }
        ws.on("message", onMessage)
        ws.send(JSON.stringify({ text: `${PROBE_SENTENCE} `, flush: true }))
      })
      times.push(first)
    }
  } finally {
    ws.close()
  }
  return times
}

function percentile(values: ReadonlyArray<number>, q: number): number {
  if (values.length === 0) return NaN
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!
}

const isRealTime = (s: SessionResult) =>
  s.error === undefined && s.turns.every((t) => t.underruns === 0 && t.audioS >= t.spanS - ALLOWANCE_S)

export async function webSocketBench(options: WsBenchOptions) {
  const { child, port, apiKey, voiceId } = options
  const pid = child.pid!
  const cores = availableParallelism()
  const url = `ws://127.0.0.1:${port}/api/v1/text-to-speech/${voiceId}/stream-input`
  const generators = await Promise.all([Generator.start(), Generator.start()])
  const idle = () => until(() => metrics(port), (m) => m.active === 0, 30_000)
  try {
    console.log("")
    console.log(
      `websocket stream-input, voice ${voiceId}, audio as sent (pcm 24 kHz); sessions from 2 load-generator processes that share the ${cores} CPU(s) with the service; ` +
        `load average ${fmt(loadavg()[0]!)} at the start`
    )

    // ---- 0. a voice agent's flush → first audio, on a quiet service ------------------------------
    progress("websocket: flush → first audio")
    await idle()
    const flushes = await flushToFirstAudio(url, apiKey, smoke ? 3 : 60)
    const flushP50 = percentile(flushes.slice(smoke ? 0 : 10), 0.5)
    console.log(
      `  flush → first audio frame, one session, "${PROBE_SENTENCE.slice(0, 24)}…" (${PROBE_SENTENCE.length} characters): ` +
        `p50 ${fmt(flushP50, 1)} ms, p99 ${fmt(percentile(flushes.slice(smoke ? 0 : 10), 0.99), 1)} ms; raw engine's first block p50 ${fmt(options.rawFirstBlockMs, 1)} ms ` +
        `= ${fmt(flushP50 / options.rawFirstBlockMs, 1)}x  (target: < 10 ms on a quiet machine)`
    )

    // ---- 1. memory per idle session -----------------------------------------------------------
    const IDLE = smoke ? 20 : 1000
    progress(`websocket: ${IDLE} idle sessions`)
    await idle()
    const settledBefore = await settledRss(pid)
    const before = await steadyRssKb(pid)
    const opened = await Promise.all(generators.map((g) => g.ask({ kind: "idle", url, apiKey, count: IDLE / generators.length })))
    const open = opened.reduce((a, r) => a + r.open, 0)
    const failed = opened.reduce((a, r) => a + r.failed, 0)
    const dropped = opened.reduce((a, r) => a + r.dropped, 0)
    const active = (await until(() => metrics(port), (m) => m.active >= open, 10_000)).active
    if (smoke && (open !== IDLE || failed > 0)) throw new Error(`smoke: ${open} of ${IDLE} idle sessions opened, ${failed} failed`)
    const settledAfter = await settledRss(pid, 10_000)
    const after = await steadyRssKb(pid)
    await Promise.all(generators.map((g) => g.ask({ kind: "release" })))
    const perSessionKb = (after - before) / open
    console.log(
      `  memory per idle session at ${open} sessions: ${fmt(perSessionKb, 1)} KB (service VmRSS ${fmt(before / 1024, 1)} → ${fmt(after / 1024, 1)} MB, ` +
        `median of 5 reads each${settledBefore.steady && settledAfter.steady ? ", each once RSS had settled" : ", RSS had NOT settled: noisy"}; ${active} sessions active on the server` +
        `${failed > 0 ? `, ${failed} failed to open` : ""}${dropped > 0 ? `, ${dropped} dropped by the server right after the upgrade and reopened` : ""}; ` +
        `open-file limit ${options.fdLimit}${options.fdLimit > options.shellSoftLimit ? ` (raised from ${options.shellSoftLimit})` : " (the hard limit; enough)"})  (target < 100 KB)`
    )

    // ---- 2. clients that stop reading ----------------------------------------------------------
    const STALLED = smoke ? 4 : 50
    const SENTENCES = smoke ? 10 : 40
    progress(`websocket: ${STALLED} sessions that stop reading`)
    await idle()
    await settledRss(pid, 10_000)
    const hwmReset = (() => {
      try {
        writeFileSync(`/proc/${pid}/clear_refs`, "5")
        return true
      } catch {
        return false
      }
    })()
    const rss0 = await steadyRssKb(pid, 3, 100)
    const hwm0 = statusKb(pid, "VmHWM")
    const stalled = await Promise.all(generators.map((g) => g.ask({ kind: "stall", url, apiKey, count: STALLED / generators.length, sentences: SENTENCES, framesBeforePause: 2 })))
    const paused = stalled.reduce((a, r) => a + r.paused, 0)
    const pausedAt = performance.now()
    // Hold them paused for at least 10 s, and until the service has stopped synthesizing for
    // them (every session waiting on its client, the counter still for 2 s), at most 30 s.
    let peakBuffered = 0
    let peakBackpressured = 0
    let allBackpressuredAfterS = NaN
    const still: Array<{ at: number; synthesized: number }> = []
    const quietFor2s = () => {
      const last = still.at(-1)!
      return last.at - still[0]!.at >= 2000 && still.find((s) => s.at >= last.at - 2000)!.synthesized === last.synthesized
    }
    for (;;) {
      const m = await metrics(port)
      const now = performance.now()
      peakBuffered = Math.max(peakBuffered, m.buffered)
      peakBackpressured = Math.max(peakBackpressured, m.backpressured)
      if (m.backpressured >= paused && Number.isNaN(allBackpressuredAfterS)) allBackpressuredAfterS = (now - pausedAt) / 1000
      still.push({ at: now, synthesized: m.synthesized })
      const quiet = m.backpressured >= paused && quietFor2s()
      if ((now - pausedAt >= (smoke ? 1000 : 10_000) && quiet) || now - pausedAt >= (smoke ? 3000 : 30_000)) break
      await sleep(250)
    }
    const end = await metrics(port)
    const heldS = (performance.now() - pausedAt) / 1000
    const hwm1 = statusKb(pid, "VmHWM")
    const rssEnd = statusKb(pid, "VmRSS")
    await Promise.all(generators.map((g) => g.ask({ kind: "release" })))
    const mb = (kb: number) => `${fmt(kb / 1024, 1)} MB`
    const stallFailed = stalled.reduce((a, r) => a + r.failed, 0)
    const stallDropped = stalled.reduce((a, r) => a + r.dropped, 0)
    if (smoke && (paused !== STALLED || stallFailed > 0)) throw new Error(`smoke: ${paused} of ${STALLED} stalling sessions paused, ${stallFailed} failed`)
    console.log(
      `  ${paused} of ${STALLED} clients sent ${SENTENCES} sentences and flush, read 2 audio frames, then stopped reading for ${fmt(heldS, 1)} s` +
        `${stallFailed > 0 ? ` (${stallFailed} failed to start)` : ""}${stallDropped > 0 ? ` (${stallDropped} dropped right after the upgrade and reopened)` : ""}:`
    )
    console.log(
      `    service peak memory growth ${hwmReset ? `${mb(hwm1 - rss0)} = ${mb((hwm1 - rss0) / Math.max(1, paused))} per client (VmHWM reset to ${mb(hwm0)} → ${mb(hwm1)})` : "unknown (VmHWM could not be reset)"}; ` +
        `VmRSS ${mb(rss0)} before, ${mb(rssEnd)} at the end of the pause`
    )
    console.log(
      `    tts_ws_buffered_bytes peak ${mb(peakBuffered / 1024)} = ${mb(peakBuffered / 1024 / Math.max(1, paused))} per client (bound: 256 KiB + one frame), ` +
        `${mb(end.buffered / 1024)} at the end; tts_ws_sessions_backpressured peak ${peakBackpressured}, ${end.backpressured} at the end` +
        `${Number.isNaN(allBackpressuredAfterS) ? " (not all sessions reached backpressure)" : ` (all from ${fmt(allBackpressuredAfterS, 1)} s on, once the kernel's socket buffers had filled)`}; ` +
        `synthesis ${quietFor2s() ? "stopped" : "still running"} at the end`
    )

    // ---- 3. concurrent real-time sessions ------------------------------------------------------
    const levels = (process.env.BENCH_WS_LEVELS ?? (smoke ? "4" : "300,400,500")).split(",").map(Number)
    console.log(
      `  concurrent real-time sessions: ${TURNS} turns of ${SENTENCES_PER_TURN} sentences each, 1-4 words every 50-100 ms, starts spread over ${RAMP_MS / 1000} s; ` +
        `real time = no underrun after a turn's first audio and audio >= wall time - ${ALLOWANCE_S * 1000} ms; a level passes at >= ${PASS_SHARE * 100} %`
    )
    const tried = new Map<number, boolean>()
    const runLevel = async (n: number) => {
      progress(`websocket: ${n} real-time sessions`)
      await idle()
      const indexes = Array.from({ length: n }, (_, i) => i)
      const cpu0 = cpuSeconds(pid)
      const started = performance.now()
      const replies = await Promise.all(generators.map((g, k) =>
        g.ask({
          kind: "realtime",
          url,
          apiKey,
          sessions: indexes.filter((i) => i % generators.length === k),
          rampMs: RAMP_MS,
          turns: TURNS,
          sentencesPerTurn: SENTENCES_PER_TURN
        })))
      const wallS = (performance.now() - started) / 1000
      const serviceCores = (cpuSeconds(pid) - cpu0) / wallS
      const generatorCores = replies.reduce((a, r) => a + r.cpuMs, 0) / 1000 / wallS
      const sessions = replies.flatMap((r) => r.results)
      const ok = sessions.filter(isRealTime).length
      const errors = sessions.filter((s) => s.error !== undefined)
      const underran = sessions.filter((s) => s.error === undefined && s.turns.some((t) => t.underruns > 0)).length
      const dropped = sessions.reduce((a, s) => a + s.dropped, 0)
      const turns = sessions.flatMap((s) => s.turns)
      const firstAudio = turns.map((t) => t.firstAudioMs)
      const headroom = turns.filter((t) => t.spanS > 0).map((t) => t.minHeadroomMs)
      const audioS = turns.reduce((a, t) => a + t.audioS, 0)
      const pass = ok / n >= PASS_SHARE
      tried.set(n, pass)
      // Smoke: whether they kept real time on a busy CI machine is not the question; that every
      // session ran its turns to the end is.
      if (smoke && (errors.length > 0 || sessions.length !== n)) throw new Error(`smoke: ${errors.length} of ${n} real-time sessions failed (${errors[0]?.error})`)
      console.log(
        `    ${String(n).padStart(4)} sessions: ${String(ok).padStart(4)} real time (${fmt((100 * ok) / n, 1)} %) ${pass ? "pass" : "FAIL"}; ` +
          `${underran} underran${errors.length > 0 ? `, ${errors.length} failed (${errors[0]!.error})` : ""}` +
          `${dropped > 0 ? `, ${dropped} reconnects after a drop right after the upgrade` : ""}; ` +
          `first audio per turn p50 ${fmt(percentile(firstAudio, 0.5), 0)} ms, p99 ${fmt(percentile(firstAudio, 0.99), 0)} ms; ` +
          `least audio buffered ahead p1 ${fmt(percentile(headroom, 0.01), 0)} ms; ${fmt(audioS / wallS, 0)} s of audio per wall second; ` +
          `CPU: service ${fmt(serviceCores)}, generators ${fmt(generatorCores)} of ${cores} cores`
      )
      return pass
    }
    let lastPass = 0
    let firstFail: number | undefined
    for (const n of levels) {
      if (await runLevel(n)) lastPass = n
      else {
        firstFail = n
        break
      }
    }
    if (firstFail !== undefined && !smoke) {
      const middle = Math.round((lastPass + firstFail) / 2 / 10) * 10
      if (middle > lastPass && middle < firstFail && (await runLevel(middle))) lastPass = middle
    }
    const failedLevels = [...tried].filter(([, p]) => !p).map(([n]) => n)
    const bound = failedLevels.length === 0 ? ` (every level tried held; the limit is higher)` : `, ${Math.min(...failedLevels)} did not`
    console.log(
      `  largest N with >= ${PASS_SHARE * 100} % of sessions real time: ${lastPass}${bound}  (target >= 400; the load generators ran on the same ${cores} cores; ` +
        `load average ${fmt(loadavg()[0]!)} at the end)`
    )
  } finally {
    for (const g of generators) g.stop()
  }
}
