/**
 * bench/stt: speech-to-text through the whole service against the raw engine, measured in one
 * run on the same machine, the service running as a child process (bench/support.ts).
 *
 * (a) Real-time factor (wall time / audio time) of one `POST /v1/speech-to-text` on ~60 s of
 *     Flite speech (four voices, everyday sentences, short pauses), end to end (upload, ffmpeg
 *     decode, Silero VAD, PocketSphinx per speech segment, JSON), with WORKERS=1, against the
 *     raw engines in this process on the same PCM (the upload decoded by the same ffmpeg):
 *     Silero VAD, then PocketSphinx on each of the same segments one after the other, which is
 *     what one worker does. Raw and service rounds alternate and the best of each counts, so
 *     load from elsewhere on a shared machine hits both. Target: ratio ≤ 1.1.
 * (b) RTF of a batch of concurrent requests (wall time / audio seconds of the whole batch) at
 *     WORKERS=1 and WORKERS=<all CPUs>, and of one request (its segments spread over workers).
 * (c) Peak RSS growth of the server process while a 100 MB upload streams in, sampled from
 *     /proc/<pid>/status VmRSS every 5 ms (VmHWM read before and after): a 10^8-byte file sent
 *     with Content-Length, stored to disk (then 415: it is zeros, not media), and a 160 MiB
 *     chunked body refused with 413 once the limit is passed. Target: growth under 64 MB.
 *
 * The upload is Ogg/Opus at 24 kbit/s (under 256 KiB) by default: a WAV body large enough to
 * pause the socket gets its connection cut by uWS 10 s after the body ends (runtime/
 * RequestBody.ts resumes the socket after the last chunk, which re-arms uWS's idle timer), so
 * any request slower than 10 s would fail. BENCH_INPUT=wav sends the WAV instead.
 *
 * (d) WER on real human speech (pocketsphinx-testdata, wideband and telephone band), the service
 *     against Debian's pocketsphinx_continuous on the same audio (bench/realSpeechWer.ts).
 *
 * Run: npm run bench:stt. Knobs: BENCH_ROUNDS (default 3), BENCH_BATCH (concurrent requests in
 * (b), default 2 × max workers), BENCH_MAX_WORKERS (default CPU count), BENCH_INPUT (ogg | wav).
 * `--smoke` (BENCH_SMOKE=1): 4 s of speech, one round, one worker, a 2 MB upload in (c).
 */
