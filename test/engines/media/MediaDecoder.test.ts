/**
 * ffmpeg decoding to 16 kHz mono s16le: formats made by ffmpeg in the test from Flite speech
 * keep their length (lossless ones their samples), and each failure has its reason: a text file
 * is NotMedia, a truncated mp4 is Damaged, a video without sound is NoAudio, plus limits,
 * cancellation and a missing binary; decoding to a spill file gives the same samples, read back
 * by span, holding one chunk at a time. What ffmpeg does with a truncated mp3 (decodes the part that
 * is there, silently) is pinned down here. Speeds are printed, never asserted.
 */
import t from "tap"
import { readFileSync, statSync, writeFileSync } from "node:fs"
import * as path from "node:path"
import { concatInt16, int16ToFloat, rmsDbfs } from "../../../engines/audio/Pcm.ts"
import { open } from "node:fs/promises"
import fc from "fast-check"
import { decodeMedia, decodeToFile, MediaError, pcmChunks, readSamples, type MediaErrorReason } from "../../../engines/media/MediaDecoder.ts"
import { disposeFlite, ffmpeg, scratchDir, speak, writeWav } from "../asr/speechFixtures.ts"

t.teardown(disposeFlite)

const dir = scratchDir(t)
const a = await speak("The weather is nice today and we are going to the park.", "slt")
const b = await speak("Please call me back when you get this message.", "rms")
const original = concatInt16([a.pcm, new Int16Array(8000), b.pcm])
const wav = writeWav(path.join(dir, "speech.wav"), original)
const encoded = (name: string, ...args: Array<string>) => {
  const file = path.join(dir, name)
  ffmpeg(["-i", wav, ...args, file])
  return file
}

const reasonOf = (p: Promise<unknown>): Promise<MediaErrorReason | string> =>
  p.then(() => "resolved", (e: unknown) => (MediaError.is(e) ? e.reason : `not a MediaError: ${String(e)}`))
const errorOf = (p: Promise<unknown>): Promise<MediaError> =>
  p.then(() => { throw new Error("resolved") }, (e: unknown) => e as MediaError)

/** One codec frame: MP3's 1152 samples is the longest of these codecs' frames at 16 kHz. */
const FRAME = 1152

t.test("wav, mp3, ogg, flac and mp4 decode to the same length (±1 frame)", async (t) => {
  const files = {
    wav,
    mp3: encoded("speech.mp3"),
    ogg: encoded("speech.ogg"),
    flac: encoded("speech.flac"),
    mp4: encoded("speech.mp4"),
    // Both channels equal to the mono signal (ffmpeg's own upmix would put it at -3 dB in each).
    "stereo 44.1 kHz flac": encoded("stereo44.flac", "-af", "pan=stereo|c0=c0|c1=c0", "-ar", "44100")
  }
  const loudness = rmsDbfs(int16ToFloat(original))
  for (const [name, file] of Object.entries(files)) {
    const d = await decodeMedia(file)
    const delta = d.samples - original.length
    t.ok(Math.abs(delta) <= FRAME, `${name} (${d.container}): ${d.samples} samples, ${delta >= 0 ? "+" : ""}${delta} vs the WAV`)
    t.equal(d.pcm.length, d.samples)
    t.equal(d.sampleRate, 16000)
    t.same(d.warnings, [], "no warnings")
    if (name === "wav" || name === "flac") t.ok(Buffer.from(d.pcm.buffer).equals(Buffer.from(original.buffer)), `${name} is bit-exact`)
    t.ok(Math.abs(rmsDbfs(int16ToFloat(d.pcm)) - loudness) < 1, `${name}: same loudness within 1 dB (channels are averaged)`)
  }
})

t.test("a video's sound track decodes; the picture is ignored", async (t) => {
  const file = path.join(dir, "talk.mp4")
  ffmpeg(["-i", wav, "-f", "lavfi", "-i", "color=c=blue:s=64x64:r=10", "-shortest", "-c:v", "libx264", "-c:a", "aac", file])
  const d = await decodeMedia(file)
  t.equal(d.container, "mp4")
  t.ok(Math.abs(d.samples - original.length) <= FRAME, `${d.samples} samples`)
})

t.test("chunks stream as ffmpeg writes them; stopping early ends ffmpeg", async (t) => {
  const long = path.join(dir, "long.mp3")
  ffmpeg(["-stream_loop", "20", "-i", wav, "-ar", "44100", "-ac", "2", "-b:a", "128k", long]) // ~2.3 min, a typical upload
  let chunks = 0
  let samples = 0
  const stream = pcmChunks(long)
  for (;;) {
    const next = await stream.next()
    if (next.done) {
      t.equal(next.value.samples, samples, "the summary counts what was yielded")
      t.equal(next.value.container, "mp3")
      break
    }
    chunks++
    samples += next.value.length
  }
  t.ok(chunks > 1, `${chunks} chunks`)
  let taken = 0
  for await (const chunk of pcmChunks(long)) {
    taken += chunk.length
    break
  }
  t.ok(taken > 0 && taken < samples, "broke off after one chunk")
  const again = await decodeMedia(long)
  t.equal(again.samples, samples, "and the next decode is unaffected")
  const audioS = samples / 16000
  const speed = (audioS * 1000) / again.decodeMs
  t.comment(`measured: ${audioS.toFixed(0)} s of 44.1 kHz stereo mp3 (${(statSync(long).size / 1e6).toFixed(1)} MB) decoded in ${again.decodeMs.toFixed(0)} ms: ${speed.toFixed(0)}× real time`)
})

