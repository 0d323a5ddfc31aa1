/**
 * The WebSocket load generator of bench/tts, run as child processes (fork, IPC) so that the
 * service's own process is what the bench measures; the children still share the machine's
 * cores with it, and report their CPU time so the bench can say how much they took.
 *
 * Commands from the parent, one at a time, each answered by one message:
 * - `realtime`: voice-agent sessions on `stream-input`. Each opens at its start time, sends the
 *   init frame, then speaks `turns` turns: a turn is an LLM reply streamed token by token (1-4
 *   words every 50-100 ms, sentences of 60-120 characters), then `{flush: true}`; the next turn
 *   starts once the listener has heard the previous one (its virtual playback clock has run out)
 *   plus a short pause. After the last turn's flushDone: `{text: ""}`, `isFinal`, close 1000.
 *   Per turn a virtual player starts at the first audio frame; an underrun is an audio frame
 *   that arrives after the audio before it would have finished playing. A connection the server
 *   drops right after the upgrade, before any frame, is reopened (counted).
 * - `idle`: opens sessions that send only the init frame and keeps them open.
 * - `stall`: opens sessions that send a long text and flush, read the first audio frames, then
 *   stop reading (socket paused) and stay so.
 * - `release`: closes every socket `idle` or `stall` left open.
 *
 * Text is generated from a seeded PRNG per session, so every run sends the same words.
 *
 * No smoke mode of its own: `bench/tts.ts --smoke` drives it with small commands (20 idle,
 * 4 stalled, 4 real-time sessions), so CI runs it end to end.
 */
import WebSocket from "ws"

export interface RealtimeCommand {
  readonly kind: "realtime"
  readonly url: string
  readonly apiKey: string
  /** Global session indexes this child runs (they seed the text and the start time). */
  readonly sessions: ReadonlyArray<number>
  /** Sessions start uniformly at random within this window, ms. */
  readonly rampMs: number
  readonly turns: number
  readonly sentencesPerTurn: number
}
export interface IdleCommand {
  readonly kind: "idle"
  readonly url: string
  readonly apiKey: string
  readonly count: number
}
export interface StallCommand {
  readonly kind: "stall"
  readonly url: string
  readonly apiKey: string
  readonly count: number
  readonly sentences: number
  /** Audio frames read before the socket is paused. */
  readonly framesBeforePause: number
}
export type Command = RealtimeCommand | IdleCommand | StallCommand | { readonly kind: "release" }

export interface TurnResult {
  /** From the turn's first text frame to its first audio frame, ms. */
  readonly firstAudioMs: number
  readonly audioS: number
  /** From the turn's first audio frame to its last, s. */
  readonly spanS: number
  readonly underruns: number
  /** How late the latest frame came after the buffered audio ran out, ms (0: never). */
  readonly worstLateMs: number
  /** Least audio buffered ahead of the player when a later frame of the turn arrived, ms. */
  readonly minHeadroomMs: number
}
export interface SessionResult {
  readonly index: number
  /** Undefined when the session ran to `isFinal` and a 1000 close. */
  readonly error?: string
  readonly turns: ReadonlyArray<TurnResult>
  /** Connections the server dropped right after the upgrade, before any frame; each was reopened. */
  readonly dropped: number
}
export type Reply =
  | { readonly kind: "realtime"; readonly results: ReadonlyArray<SessionResult>; readonly cpuMs: number }
  | { readonly kind: "idle"; readonly open: number; readonly failed: number; readonly dropped: number; readonly cpuMs: number }
  | { readonly kind: "stall"; readonly paused: number; readonly failed: number; readonly dropped: number; readonly audioFrames: number; readonly cpuMs: number }
  | { readonly kind: "release"; readonly closed: number }

/** s16le mono at the WebSocket's fixed rate. */
const BYTES_PER_SECOND = 24000 * 2

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, ms)))

/** Mulberry32: small, seeded, good enough to pick words. */
const prng = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = seed
  t = Math.imul(t ^ (t >>> 15), t | 1)
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