import { SENTENCES, VOICES } from "./speechText.ts"
import { execFileSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import * as net from "node:net"
import { availableParallelism, tmpdir } from "node:os"
import * as path from "node:path"
import { PocketSphinxAsr } from "../engines/asr/PocketSphinxAsr.ts"
import { concatInt16, floatToInt16 } from "../engines/audio/Pcm.ts"
import { encodeWav } from "../engines/audio/Wav.ts"
import { decodeMedia, ffmpegBinary } from "../engines/media/MediaDecoder.ts"
import { FliteTts } from "../engines/tts/FliteTts.ts"
import { SileroVad } from "../engines/vad/SileroVad.ts"
import { measureRealSpeechWer, printRealSpeechWer, realRecordings } from "./realSpeechWer.ts"
import { root, smoke, startService, stop } from "./support.ts"

const rounds = Number(process.env.BENCH_ROUNDS ?? (smoke ? 1 : 3))
const maxWorkers = Number(process.env.BENCH_MAX_WORKERS ?? (smoke ? 1 : availableParallelism()))
const batch = Number(process.env.BENCH_BATCH ?? (smoke ? 2 : 2 * maxWorkers))
const input = process.env.BENCH_INPUT === "wav" ? "wav" : "ogg"
const MiB = 1024 * 1024


/** ~60 s of 16 kHz speech: sentences in turn by the four voices, 400-900 ms pauses. */
const makeAudio = async (targetSeconds: number): Promise<Int16Array> => {
  const flite = await FliteTts.load()
  const parts: Array<Int16Array> = [new Int16Array(8000)]
  let samples = 8000
  for (let i = 0; samples < targetSeconds * 16000; i++) {
    const r = await flite.synthesize({ text: SENTENCES[i % SENTENCES.length]!, voice: { engine: "flite", language: "en", variant: VOICES[i % VOICES.length]!, pitch: 1, rate: 1 }, speed: 1 })
    const pcm = floatToInt16(r.samples)
    const pause = new Int16Array(Math.round((0.4 + 0.1 * (i % 6)) * 16000))
    parts.push(pcm, pause)
    samples += pcm.length + pause.length
  }
  flite.dispose()
  return concatInt16(parts)
}

const spoken = await makeAudio(smoke ? 4 : 60)
const scratch = mkdtempSync(path.join(tmpdir(), "bench-stt-"))
const wavFile = path.join(scratch, "speech.wav")
writeFileSync(wavFile, encodeWav(spoken, 16000))
const oggFile = path.join(scratch, "speech.ogg")
execFileSync(ffmpegBinary(), ["-nostdin", "-loglevel", "error", "-y", "-i", wavFile, "-c:a", "libopus", "-b:a", "24k", oggFile])
const upload = new Uint8Array(readFileSync(input === "wav" ? wavFile : oggFile))
// What the service gets after its own decoding: the raw engines run on exactly this PCM.
const pcm = (await decodeMedia(input === "wav" ? wavFile : oggFile)).pcm
rmSync(scratch, { recursive: true, force: true })
const audioSeconds = pcm.length / 16000

// ---- the raw engines, in this process, on the same PCM ------------------------------------

const vad = await SileroVad.load()
const asr = await PocketSphinxAsr.load()
const rawOnce = async () => {
  const t0 = performance.now()
  const { segments } = await vad.segments(pcm)
  const t1 = performance.now()
  const words: Array<string> = []
  for (const s of segments) {
    const part = pcm.slice(Math.floor((s.startMs * 16000) / 1000), Math.min(pcm.length, Math.ceil((s.endMs * 16000) / 1000)))
    words.push(...(await asr.recognize(part)).words.map((w) => w.text))
  }
  const t2 = performance.now()
  return { vadMs: t1 - t0, asrMs: t2 - t1, segments: segments.length, text: words.join(" ") }
}
await rawOnce() // warm

/**
 * The raw engine runs on this thread and blocks its event loop for ~10 s. Meanwhile the server
 * closes the idle keep-alive connection fetch pooled (uWS: 10 s idle), but fetch only learns of
 * it once the loop runs: a request made straight after would be written into the closed socket
 * (`fetch failed`, `write EPIPE`, the failure this bench showed after its first round). Letting
 * the loop run first (undici's idle timers have ~1 s resolution) drops the dead connection.
 */
const letSocketsSettle = () => new Promise((resolve) => setTimeout(resolve, 1_500))

// ---- the service ----------------------------------------------------------------------------

const withService = async <A>(workers: number, use: (s: { site: string; port: number; pid: number; apiKey: string }) => Promise<A>): Promise<A> => {
  const service = await startService({ WORKERS: String(workers) }) // info level: readiness is its "listening" line
  // The server's own warnings and errors, so a failed request in the run can be explained.
  service.child.stdout!.on("data", (d: Buffer) => {
    for (const line of d.toString().split("\n")) if (/"level":"(warn|error|fatal)"/.test(line)) console.error(`  [server] ${line.slice(0, 2000)}`)
  })
  let stopping = false
  service.child.once("exit", (code, signal) => {
    if (!stopping) console.error(`  [server] exited during the run: code ${code}, signal ${signal}`)
  })
  try {
    const created = execFileSync(process.execPath, ["--import", "tsx", "runtime/admin.ts", "create-user", "--name", "bench", "--credits", "1000000000", "--json"], {
      cwd: root,
      env: { ...process.env, DATA_DIR: service.dataDir },
      encoding: "utf8"
    })
    const { api_key: apiKey } = JSON.parse(created.trim().split("\n").at(-1)!) as { api_key: string }
    return await use({ site: service.site, port: service.port, pid: service.child.pid!, apiKey })
  } finally {
    stopping = true
    await stop(service.child)
  }
}

const transcribe = async (site: string, apiKey: string, audio: Uint8Array): Promise<{ ms: number; text: string }> => {
  const form = new FormData()
  form.append("model_id", "scribe_v1")
  form.append("file", new Blob([audio], { type: "application/octet-stream" }), `bench.${input}`)
  const t0 = performance.now()
  const res = await fetch(`${site}/api/v1/speech-to-text`, { method: "POST", headers: { "xi-api-key": apiKey }, body: form })
  const body = (await res.json()) as { text?: string }
  const ms = performance.now() - t0
  if (res.status !== 200) throw new Error(`speech-to-text answered ${res.status}: ${JSON.stringify(body)}`)
  return { ms, text: body.text ?? "" }
}

const batchRtf = async (site: string, apiKey: string): Promise<number> => {
  const t0 = performance.now()
  await Promise.all(Array.from({ length: batch }, () => transcribe(site, apiKey, upload)))
  return (performance.now() - t0) / 1000 / (batch * audioSeconds)
}

const kb = (pid: number, field: "VmRSS" | "VmHWM"): number => {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"))
  return Number(m?.[1] ?? NaN) * 1024
}

/**
 * Streams a multipart body holding `fileBytes` zero bytes to the service over a raw socket
 * (Content-Length, or chunked without it), stopping when the answer arrives; samples the
 * server's RSS meanwhile.
 */
const uploadAndSample = (port: number, pid: number, apiKey: string, fileBytes: number, chunked: boolean) =>
  new Promise<{ status: string; sentBytes: number; rssBefore: number; rssPeak: number; hwmBefore: number; hwmAfter: number }>((resolve, reject) => {
    const boundary = "----bench-stt-upload"
    const head = Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="model_id"\r\n\r\nscribe_v1\r\n` +
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`
    )
    const tail = Buffer.from(`\r\n--${boundary}--\r\n`)
    const block = Buffer.alloc(MiB)
    const frame = (b: Buffer) => (chunked ? Buffer.concat([Buffer.from(`${b.length.toString(16)}\r\n`), b, Buffer.from("\r\n")]) : b)
    const framedBlock = frame(block)
    const rssBefore = kb(pid, "VmRSS")
    const hwmBefore = kb(pid, "VmHWM")
    let rssPeak = rssBefore
    const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, kb(pid, "VmRSS"))), 5)
    const socket = net.connect(port, "127.0.0.1")
    let sent = 0
    let answered = false
    let response = ""
    socket.on("error", () => {}) // EPIPE/ECONNRESET after a 413 closes the connection
    socket.on("data", (d: Buffer) => {
      answered = true
      response += d.toString("latin1")
      if (/\r\n\r\n[\s\S]*\}$/.test(response)) socket.destroy()
    })
    socket.on("close", () => {
      clearInterval(sampler)
      const status = response.split("\r\n")[0] ?? ""
      if (status === "") return reject(new Error("no answer to the upload"))
      resolve({ status, sentBytes: sent, rssBefore, rssPeak, hwmBefore, hwmAfter: kb(pid, "VmHWM") })
    })
    const length = head.length + fileBytes + tail.length
    socket.write(
      `POST /api/v1/speech-to-text HTTP/1.1\r\nHost: 127.0.0.1\r\nxi-api-key: ${apiKey}\r\n` +
        `Content-Type: multipart/form-data; boundary=${boundary}\r\n` +
        (chunked ? "Transfer-Encoding: chunked\r\n\r\n" : `Content-Length: ${length}\r\n\r\n`)
    )
    socket.write(frame(head))
    let left = fileBytes
    const pump = () => {
      while (!answered && left > 0 && !socket.destroyed) {
        const n = Math.min(MiB, left)
        left -= n
        sent += n
        const ok = socket.write(n === MiB ? framedBlock : frame(block.subarray(0, n)))
        if (!ok) return void socket.once("drain", pump)
      }
      if (left === 0 && !answered && !socket.destroyed) socket.write(chunked ? Buffer.concat([frame(tail), Buffer.from("0\r\n\r\n")]) : tail)
    }
    pump()
  })

