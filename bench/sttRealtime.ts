/**
 * bench/sttRealtime: realtime speech-to-text (`GET /v1/speech-to-text/realtime`, issue 39's
 * "Numbers to reach") through the whole service, beside the raw PocketSphinx streaming decoder,
 * in one run on the same machine. The service runs as a child process (bench/support.ts,
 * WORKERS = the CPU count, STT_SESSIONS_PER_WORKER raised so the ramp below, not the default
 * limit, finds the capacity); the client is a thin `ws` client (bench/sttRealtimeClient.ts).
 *
 * Audio: Debian's pocketsphinx-testdata, the five LibriVox readings and the five `cards`
 * utterances (two speakers, 1-7 s each), streamed at 1× real time in 100 ms chunks, each
 * recording one utterance (a manual commit after its last chunk) unless said otherwise.
 * Word end times come from the synchronous recognizer (PocketSphinxAsr.recognize, in this
 * process) on the same audio.
 *
 * (a) Partial latency: end of a word's audio → first partial_transcript holding it, p50/p95,
 *     at 1 session, 10 sessions and the capacity of (c). Includes up to 100 ms of chunking (a
 *     word's end is sent with the chunk it ends in).
 * (b) Commit latency in `vad` mode (vad_silence_threshold_secs 1.0, 2 s of silence after each
 *     recording): end of the silence threshold (the last sync word's end + 1.0 s) →
 *     committed_transcript, p50/p95; and the manual commit (commit frame → committed_transcript).
 * (c) Capacity: concurrent sessions held at 1× real time, ramped 2, 4, 6, … (each session 3
 *     recordings): a level is held when no session got an error and the p95 partial latency
 *     stays under 1.5 s (a decoder falling behind real time accumulates lag past that within
 *     the ~10 s each session streams). Beside it the raw decoder's capacity on the same cores:
 *     CPU count / its CPU seconds per audio second doing the same work as the service (live
 *     pass + final pass, bench/sttStreamingRaw.ts), measured in this process before the service
 *     starts.
 *     Also by CPU: the service process's CPU seconds (every thread) per audio second streamed
 *     at 10 sessions, against the raw figure: what whole cores would hold, which the ramp on a
 *     shared machine cannot show (it only gets what other load leaves of the cores).
 * (d) Accuracy: WER against the testdata's transcriptions of the committed transcripts and of
 *     `POST /v1/speech-to-text` on the same audio, at pcm_16000 and ulaw_8000 (the same μ-law
 *     bytes, in a WAV container, to the synchronous endpoint).
 * (e) Memory: the service's RSS before and with 50 idle sessions open (session_started, no
 *     audio), and per idle session from 120 of them.
 *
 * Run: npm run bench:sttRealtime. `--smoke`: one short recording, levels 1 and 2, 4 idle sessions.
 */
import { execFileSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { availableParallelism, loadavg, tmpdir } from "node:os"
import * as path from "node:path"
import { PocketSphinxAsr } from "../engines/asr/PocketSphinxAsr.ts"
import { ffmpegBinary } from "../engines/media/MediaDecoder.ts"
import { edits, realRecordings, syncTranscript, words as normalize } from "./realSpeechWer.ts"
import { type Clip, type Format, openSession, partialLatencies, PCM16K, percentile, streamRealTime, ULAW8K } from "./sttRealtimeClient.ts"
import { LIBRIVOX_IDS, librivoxPcm, rawStreamingRtf, wavInt16 } from "./sttStreamingRaw.ts"
import { benchApiKey, cpuSeconds, databaseLabel, root, rssMb, smoke, startService, stop } from "./support.ts"

const cores = availableParallelism()
const IDLE = smoke ? 4 : 50
const IDLE_MORE = smoke ? 8 : 120
const MAX_LEVEL = smoke ? 2 : 40
const HELD_P95_MS = 1500
const rev = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: root, encoding: "utf8" }).trim()
// The service is built from the working tree: say when it is not the commit named.
const dirty = execFileSync("git", ["status", "--porcelain", "--", "actors", "engines", "protocol", "runtime", "storage"], { cwd: root, encoding: "utf8" }).trim() !== ""
const load0 = loadavg()