const WORDS = (
  "täna homme eile hommikul õhtul linn maja aed mets meri järv tee auto rong buss ilm päike vihm tuul lumi " +
  "inimesed lapsed sõbrad kolleegid pere ema isa vanaema raamat kiri töö kool pood turg leib piim kohv tee " +
  "kiiresti aeglaselt vaikselt rõõmsalt kindlasti võib-olla tõesti muidugi juba veel alati mõnikord " +
  "läks tuli nägi ütles arvas tegi võttis andis kirjutas luges rääkis küsis vastas ootas jooksis kõndis " +
  "suur väike uus vana ilus hea halb soe külm pikk lühike tähtis huvitav lihtne keeruline valmis"
).split(" ")
const ENDINGS = [".", ".", ".", "!", "?"]

/** One sentence of 60-120 characters. */
const sentence = (random: () => number): string => {
  const target = 60 + Math.floor(random() * 61)
  let s = ""
  for (;;) {
    const word = WORDS[Math.floor(random() * WORDS.length)]!
    const next = s === "" ? word.charAt(0).toUpperCase() + word.slice(1) : `${s}${random() < 0.12 ? "," : ""} ${word}`
    if (next.length + 1 > target) break
    s = next
  }
  return s + ENDINGS[Math.floor(random() * ENDINGS.length)]!
}

/** Text as an LLM emits it: pieces of 1-4 words, each ending in its trailing space. */
const tokens = (text: string, random: () => number): Array<string> => {
  const words = text.split(" ")
  const out: Array<string> = []
  for (let i = 0; i < words.length;) {
    const n = 1 + Math.floor(random() * 4)
    out.push(words.slice(i, i + n).join(" ") + " ")
    i += n
  }
  return out
}

/** Seconds of audio in an audio frame, read without parsing its JSON (`{"audio":"<base64>",...`). */
const AUDIO_PREFIX = Buffer.from('{"audio":"')
const audioSeconds = (data: Buffer): number | undefined => {
  if (data.length < AUDIO_PREFIX.length || data.compare(AUDIO_PREFIX, 0, AUDIO_PREFIX.length, 0, AUDIO_PREFIX.length) !== 0) return undefined
  const end = data.indexOf(0x22, AUDIO_PREFIX.length)
  const b64 = end - AUDIO_PREFIX.length
  const pad = (data[end - 1] === 0x3d ? 1 : 0) + (data[end - 2] === 0x3d ? 1 : 0)
  return ((b64 / 4) * 3 - pad) / BYTES_PER_SECOND
}

/** A socket whose frames are consumed by whoever waits for them, with audio counted on arrival. */
class Session {
  readonly ws: WebSocket
  /** Called for every audio frame with its arrival time and length. */
  onAudio: (at: number, seconds: number) => void = () => {}
  private controlWaiters: Array<{ readonly key: string; readonly resolve: () => void }> = []
  error: string | undefined
  closeCode: number | undefined
  closeReason = ""
  private closeWaiters: Array<() => void> = []
  readonly opened: Promise<void>
  private openedAt = NaN
  frames = 0

  constructor(url: string, apiKey: string) {
    this.ws = new WebSocket(url, { headers: { "xi-api-key": apiKey }, perMessageDeflate: false })
    this.opened = new Promise((resolve, reject) => {
      this.ws.once("open", () => {
        this.openedAt = performance.now()
        // ws reports a reset connection only as close 1006; keep the cause for the result.
        ;(this.ws as unknown as { _socket: import("node:net").Socket })._socket.on("error", (e) => {
          this.error ??= `connection error after ${Math.round(performance.now() - this.openedAt)} ms: ${e.message}`
        })
        resolve()
      })
      this.ws.once("unexpected-response", (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)))
      this.ws.once("error", (e) => reject(e))
    })
    this.opened.catch(() => {})
    this.ws.on("error", (e) => {
      this.error ??= `socket error: ${e.message}`
    })
    this.ws.on("message", (data: Buffer) => {
      const at = performance.now()
      this.frames++
      const seconds = audioSeconds(data)
      if (seconds !== undefined) return this.onAudio(at, seconds)
      const frame = JSON.parse(data.toString("utf8")) as Record<string, unknown>
      if (frame.error !== undefined) this.error ??= `error frame: ${JSON.stringify(frame.error)}`
      for (const key of ["flushDone", "isFinal"]) {
        if (frame[key] !== true) continue
        const waiter = this.controlWaiters.find((w) => w.key === key)
        if (waiter !== undefined) {
          this.controlWaiters = this.controlWaiters.filter((w) => w !== waiter)
          waiter.resolve()
        }
      }
    })
    this.ws.on("close", (code, reason) => {
      this.closeCode = code
      this.closeReason = reason.toString()
      if (code === 1006) this.error ??= `connection lost (1006) ${Math.round(performance.now() - this.openedAt)} ms after opening, ${this.frames} frames received`
      for (const w of this.closeWaiters) w()
      this.closeWaiters = []
      for (const w of this.controlWaiters) w.resolve()
      this.controlWaiters = []
    })
  }

  /**
   * The server closed the connection without a close frame before sending any frame. Seen under
   * CPU contention with concurrent upgrades: uWS closes a just-upgraded socket with 1006 within
   * a few ms of `open`. A client would reconnect, and so do these sessions (counted).
   */
  get droppedAtOpen(): boolean {
    return this.closeCode === 1006 && this.frames === 0
  }

  send(frame: unknown): void {
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(frame))
  }

  /** Resolves on the control frame, or on close (the caller checks `closeCode`). */
  control(key: "flushDone" | "isFinal"): Promise<void> {
    if (this.closeCode !== undefined) return Promise.resolve()
    return new Promise((resolve) => this.controlWaiters.push({ key, resolve }))
  }

  closed(): Promise<void> {
    if (this.closeCode !== undefined) return Promise.resolve()
    return new Promise((resolve) => this.closeWaiters.push(resolve))
  }
}

