/**
 * Container detection by magic numbers: a table of hand-made headers, then real files of every
 * listed container written by the npm ffmpeg from Flite speech (each must be detected as its
 * container and decode to audio), and files that are not media.
 */
import t from "tap"
import { readFileSync, writeFileSync } from "node:fs"
import * as path from "node:path"
import { decodeMedia } from "../../../engines/media/MediaDecoder.ts"
import { detectContainer, MEDIA_MIME, type MediaContainer } from "../../../engines/media/MediaType.ts"
import { disposeFlite, ffmpeg, scratchDir, speak, writeWav } from "../asr/speechFixtures.ts"

t.teardown(disposeFlite)

const ascii = (s: string) => Array.from(s, (c) => c.charCodeAt(0))
const b = (...parts: Array<string | ReadonlyArray<number>>) => Uint8Array.from(parts.flatMap((p) => (typeof p === "string" ? ascii(p) : [...p])))
const zeros = (n: number) => new Array<number>(n).fill(0)
/** ID3v2.4 header whose (synchsafe) size is `size`, followed by that many zero bytes. */
const id3 = (size: number) => [...ascii("ID3"), 4, 0, 0, (size >> 21) & 0x7f, (size >> 14) & 0x7f, (size >> 7) & 0x7f, size & 0x7f, ...zeros(size)]
const ts = (() => {
  const out = zeros(188 * 3)
  for (const o of [0, 188, 376]) out[o] = 0x47
  return out
})()

const table: ReadonlyArray<[string, Uint8Array, MediaContainer | undefined]> = [
  ["RIFF WAVE", b("RIFF", [0x24, 0, 0, 0], "WAVEfmt "), "wav"],
  ["RF64 WAVE", b("RF64", [0xff, 0xff, 0xff, 0xff], "WAVEds64"), "wav"],
  ["RIFF AVI", b("RIFF", [0, 0, 0, 0], "AVI LIST"), "avi"],
  ["RIFF of another kind", b("RIFF", [0, 0, 0, 0], "WEBPVP8 "), undefined],
  ["ID3v2 then MPEG audio", b(id3(16), [0xff, 0xfb, 0x90, 0x64]), "mp3"],
  ["ID3v2 then FLAC", b(id3(16), "fLaC", [0, 0, 0, 0x22]), "flac"],
  ["ID3v2 then ADTS AAC", b(id3(16), [0xff, 0xf1, 0x50, 0x80, 0x02, 0x1f, 0xfc]), "aac"],
  ["ID3v2 longer than the sniffed bytes", b("ID3", [4, 0, 0, 0x7f, 0x7f, 0x7f, 0x7f]), "mp3"],
  ["MPEG-1 layer III frame", b([0xff, 0xfb, 0x90, 0x64]), "mp3"],
  ["MPEG-2 layer III frame", b([0xff, 0xf3, 0x38, 0xc4]), "mp3"],
  ["MPEG sync with reserved version", b([0xff, 0xeb, 0x90, 0x64]), undefined],
  ["MPEG sync with bad bitrate index", b([0xff, 0xfb, 0xf0, 0x64]), undefined],
  ["ADTS AAC", b([0xff, 0xf1, 0x60, 0x40, 0x03, 0x9f, 0xfc]), "aac"],
  ["ADIF AAC", b("ADIF", zeros(8)), "aac"],
  ["Ogg", b("OggS", [0, 2], zeros(8)), "ogg"],
  ["FLAC", b("fLaC", [0, 0, 0, 0x22]), "flac"],
  ["MP4 isom", b([0, 0, 0, 0x1c], "ftypisom", [0, 0, 2, 0]), "mp4"],
  ["M4A", b([0, 0, 0, 0x18], "ftypM4A ", [0, 0, 2, 0]), "m4a"],
  ["QuickTime", b([0, 0, 0, 0x14], "ftypqt  ", [0, 0, 2, 0]), "mov"],
  ["QuickTime without ftyp", b([0, 0, 0, 8], "wide", [0, 0, 0, 8], "mdat"), "mov"],
  ["3GP", b([0, 0, 0, 0x1c], "ftyp3gp4", [0, 0, 2, 0]), "3gp"],
  ["WebM", b([0x1a, 0x45, 0xdf, 0xa3, 0x01, 0, 0, 0, 0, 0, 0, 0x1f, 0x42, 0x86, 0x81, 0x01, 0x42, 0x82, 0x84], "webm"), "webm"],
  ["Matroska", b([0x1a, 0x45, 0xdf, 0xa3, 0x01, 0, 0, 0, 0, 0, 0, 0x23, 0x42, 0x82, 0x88], "matroska"), "mkv"],
  ["AIFF", b("FORM", [0, 5, 0xb5, 0x6e], "AIFFCOMM"), "aiff"],
  ["AIFF-C", b("FORM", [0, 0, 0, 0], "AIFCFVER"), "aiff"],
  ["FORM of another kind", b("FORM", [0, 0, 0, 0], "ILBMBMHD"), undefined],
  ["CAF", b("caff", [0, 1, 0, 0], "desc"), "caf"],
  ["AMR", b("#!AMR\n", [0x3c]), "amr"],
  ["AMR-WB", b("#!AMR-WB\n"), "amr"],
  ["ASF / WMA", b([0x30, 0x26, 0xb2, 0x75, 0x8e, 0x66, 0xcf, 0x11, 0xa6, 0xd9]), "asf"],
  ["Sun AU", b(".snd", [0, 0, 0, 0x20]), "au"],
  ["FLV", b("FLV", [1, 5, 0, 0, 0, 9]), "flv"],
  ["WavPack", b("wvpk", [0x8c, 0x95, 0, 0]), "wavpack"],
  ["Monkey's Audio", b("MAC ", [0x96, 0x0f, 0, 0]), "ape"],
  ["AC-3", b([0x0b, 0x77, 0x97, 0x22, 0x94]), "ac3"],
  ["AC-3 sync with reserved rate", b([0x0b, 0x77, 0x97, 0x22, 0xd4]), undefined],
  ["DTS", b([0x7f, 0xfe, 0x80, 0x01, 0xfc]), "dts"],
  ["MPEG program stream", b([0, 0, 1, 0xba, 0x21, 0, 1]), "mpeg"],
  ["MPEG transport stream", b(ts), "mpegts"],
  ["one TS sync byte is not enough", b([0x47], zeros(400)), undefined],
  ["plain text", b("hello world, this is text\n"), undefined],
  ["an HLS playlist", b("#EXTM3U\n#EXT-X-VERSION:3\n"), undefined],
  ["JSON", b('{"text": "hello"}'), undefined],
  ["PNG", b([0x89], "PNG\r\n", [0x1a, 0x0a]), undefined],
  ["PDF", b("%PDF-1.7\n"), undefined],
  ["ZIP", b("PK", [3, 4, 20, 0]), undefined],
  ["MIDI", b("MThd", [0, 0, 0, 6]), undefined],
  ["empty", b(), undefined],
  ["too short for any magic", b("RI"), undefined]
]