const recordings = realRecordings().filter((r) => !smoke || r.name === "librivox 0880")
const scratch = mkdtempSync(path.join(tmpdir(), "bench-stt-realtime-"))
const ffmpeg = (args: ReadonlyArray<string>) => execFileSync(ffmpegBinary(), ["-nostdin", "-loglevel", "error", "-y", ...args])

// Sync word ends, and each recording as both formats' bytes.
const asr = await PocketSphinxAsr.load()
const clips = await Promise.all(recordings.map(async (r, i) => {
  const pcm = wavInt16(r.file)
  const words = (await asr.recognize(pcm)).words.flatMap((w) => normalize(w.text.replace(/\(\d+\)$/, "")).map((text) => ({ text, endMs: w.endMs })))
  const ulawFile = path.join(scratch, `${i}.ulaw`)
  const ulawWav = path.join(scratch, `${i}-ulaw.wav`)
  ffmpeg(["-i", r.file, "-ar", "8000", "-f", "mulaw", "-c:a", "pcm_mulaw", ulawFile])
  ffmpeg(["-f", "mulaw", "-ar", "8000", "-ac", "1", "-i", ulawFile, "-c:a", "pcm_mulaw", ulawWav])
  const pcm16 = Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength)
  return { ...r, ulawWav, pcm: { name: r.name, bytes: pcm16, words } as Clip, ulaw: { name: r.name, bytes: readFileSync(ulawFile), words } as Clip }
}))
asr.dispose()
const audioSeconds = clips.reduce((s, c) => s + c.pcm.bytes.length / 32000, 0)

// The raw decoder's CPU per audio second, before the service runs (so nothing of ours competes).
const raw = await rawStreamingRtf(smoke ? [librivoxPcm("0880")] : LIBRIVOX_IDS.map(librivoxPcm), smoke ? 1 : 3)
const rawCapacity = cores / raw.liveAndFinal

const service = await startService({ WORKERS: String(cores), STT_SESSIONS_PER_WORKER: "64" })
service.child.stdout!.on("data", (d: Buffer) => {
  for (const line of d.toString().split("\n")) if (/"level":"(warn|error|fatal)"/.test(line)) console.error(`  [server] ${line.slice(0, 600)}`)
})
const { port, site } = service
const pid = service.child.pid!
const apiKey = benchApiKey(service.dataDir)

interface LevelResult {
  readonly sessions: number
  readonly latencies: Array<number>
  missed: number
  audioSeconds: number
  /** The service process's CPU seconds (all threads) while the level ran. */
  cpuSeconds: number
  readonly errors: Array<string>
  readonly manualCommits: Array<number>
  readonly committed: Map<string, string>
}

/**
 * `n` sessions at once, session i starting i × 100/n ms after the first (so chunks do not all
 * land together) and streaming `perSession` clips from clip i on, one manual commit each.
 */
const runLevel = async (n: number, perSession: number, format: Format, pick: (c: (typeof clips)[number]) => Clip): Promise<LevelResult> => {
  const result: LevelResult = { sessions: n, latencies: [], missed: 0, audioSeconds: 0, cpuSeconds: 0, errors: [], manualCommits: [], committed: new Map() }
  const cpu0 = cpuSeconds(pid)
  await Promise.all(Array.from({ length: n }, async (_, i) => {
    let s
    try {
      s = await openSession(port, apiKey, format)
      let t0 = performance.now() + (i * 100) / n
      for (let k = 0; k < perSession; k++) {
        const clip = pick(clips[(i + k) % clips.length]!)
        await streamRealTime(s, format, clip.bytes, t0)
        const sent = performance.now()
        s.chunk(Buffer.alloc(0), true)
        const before = s.messages.length
        const done = await s.wait((m) => m.type === "committed_transcript" && s!.messages.indexOf(m) >= before)
        result.manualCommits.push(done.at - sent)
        result.committed.set(clip.name, done.text)
        result.audioSeconds += clip.bytes.length / (format.bytesPer100Ms * 10)
        const p = partialLatencies(s.messages.slice(0, s.messages.indexOf(done)), clip, t0)
        result.latencies.push(...p.latencies)
        result.missed += p.missed
        s.messages.length = 0
        t0 = performance.now()
      }
    } catch (e) {
      result.errors.push(String(e))
    } finally {
      await s?.close()
    }
  }))
  result.cpuSeconds = cpuSeconds(pid) - cpu0
  return result
}