/** Reopens a session the server dropped right after its upgrade, at most this many times. */
const MAX_REOPENS = 3

async function realtimeSession(command: RealtimeCommand, index: number, epoch: number): Promise<SessionResult> {
  const random = prng(0x5eed + index * 7919)
  const startAt = epoch + random() * command.rampMs
  const turnsText = Array.from({ length: command.turns }, () =>
    Array.from({ length: command.sentencesPerTurn }, () => sentence(random)).join(" "))
  await sleep(startAt - performance.now())
  for (let dropped = 0; ; dropped++) {
    const result = await realtimeAttempt(command, index, turnsText, random, dropped)
    if (result !== "dropped") return result
    if (dropped === MAX_REOPENS) return { index, error: `dropped right after the upgrade ${dropped + 1} times`, turns: [], dropped: dropped + 1 }
  }
}

async function realtimeAttempt(
  command: RealtimeCommand,
  index: number,
  turnsText: ReadonlyArray<string>,
  random: () => number,
  dropped: number
): Promise<SessionResult | "dropped"> {
  const turns: Array<TurnResult> = []
  const session = new Session(command.url, command.apiKey)
  const fail = (error: string): SessionResult | "dropped" => {
    session.ws.terminate()
    return session.droppedAtOpen ? "dropped" : { index, error, turns, dropped }
  }
  try {
    await session.opened
  } catch (e) {
    return fail(`open: ${(e as Error).message}`)
  }
  session.send({ text: " " })
  for (const text of turnsText) {
    const started = performance.now()
    let firstAt = NaN
    let lastAt = NaN
    let playEnd = 0
    let audioS = 0
    let underruns = 0
    let worstLateMs = 0
    let minHeadroomMs = Infinity
    session.onAudio = (at, seconds) => {
      if (Number.isNaN(firstAt)) {
        firstAt = at
        playEnd = at
      } else {
        const headroom = playEnd - at
        minHeadroomMs = Math.min(minHeadroomMs, headroom)
        if (headroom < 0) {
          underruns++
          worstLateMs = Math.max(worstLateMs, -headroom)
        }
      }
      playEnd = Math.max(playEnd, at) + seconds * 1000
      lastAt = at
      audioS += seconds
    }
    const pieces = tokens(text, random)
    for (const piece of pieces) {
      session.send({ text: piece })
      await sleep(50 + random() * 50)
    }
    session.send({ flush: true })
    await Promise.race([session.control("flushDone"), sleep(120_000)])
    if (session.closeCode !== undefined || session.error !== undefined) return fail(session.error ?? `closed ${session.closeCode} ${session.closeReason} mid-turn ${turns.length + 1}`.replace("  ", " "))
    turns.push({
      firstAudioMs: firstAt - started,
      audioS,
      spanS: (lastAt - firstAt) / 1000,
      underruns,
      worstLateMs,
      minHeadroomMs: Number.isFinite(minHeadroomMs) ? minHeadroomMs : 0
    })
    // The listener hears the turn out, thinks briefly, and the agent answers again. After the
    // last turn the session ends at once: all of its audio has arrived.
    if (turns.length < turnsText.length) await sleep(playEnd - performance.now() + 300 + random() * 700)
  }
  session.onAudio = () => {}
  session.send({ text: "" })
  await Promise.race([session.control("isFinal"), sleep(60_000)])
  await Promise.race([session.closed(), sleep(10_000)])
  if (session.closeCode !== 1000) return fail(session.error ?? `close ${session.closeCode ?? "missing"} instead of 1000`)
  return { index, turns, dropped }
}