t.test("magic numbers", async (t) => {
  for (const [name, bytes, expected] of table) t.equal(detectContainer(bytes), expected, name)
  for (const container of new Set(table.map((row) => row[2]).filter((c) => c !== undefined))) t.ok(MEDIA_MIME[container], `${container} has a MIME type`)
})

t.test("files written by ffmpeg are detected as their container and decode", async (t) => {
  const dir = scratchDir(t)
  const wav = writeWav(path.join(dir, "speech.wav"), (await speak("The children played in the garden all afternoon.", "awb")).pcm)
  const cases: ReadonlyArray<[string, ReadonlyArray<string>, MediaContainer]> = [
    ["a.wav", [], "wav"],
    ["a.mp3", [], "mp3"],
    ["untagged.mp3", ["-id3v2_version", "0", "-write_xing", "0"], "mp3"],
    ["a.aac", ["-f", "adts"], "aac"],
    ["a.ogg", [], "ogg"],
    ["a.opus", [], "ogg"],
    ["a.flac", [], "flac"],
    ["a.m4a", [], "m4a"],
    ["a.mp4", [], "mp4"],
    ["a.mov", [], "mov"],
    ["a.3gp", ["-ar", "8000", "-c:a", "libopencore_amrnb"], "3gp"],
    ["a.webm", [], "webm"],
    ["a.mkv", [], "mkv"],
    ["a.aiff", [], "aiff"],
    ["a.caf", ["-c:a", "pcm_s16le"], "caf"],
    ["a.amr", ["-ar", "8000", "-c:a", "libopencore_amrnb"], "amr"],
    ["a.wma", ["-c:a", "wmav2"], "asf"],
    ["a.au", [], "au"],
    ["a.avi", [], "avi"],
    ["a.flv", ["-ar", "22050"], "flv"],
    ["a.ac3", [], "ac3"],
    ["a.dts", ["-strict", "-2", "-c:a", "dca", "-ar", "48000"], "dts"],
    ["a.wv", [], "wavpack"],
    ["a.ts", [], "mpegts"],
    ["a.mpg", ["-f", "mpeg", "-c:a", "mp2"], "mpeg"]
  ]
  for (const [name, args, expected] of cases) {
    const file = path.join(dir, name)
    ffmpeg(["-i", wav, ...args, file])
    t.equal(detectContainer(readFileSync(file).subarray(0, 4096)), expected, `${name} → ${expected}`)
    const decoded = await decodeMedia(file)
    t.ok(decoded.samples > 16000 * 2, `${name} decodes (${decoded.samples} samples)`)
  }
})

t.test("what is not media is not detected", async (t) => {
  const dir = scratchDir(t)
  const text = path.join(dir, "notes.txt")
  writeFileSync(text, "Meeting notes\nThe weather is nice today.\n")
  t.equal(detectContainer(readFileSync(text)), undefined)
})