const fmt = (x: number, digits = 3) => x.toFixed(digits)
const mb = (bytes: number) => `${(bytes / MiB).toFixed(1)} MB`

console.log(`bench/stt: ${fmt(audioSeconds, 1)} s of Flite speech (${VOICES.join(", ")}), uploaded as ${input === "wav" ? "WAV" : "Ogg/Opus 24 kbit/s"} (${(upload.length / 1024).toFixed(0)} KiB); ${availableParallelism()} CPUs; best of ${rounds} rounds`)

const results: { single: Record<number, number>; batch: Record<number, number> } = { single: {}, batch: {} }
for (const workers of [...new Set([1, maxWorkers])]) {
  await withService(workers, async ({ site, port, pid, apiKey }) => {
    await transcribe(site, apiKey, upload) // warm: each worker loads its models on first use
    await batchRtf(site, apiKey)
    const singles: Array<number> = []
    const raws: Array<Awaited<ReturnType<typeof rawOnce>>> = []
    let serverText = ""
    for (let i = 0; i < rounds; i++) {
      if (workers === 1) {
        raws.push(await rawOnce())
        await letSocketsSettle()
      }
      const r = await transcribe(site, apiKey, upload)
      singles.push(r.ms / 1000 / audioSeconds)
      serverText = r.text
    }
    results.single[workers] = Math.min(...singles)
    const batches: Array<number> = []
    for (let i = 0; i < rounds; i++) batches.push(await batchRtf(site, apiKey))
    results.batch[workers] = Math.min(...batches)

    if (workers === 1) {
      const raw = raws.reduce((a, b) => (a.vadMs + a.asrMs <= b.vadMs + b.asrMs ? a : b))
      const rawRtf = (raw.vadMs + raw.asrMs) / 1000 / audioSeconds
      const server = results.single[1]!
      console.log(`(a) one request, WORKERS=1, against the raw engines in-process on one thread`)
      console.log(`    raw: Silero VAD RTF ${fmt(raw.vadMs / 1000 / audioSeconds, 4)} + PocketSphinx RTF ${fmt(raw.asrMs / 1000 / audioSeconds)} over ${raw.segments} segments = ${fmt(rawRtf)} (rounds: ${raws.map((x) => fmt((x.vadMs + x.asrMs) / 1000 / audioSeconds)).join(", ")})`)
      console.log(`    service end to end: RTF ${fmt(server)} (rounds: ${singles.map((x) => fmt(x)).join(", ")})`)
      console.log(`    ratio service / raw (VAD + ASR)   ${fmt(server / rawRtf, 2)}   (target <= 1.10)`)
      console.log(`    ratio service / raw ASR alone     ${fmt(server / (raw.asrMs / 1000 / audioSeconds), 2)}`)
      console.log(`    same words as the raw engines: ${serverText.trim() === raw.text.trim() ? "yes" : "NO"}`)
    }

    if (workers === maxWorkers) {
      // (c) memory while a large upload streams in; after the transcriptions above (warm heap).
      await new Promise((r) => setTimeout(r, 1000))
      const accepted = await uploadAndSample(port, pid, apiKey, smoke ? 2_000_000 : 100_000_000, false)
      if (!/^HTTP\/1\.1 415/.test(accepted.status)) throw new Error(`the zero-filled upload got ${accepted.status}, expected 415`)
      const cases: Array<readonly [string, typeof accepted]> = [[`${smoke ? "2 MB" : "100 MB (10^8 bytes)"} file, Content-Length (stored to disk, then 415: zeros are not media)`, accepted]]
      if (!smoke) cases.push(["160 MiB chunked body (413 past 100 MiB)", await uploadAndSample(port, pid, apiKey, 160 * MiB, true)])
      console.log(`(c) server RSS while a large upload streams in (WORKERS=${workers}; target growth < 64 MB)`)
      for (const [label, u] of cases) {
        console.log(`    ${label}: ${u.status.replace(/^HTTP\/1\.1 /, "")}`)
        console.log(`      peak VmRSS growth ${mb(u.rssPeak - u.rssBefore)} (from ${mb(u.rssBefore)}), VmHWM ${mb(u.hwmBefore)} -> ${mb(u.hwmAfter)}, client sent ${mb(u.sentBytes)} before the answer`)
      }
    }
  })
}
asr.dispose()
await vad.dispose()
console.log(`(b) batch of ${batch} concurrent requests, RTF = wall / (batch x audio); lower is better`)
for (const w of Object.keys(results.batch).map(Number)) {
  console.log(`    WORKERS=${w}: batch RTF ${fmt(results.batch[w]!)}   one request alone: RTF ${fmt(results.single[w]!)}`)
}
if (results.batch[maxWorkers] !== undefined && maxWorkers > 1) {
  console.log(`    speed-up 1 -> ${maxWorkers} workers: batch ${fmt(results.batch[1]! / results.batch[maxWorkers]!, 2)}x, one request ${fmt(results.single[1]! / results.single[maxWorkers]!, 2)}x`)
}

// (d) real human speech: the service's WER against the raw engine's on the same recordings.
const recordings = smoke ? realRecordings().slice(0, 1) : realRecordings()
printRealSpeechWer(await withService(1, ({ site, apiKey }) => measureRealSpeechWer(site, apiKey, recordings)))