t.test("a text file is NotMedia, before any ffmpeg runs", async (t) => {
  const text = path.join(dir, "notes.txt")
  writeFileSync(text, "Meeting notes\nThe weather is nice today.\n")
  const e = await errorOf(decodeMedia(text, { ffmpegPath: "/nonexistent/ffmpeg" }))
  t.match(e, { _tag: "MediaError", reason: "NotMedia" })
  const empty = path.join(dir, "empty.bin")
  writeFileSync(empty, "")
  t.equal(await reasonOf(decodeMedia(empty)), "NotMedia", "an empty file")
})

t.test("a truncated mp4 is Damaged, with ffmpeg's reason and no server paths", async (t) => {
  for (const name of ["speech.mp4", "cut.m4a"]) {
    const full = name === "speech.mp4" ? path.join(dir, name) : encoded(name)
    const bytes = readFileSync(full)
    const cut = path.join(dir, `truncated-${name}`)
    writeFileSync(cut, bytes.subarray(0, bytes.length >> 1))
    const e = await errorOf(decodeMedia(cut))
    t.equal(e.reason, "Damaged", name)
    t.match(e.message, /moov atom not found/, `the muxer wrote moov last, so the cut lost it: ${e.message}`)
    t.notMatch(e.message, dir, "the temporary path is not in the message")
    t.notMatch(e.message, /0x[0-9a-f]{6,}/, "nor heap addresses")
  }
})

t.test("a truncated mp3 decodes the part that is there, silently (documented behaviour)", async (t) => {
  const full = path.join(dir, "speech.mp3")
  const bytes = readFileSync(full)
  const cut = path.join(dir, "truncated.mp3")
  writeFileSync(cut, bytes.subarray(0, bytes.length >> 1))
  const d = await decodeMedia(cut)
  const fraction = d.samples / original.length
  t.ok(fraction > 0.4 && fraction < 0.6, `about half the audio (${(fraction * 100).toFixed(0)} %)`)
  t.same(d.warnings, [], "ffmpeg says nothing")
  const flac = readFileSync(path.join(dir, "speech.flac"))
  const cutFlac = path.join(dir, "truncated.flac")
  writeFileSync(cutFlac, flac.subarray(0, flac.length >> 1))
  const f = await decodeMedia(cutFlac)
  t.ok(f.samples < original.length, "a truncated flac also decodes what is there")
  t.ok(f.warnings.some((w) => /decod/i.test(w)), `and returns ffmpeg's complaint as a warning: ${JSON.stringify(f.warnings)}`)
})

t.test("a video without sound is NoAudio", async (t) => {
  const file = path.join(dir, "silent-film.mp4")
  ffmpeg(["-f", "lavfi", "-i", "color=c=black:s=64x64:r=10", "-t", "1", "-c:v", "libx264", file])
  const e = await errorOf(decodeMedia(file))
  t.equal(e.reason, "NoAudio")
  t.match(e.message, /no audio stream/)
})

t.test("limits, cancellation and a missing binary", async (t) => {
  const mp3 = path.join(dir, "speech.mp3")
  t.equal(await reasonOf(decodeMedia(mp3, { maxDurationMs: 1000 })), "TooLong")
  t.equal(await reasonOf(decodeMedia(path.join(dir, "long.mp3"), { timeoutMs: 1 })), "TimedOut")
  t.equal(await reasonOf(decodeMedia(mp3, { signal: AbortSignal.abort() })), "Aborted", "already aborted")
  const controller = new AbortController()
  const running = decodeMedia(path.join(dir, "long.mp3"), { signal: controller.signal })
  controller.abort()
  t.equal(await reasonOf(running), "Aborted", "aborted while running")
  const missing = await errorOf(decodeMedia(mp3, { ffmpegPath: "/nonexistent/ffmpeg" }))
  t.equal(missing.reason, "DecoderUnavailable")
})

t.test("decodeToFile: the samples of decodeMedia on disk, one chunk in memory; readSamples spans", async (t) => {
  const long = path.join(dir, "long.flac")
  ffmpeg(["-stream_loop", "20", "-i", wav, "-c:a", "flac", long])
  const whole = await decodeMedia(long)
  const spill = path.join(dir, "long.pcm")
  const spilled = await decodeToFile(long, spill)
  t.equal(spilled.samples, whole.samples)
  t.equal(statSync(spill).size, whole.samples * 2, "s16 on disk")
  t.ok(spilled.largestChunkBytes <= 256 * 1024, `largest chunk ${spilled.largestChunkBytes} B of ${whole.pcm.byteLength} B decoded`)
  const handle = await open(spill, "r")
  try {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: whole.samples + 100 }), fc.integer({ min: 0, max: 40_000 }), async (from, n) => {
        const got = await readSamples(handle, from, from + n)
        const want = whole.pcm.slice(from, from + n)
        return got.length === want.length && got.every((x, i) => x === want[i])
      }),
      { numRuns: 50 }
    )
  } finally {
    await handle.close()
  }
  const text = path.join(dir, "not-media.txt")
  writeFileSync(text, "hello, this is text\n".repeat(50))
  t.equal(await reasonOf(decodeToFile(text, path.join(dir, "text.pcm"))), "NotMedia", "failures are MediaErrors as for decodeMedia")
})
