/**
 * Speech-to-text does no work before payment and holds bounded memory (issue 9, item 3), seen
 * from outside through HTTP and the Prometheus counters the pipeline exposes:
 *  - a caller without credits gets 402 before ffmpeg runs (`stt_decodes_started_total` stays);
 *  - the largest buffer the pipeline holds (`stt_buffer_bytes_peak`) does not grow with the
 *    length of the audio: 2 and 10 min of silence (4 and 20 VAD blocks) stay under one fixed
 *    bound, while the whole decoded PCM would be 3.84 and 19.2 MB;
 *  - with STT_MAX_CONCURRENT_DECODES=1, three concurrent requests never decode two at once
 *    (`stt_decodes_active_peak`).
 * RSS is measured by bench/sttMemory.ts, not here (no timing or RSS thresholds in tests).
 */
import { existsSync, readdirSync, readFileSync } from "node:fs"
import * as path from "node:path"
import t from "tap"
import { ffmpeg, scratchDir } from "../engines/asr/speechFixtures.ts"
import { startTestService } from "../support/service.ts"

const dir = scratchDir(t, "speech-stt-limits-")
const service = await startTestService(t, { WORKERS: "1", STT_MAX_CONCURRENT_DECODES: "1" })

/** Silence of `seconds` as 16 kHz mono FLAC (2 h of it is ~1.3 MB). */
const silenceFlac = (seconds: number): Uint8Array => {
  const file = path.join(dir, `silence-${seconds}.flac`)
  ffmpeg(["-f", "lavfi", "-i", "anullsrc=r=16000:cl=mono", "-t", String(seconds), "-c:a", "flac", file])
  return readFileSync(file)
}

const stt = (apiKey: string, bytes: Uint8Array) => {
  const form = new FormData()
  form.append("model_id", "scribe_v1")
  form.append("file", new Blob([bytes], { type: "audio/flac" }), "silence.flac")
  return fetch(`${service.base}/speech-to-text`, { method: "POST", headers: { "xi-api-key": apiKey }, body: form })
}

/** One sample of the Prometheus text; the STT metrics are listed from start-up, so absent is a failure. */
const metric = async (name: string): Promise<number> => {
  const text = await (await fetch(`${service.siteUrl}/metrics`)).text()
  const line = text.split("\n").find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`))
  if (line === undefined) throw new Error(`/metrics does not list ${name}`)
  return Number(line.slice(line.lastIndexOf(" ") + 1))
}

const twoHours = silenceFlac(7200)

t.test("no credits: 402 quota_exceeded before ffmpeg is started", async (t) => {
  const broke = await service.newUser(0)
  const before = await metric("stt_decodes_started_total")
  const res = await stt(broke.apiKey, twoHours)
  t.equal(res.status, 402)
  const body = (await res.json()) as { detail: { status: string; message: string } }
  t.equal(body.detail.status, "quota_exceeded")
  t.equal(await metric("stt_decodes_started_total"), before, "no decode was started")
  // Three at once, as in the report that found it: all refused, none decoded.
  const three = await Promise.all([0, 1, 2].map(() => stt(broke.apiKey, twoHours)))
  t.same(three.map((r) => r.status), [402, 402, 402])
  await Promise.all(three.map((r) => r.arrayBuffer()))
  t.equal(await metric("stt_decodes_started_total"), before, "still no decode started")
})

t.test("decoded audio memory does not grow with the audio's length", async (t) => {
  const user = await service.newUser(1_000_000)
  const started = await metric("stt_decodes_started_total")
  const peaks: Array<number> = []
  for (const seconds of [120, 600]) {
    const res = await stt(user.apiKey, silenceFlac(seconds))
    t.equal(res.status, 200, `${seconds} s of silence is transcribed`)
    const body = (await res.json()) as { text: string; words: Array<unknown> }
    t.equal(body.text, "", "silence has no words")
    peaks.push(await metric("stt_buffer_bytes_peak"))
  }
  t.equal(await metric("stt_decodes_started_total"), started + 2, "each request started one decode")
  // 1 MiB: one VAD block of ~30 s (0.96 MB) is the largest buffer; the whole PCM of 10 min is 19.2 MB.
  const bound = 1024 * 1024
  t.ok(peaks[0]! > 0, `peak reported: ${peaks[0]} B`)
  t.ok(peaks[1]! <= bound, `10 min of silence: largest buffer ${peaks[1]} B ≤ ${bound} B`)
  t.equal(peaks[1], peaks[0], "the same peak for 2 and for 10 min")
})

t.test("STT_MAX_CONCURRENT_DECODES=1: concurrent requests decode one at a time", async (t) => {
  const user = await service.newUser(1_000_000)
  const flac = silenceFlac(600)
  const before = await metric("stt_decodes_started_total")
  const answers = await Promise.all([0, 1, 2].map(() => stt(user.apiKey, flac)))
  const statuses = answers.map((r) => r.status)
  await Promise.all(answers.map((r) => r.arrayBuffer()))
  // With one permit and four waiting places, three requests all fit: none is refused.
  t.same(statuses, [200, 200, 200])
  t.equal(await metric("stt_decodes_started_total"), before + 3)
  t.equal(await metric("stt_decodes_active_peak"), 1, "never two decodes at once")
  t.equal(await metric("stt_decodes_active"), 0, "none left running")
  t.equal(await metric("stt_decodes_waiting"), 0, "none left waiting")
})

t.test("no spill file is left behind", async (t) => {
  const user = await service.newUser(1000)
  const notMedia = await stt(user.apiKey, new TextEncoder().encode("this is not audio at all\n".repeat(100)))
  t.equal(notMedia.status, 415, "a failed decode")
  await notMedia.arrayBuffer()
  const tmp = path.join(service.dataDir, "tmp")
  const left = existsSync(tmp) ? readdirSync(tmp).filter((f) => f.endsWith(".pcm")) : []
  t.same(left, [], "DATA_DIR/tmp holds no decoded PCM after the requests")
})
