/**
 * Uploads as untrusted input, seen through POST /v1/speech-to-text (issue 38 items 9 and 10):
 *  - a concat list or an HLS playlist uploaded as audio (bare, or behind an ID3 tag so that it is
 *    sniffed as mp3) gets a clean 4xx in the spec's error body, and no file outside the upload is
 *    read: a canary WAV beside the uploads (where other callers' files are) is never decoded, so
 *    no transcript of it comes back, and a canary text file's content never appears;
 *  - a caller who cannot pay for a file's length gets 402 before ffmpeg decodes it (the decode
 *    counter stays), and a file whose header understates its length is stopped once its audio
 *    outgrows the balance (`stt_decoded_audio_seconds_total` grows by ~10 s, not 60 s).
 */
import { readFileSync, writeFileSync, mkdirSync } from "node:fs"
import * as path from "node:path"
import t from "tap"
import { encodeWav } from "../../engines/audio/Wav.ts"
import { ffmpeg, scratchDir } from "../engines/asr/speechFixtures.ts"
import { startTestService } from "../support/service.ts"

const dir = scratchDir(t, "speech-stt-untrusted-")
const service = await startTestService(t, { WORKERS: "1" })

// Canaries where uploads are stored while they are decoded (DATA_DIR/tmp).
const uploads = path.join(service.dataDir, "tmp")
mkdirSync(uploads, { recursive: true })
const secret = "CANARY-7f3a9c-not-for-your-eyes"
writeFileSync(path.join(uploads, "canary.txt"), `${secret}\n`)
const tone = new Int16Array(48_000).map((_, i) => Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / 16000)))
writeFileSync(path.join(uploads, "canary.wav"), encodeWav(tone, 16000))

const id3 = Buffer.from([0x49, 0x44, 0x33, 4, 0, 0, 0, 0, 0, 0]) // "ID3" v2.4, empty: sniffed as mp3
const playlist = `#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:3,\n${path.join(uploads, "canary.wav")}\n#EXTINF:3,\n${path.join(uploads, "canary.txt")}\n#EXT-X-ENDLIST\n`
const concat = "ffconcat version 1.0\nfile 'canary.wav'\nfile 'canary.txt'\nfile '/etc/passwd'\n"
const hostile: ReadonlyArray<readonly [string, Buffer, number, string]> = [
  // One safe (relative) name only: ffmpeg's concat demuxer refuses the whole list at an absolute one.
  ["concat list of the canary behind an ID3 tag", Buffer.concat([id3, Buffer.from("ffconcat version 1.0\nfile 'canary.wav'\n")]), 400, "invalid_media"],
  ["concat list behind an ID3 tag", Buffer.concat([id3, Buffer.from(concat)]), 400, "invalid_media"],
  ["HLS playlist behind an ID3 tag", Buffer.concat([id3, Buffer.from(playlist)]), 400, "invalid_media"],
  ["bare concat list", Buffer.from(concat), 415, "unsupported_media_type"],
  ["bare HLS playlist", Buffer.from(playlist), 415, "unsupported_media_type"]
]

const stt = (apiKey: string, bytes: Uint8Array, filename = "audio.mp3") => {
  const form = new FormData()
  form.append("model_id", "scribe_v1")
  form.append("file", new Blob([bytes], { type: "audio/mpeg" }), filename)
  return fetch(`${service.base}/speech-to-text`, { method: "POST", headers: { "xi-api-key": apiKey }, body: form })
}

const metric = async (name: string): Promise<number> => {
  const text = await (await fetch(`${service.siteUrl}/metrics`)).text()
  const line = text.split("\n").find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`))
  if (line === undefined) throw new Error(`/metrics does not list ${name}`)
  return Number(line.slice(line.lastIndexOf(" ") + 1))
}

t.test("playlists and concat lists uploaded as audio: a clean 4xx, nothing outside the upload read", async (t) => {
  const user = await service.newUser(100_000)
  for (const [label, bytes, status, code] of hostile) {
    const res = await stt(user.apiKey, bytes)
    const text = await res.text()
    t.equal(res.status, status, `${label}: ${status}`)
    const body = JSON.parse(text) as { detail?: { status?: string; message?: string } }
    t.equal(body.detail?.status, code, `${label}: the spec's error body (${code})`)
    t.notOk(text.includes(secret), `${label}: the canary text never appears`)
    t.notOk(text.includes("root:"), `${label}: /etc/passwd never appears`)
    t.notOk(res.ok, `${label}: no transcript of the canary tone`)
  }
})

// 60 s of tone as mp3, and the same file with its LAME/Xing frame count set to 10 (ffmpeg: 0.36 s).
const honestFile = path.join(dir, "honest.mp3")
ffmpeg(["-f", "lavfi", "-i", "sine=frequency=300:duration=60", "-ar", "16000", "-ac", "1", "-b:a", "32k", honestFile])
const honest = readFileSync(honestFile)
const liar = Buffer.from(honest)
{
  const at = [liar.indexOf("Xing"), liar.indexOf("Info")].find((i) => i >= 0 && i < 4096)
  if (at === undefined) throw new Error("the encoder wrote no Xing/Info header")
  liar.writeUInt32BE(10, at + 8)
}

t.test("10 credits and a 60 s file: 402 before it is decoded", async (t) => {
  const user = await service.newUser(10)
  const started = await metric("stt_decodes_started_total")
  const res = await stt(user.apiKey, honest)
  t.equal(res.status, 402)
  t.equal(((await res.json()) as { detail: { status: string } }).detail.status, "quota_exceeded")
  t.equal(await metric("stt_decodes_started_total"), started, "ffmpeg never started decoding it")
})

t.test("10 credits and a 60 s file whose header says 0.36 s: stopped once the audio outgrows the balance", async (t) => {
  const user = await service.newUser(10)
  const decodedBefore = await metric("stt_decoded_audio_seconds_total")
  const res = await stt(user.apiKey, liar)
  t.equal(res.status, 402)
  t.equal(((await res.json()) as { detail: { status: string } }).detail.status, "quota_exceeded")
  const decoded = (await metric("stt_decoded_audio_seconds_total")) - decodedBefore
  t.ok(decoded > 0 && decoded <= 12, `decoding stopped near the 10 s paid for: ${decoded.toFixed(1)} s of the 60 s decoded`)
})