/** VAD commits: one session, each clip followed by 2 s of silence; threshold end → committed. */
const vadCommits = async (): Promise<Array<number>> => {
  const s = await openSession(port, apiKey, PCM16K, { commit_strategy: "vad", vad_silence_threshold_secs: "1" })
  const out: Array<number> = []
  try {
    for (const c of clips) {
      const t0 = performance.now()
      const lastEnd = c.pcm.words.at(-1)?.endMs ?? 0
      await streamRealTime(s, PCM16K, Buffer.concat([c.pcm.bytes, Buffer.alloc(2 * 32000)]), t0)
      const commit = await s.wait((m) => m.type === "committed_transcript" && m.at >= t0 + lastEnd)
      out.push(commit.at - (t0 + lastEnd + 1000))
      s.messages.length = 0
    }
  } finally {
    await s.close()
  }
  return out
}

const ms = (x: number) => `${x.toFixed(0)} ms`
const latencyLine = (r: LevelResult) =>
  `${String(r.sessions).padStart(3)} sessions: partial latency p50 ${ms(percentile(r.latencies, 0.5))}, p95 ${ms(percentile(r.latencies, 0.95))} (${r.latencies.length} words, ${r.missed} in no partial)${r.errors.length > 0 ? `, ${r.errors.length} failed: ${r.errors[0]}` : ""}`
const held = (r: LevelResult) => r.errors.length === 0 && percentile(r.latencies, 0.95) <= HELD_P95_MS