/** Sockets left open by `idle` and `stall` until `release`. */
let held: Array<Session> = []

/**
 * Opens `count` sessions, at most `parallel` handshakes at a time; `each` runs on every open
 * session and throws when it fails. A session the server drops right after its upgrade is
 * replaced (counted in `dropped`).
 */
async function openMany(command: { url: string; apiKey: string; count: number }, parallel: number, each: (s: Session) => Promise<void>) {
  let next = 0
  let failed = 0
  let dropped = 0
  await Promise.all(Array.from({ length: parallel }, async () => {
    while (next < command.count) {
      next++
      for (let attempt = 0; ; attempt++) {
        const session = new Session(command.url, command.apiKey)
        try {
          await session.opened
          held.push(session)
          await each(session)
          break
        } catch (e) {
          session.ws.terminate()
          held = held.filter((h) => h !== session)
          if (session.droppedAtOpen && attempt < MAX_REOPENS) {
            dropped++
            continue
          }
          failed++
          if (failed <= 3) console.error(`ws load generator: a session failed: ${(e as Error).message}`)
          break
        }
      }
    }
  }))
  return { failed, dropped }
}

const cpuMs = (since: NodeJS.CpuUsage) => {
  const u = process.cpuUsage(since)
  return (u.user + u.system) / 1000
}

async function run(command: Command): Promise<Reply> {
  const cpu = process.cpuUsage()
  switch (command.kind) {
    case "realtime": {
      const epoch = performance.now()
      const results = await Promise.all(command.sessions.map((i) => realtimeSession(command, i, epoch)))
      return { kind: "realtime", results, cpuMs: cpuMs(cpu) }
    }
    case "idle": {
      const { failed, dropped } = await openMany(command, 32, async (s) => {
        s.send({ text: " " })
        // Drops come within a few ms of the upgrade; give them the time to show.
        await sleep(100)
        if (s.closeCode !== undefined) throw new Error(s.error ?? `closed ${s.closeCode}`)
      })
      return { kind: "idle", open: held.filter((s) => s.ws.readyState === WebSocket.OPEN).length, failed, dropped, cpuMs: cpuMs(cpu) }
    }
    case "stall": {
      let audioFrames = 0
      const { failed, dropped } = await openMany(command, 16, async (s) => {
        const random = prng(0xba11 + held.length)
        const text = Array.from({ length: command.sentences }, () => sentence(random)).join(" ") + " "
        let frames = 0
        const enough = new Promise<void>((resolve) => {
          s.onAudio = () => {
            audioFrames++
            if (++frames === command.framesBeforePause) {
              s.ws.pause()
              resolve()
            }
          }
        })
        s.send({ text: " " })
        // Frames of about 1,000 characters, well under the server's 64 KiB frame limit.
        for (let i = 0; i < text.length; i += 1000) s.send({ text: text.slice(i, i + 1000) })
        s.send({ flush: true })
        await Promise.race([enough, s.closed()])
        if (s.closeCode !== undefined) throw new Error(s.error ?? "closed")
      })
      return { kind: "stall", paused: held.filter((s) => s.ws.isPaused).length, failed, dropped, audioFrames, cpuMs: cpuMs(cpu) }
    }
    case "release": {
      const closed = held.length
      for (const s of held) s.ws.terminate()
      held = []
      return { kind: "release", closed }
    }
  }
}

process.on("message", (command: Command) => {
  run(command).then(
    (reply) => process.send!(reply),
    (e: unknown) => {
      console.error("ws load generator failed:", e)
      process.exit(1)
    }
  )
})
process.send!({ kind: "ready" })
