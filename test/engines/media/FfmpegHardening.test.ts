/**
 * Uploads that try to make ffmpeg read other files: an ffconcat list and an HLS playlist, bare
 * (refused by the sniffing, NotMedia) and behind an ID3v2 tag (sniffed as mp3, and ffmpeg skips
 * the tag before it probes, so only the demuxer whitelist stops them). A canary WAV sits beside
 * the upload, where other callers' uploads are; its samples must never come out. Run with every
 * ffmpeg on the machine: the system's and the npm 2018 fallback. Also: the child runs under
 * the CPU and address-space limits (read from its own /proc/self/limits, Linux).
 */
import t from "tap"
import { chmodSync, existsSync, readFileSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"
import { decodeMedia, MediaError } from "../../../engines/media/MediaDecoder.ts"
import { scratchDir } from "../asr/speechFixtures.ts"
import { encodeWav } from "../../../engines/audio/Wav.ts"

const dir = scratchDir(t, "speech-ffmpeg-hardening-")
// A 1 kHz tone, 2 s: what a concat or a playlist would decode if it were followed.
const tone = new Int16Array(32_000).map((_, i) => Math.round(8000 * Math.sin((2 * Math.PI * 1000 * i) / 16000)))
const canary = path.join(dir, "canary.wav")
writeFileSync(canary, encodeWav(tone, 16000))

const id3 = Buffer.from([0x49, 0x44, 0x33, 4, 0, 0, 0, 0, 0, 0]) // "ID3", v2.4, no flags, size 0
const crafted: Record<string, Buffer> = {
  "concat.mp3": Buffer.concat([id3, Buffer.from("ffconcat version 1.0\nfile 'canary.wav'\n")]),
  "playlist.mp3": Buffer.concat([id3, Buffer.from(`#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:2,\n${canary}\n#EXT-X-ENDLIST\n`)]),
  "bare.ffconcat": Buffer.from("ffconcat version 1.0\nfile '/etc/passwd'\nfile 'canary.wav'\n"),
  "bare.m3u8": Buffer.from(`#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:2,\n${canary}\n#EXT-X-ENDLIST\n`)
}
for (const [name, bytes] of Object.entries(crafted)) writeFileSync(path.join(dir, name), bytes)

const binaries: Record<string, string> = {}
if (existsSync("/usr/bin/ffmpeg")) binaries.system = "/usr/bin/ffmpeg"
try {
  binaries["npm 2018"] = (createRequire(import.meta.url)("@ffmpeg-installer/ffmpeg") as { path: string }).path
} catch {
  // not installed (npm --omit=optional): the system one is tested alone
}

t.test("crafted playlists and concat lists never read the file beside them", async (t) => {
  t.ok(Object.keys(binaries).length > 0, "some ffmpeg to test")
  for (const [label, ffmpegPath] of Object.entries(binaries)) {
    for (const name of Object.keys(crafted)) {
      const outcome = await decodeMedia(path.join(dir, name), { ffmpegPath }).then(
        (d) => `decoded ${d.samples} samples`,
        (e: unknown) => (MediaError.is(e) ? e.reason : `not a MediaError: ${String(e)}`)
      )
      const expected = name.startsWith("bare") ? "NotMedia" : "Damaged"
      t.equal(outcome, expected, `${label} ffmpeg, ${name}: refused (${expected}), the canary not decoded`)
    }
    const own = await decodeMedia(canary, { ffmpegPath })
    t.equal(own.samples, tone.length, `${label} ffmpeg still decodes the canary itself when it is the upload`)
  }
})

t.test("the decoder child runs under CPU and address-space limits", { skip: process.platform !== "linux" && "reads /proc" }, async (t) => {
  const real = Object.values(binaries)[0]!
  const limitsFile = path.join(dir, "limits.txt")
  // Stands in for ffmpeg: records the limits it was started under, then becomes the real one.
  const wrapper = path.join(dir, "ffmpeg-recording-limits")
  writeFileSync(wrapper, `#!/bin/sh\ncat /proc/self/limits > '${limitsFile}'\nexec '${real}' "$@"\n`)
  chmodSync(wrapper, 0o755)
  const decoded = await decodeMedia(canary, { ffmpegPath: wrapper, timeoutMs: 30_000 })
  t.equal(decoded.samples, tone.length, "decoded through the recording wrapper")
  const limits = readFileSync(limitsFile, "utf8")
  const soft = (name: string) => limits.split("\n").find((l) => l.startsWith(name))?.slice(26).trim().split(/\s+/)[0]
  t.equal(soft("Max cpu time"), "30", "RLIMIT_CPU follows the decode's wall-clock bound (s)")
  t.equal(soft("Max address space"), String(1024 * 1024 * 1024), "RLIMIT_AS is 1 GiB")
})