try {
  // Warm-up, not counted: the first utterance on each worker thread loads its decoders.
  await runLevel(cores, 1, PCM16K, (c) => c.pcm)
  const one = await runLevel(1, clips.length, PCM16K, (c) => c.pcm)
  if (one.errors.length > 0) throw new Error(`one session failed: ${one.errors.join("; ")}`)
  const ten = smoke ? one : await runLevel(10, 3, PCM16K, (c) => c.pcm)
  const vad = await vadCommits()
  let capacity: LevelResult | undefined
  const ramp: Array<string> = []
  for (let n = 2; n <= MAX_LEVEL; n += 2) {
    const r = await runLevel(n, smoke ? 1 : 3, PCM16K, (c) => c.pcm)
    if (smoke && r.errors.length > 0) throw new Error(`${n} sessions failed: ${r.errors.join("; ")}`)
    ramp.push(`${n}${held(r) ? "" : " (not held)"}`)
    if (!held(r)) break
    capacity = r
  }
  const ulaw = await runLevel(smoke ? 1 : 5, smoke ? 1 : 2, ULAW8K, (c) => c.ulaw)
  if (ulaw.errors.length > 0) throw new Error(`μ-law sessions failed: ${ulaw.errors.join("; ")}`)

  // (d) WER, each condition over every clip.
  const wer = async (committed: Map<string, string>, file: (c: (typeof clips)[number]) => string) => {
    let n = 0, rt = 0, sync = 0
    for (const c of clips) {
      const ref = normalize(c.reference)
      n += ref.length
      rt += edits(ref, normalize(committed.get(c.name) ?? ""))
      sync += edits(ref, normalize(await syncTranscript(site, apiKey, file(c))))
    }
    return { realtime: (100 * rt) / n, sync: (100 * sync) / n, words: n }
  }
  const wide = await wer(one.committed, (c) => c.file)
  const phone = await wer(ulaw.committed, (c) => c.ulawWav)

  // (e) Memory.
  // 50 sessions move RSS by less than its noise in a process of ~1.5 GB (GC, PGlite), so the
  // per-session figure comes from IDLE_MORE sessions (the worker limit is 2 × 64).
  const rss0 = rssMb(pid)
  const idle = []
  for (let i = 0; i < IDLE; i++) idle.push(await openSession(port, apiKey, PCM16K))
  const rss50 = rssMb(pid)
  for (let i = IDLE; i < IDLE_MORE; i++) idle.push(await openSession(port, apiKey, PCM16K))
  const rssMore = rssMb(pid)
  await Promise.all(idle.map((s) => s.close()))

  const load1 = loadavg()
  console.log(`bench/sttRealtime at ${rev}${dirty ? " + uncommitted changes" : ""}: ${clips.length} recordings (${audioSeconds.toFixed(1)} s), ${cores} cores, WORKERS=${cores}, ${databaseLabel()}; load average ${load0[0]!.toFixed(1)} at the start, ${load1[0]!.toFixed(1)} at the end${smoke ? " (smoke: the numbers mean nothing)" : ""}`)
  console.log("(a) partial latency (end of a word's audio → first partial holding it), plain ws client, 100 ms chunks at 1× real time")
  console.log(`    ${latencyLine(one)}   target p50 ≤ 300 ms, p95 ≤ 600 ms`)
  console.log(`    ${latencyLine(ten)}`)
  console.log(`    ${capacity === undefined ? "no level held" : latencyLine(capacity)}   (capacity)`)
  console.log(`(b) commit latency, vad mode (end of the 1.0 s silence threshold → committed_transcript): p50 ${ms(percentile(vad, 0.5))}, p95 ${ms(percentile(vad, 0.95))} over ${vad.length}   target p50 ≤ 100 ms`)
  console.log(`    manual commit (commit frame → committed_transcript), 1 session: p50 ${ms(percentile(one.manualCommits, 0.5))}, p95 ${ms(percentile(one.manualCommits, 0.95))}`)
  const held_ = capacity?.sessions ?? 0
  console.log(`(c) capacity: the service held ${held_} real-time sessions (ramp: ${ramp.join(", ")}); raw decoder ${rawCapacity.toFixed(1)} on ${cores} cores (${raw.liveAndFinal.toFixed(3)} CPU s per audio s, live + final pass; live only ${raw.live.toFixed(3)}): ratio ${(held_ / rawCapacity).toFixed(2)}   target ≥ 0.85`)
  const perStream = ten.cpuSeconds / ten.audioSeconds
  console.log(`    by CPU: the service spent ${perStream.toFixed(3)} CPU s (all its threads) per audio s at ${ten.sessions} sessions: ${(cores / perStream).toFixed(1)} streams on ${cores} whole cores, ${(raw.liveAndFinal / perStream).toFixed(2)} of raw`)
  console.log(`(d) WER vs the transcriptions (${wide.words} words): pcm_16000 realtime ${wide.realtime.toFixed(1)} % vs synchronous ${wide.sync.toFixed(1)} % (${(wide.realtime - wide.sync).toFixed(1)} points); ulaw_8000 realtime ${phone.realtime.toFixed(1)} % vs synchronous ${phone.sync.toFixed(1)} % (${(phone.realtime - phone.sync).toFixed(1)} points)   target within 2 points`)
  console.log(`(e) memory: service RSS ${rss0.toFixed(0)} MB, ${rss50.toFixed(0)} MB with ${IDLE} idle sessions open, ${rssMore.toFixed(0)} MB with ${IDLE_MORE}: ${(((rssMore - rss0) * 1024) / IDLE_MORE).toFixed(0)} KB per idle session`)
} finally {
  await stop(service.child)
  rmSync(scratch, { recursive: true, force: true })
}
