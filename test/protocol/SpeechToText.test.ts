/**
 * Speech-to-text, synchronous (SPEC 2.5, endpoint 7, Parts 7-9) as a client meets it: the whole
 * service runs in this process with real engines (ffmpeg, Silero VAD, PocketSphinx, the MFCC
 * speaker embedding) and every check goes over HTTP. Audio comes from the server's own Flite
 * voices (emma-en = slt, james-en = rms, angus-en = awb, kevin-en = kal16), the domain where
 * PocketSphinx is usable; espeak voices are out of its domain.
 *
 * Measurements (WER, memory growth during the 413 upload, diarization accuracy without a
 * speaker count) are printed as comments; speeds are never asserted.
 */
import { Effect } from "effect"
import { readFileSync, writeFileSync } from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import t, { type Test } from "tap"
import { concatInt16, floatToInt16 } from "../../engines/audio/Pcm.ts"
import { encodeWav, parseWav } from "../../engines/audio/Wav.ts"
import { ffmpeg, scratchDir, SENTENCES } from "../engines/asr/speechFixtures.ts"
import { normalizeWords, tally, wer, type WerTally } from "../engines/asr/wer.ts"
import { labelAccuracy } from "../engines/speaker/scoring.ts"
import { dialogue, disposeSpeakers, type Turn } from "../engines/speaker/speakers.ts"
import { startTestService, type TestService } from "../support/service.ts"

t.teardown(disposeSpeakers)
const dir = scratchDir(t, "speech-stt-protocol-")

// URL input (cloud_storage_url / source_url) is tested in SpeechToTextUrl.test.ts.
const service = await startTestService(t, { WORKERS: "2" })
const owner = await service.newUser(10_000_000)

const FLITE_VOICES = ["emma-en", "james-en", "angus-en", "kevin-en"] as const
/** Everyday English, the domain of PocketSphinx's generic language model. */
const ROUND_TRIP = SENTENCES.slice(0, 8)
const ALL_FORMATS = JSON.stringify([{ format: "srt" }, { format: "txt" }, { format: "segmented_json" }, { format: "pdf" }])

interface Word {
  readonly text: string
  readonly start?: number
  readonly end?: number
  readonly type: "word" | "spacing" | "audio_event"
  readonly speaker_id?: string
  readonly logprob: number
}

interface FormatFile {
  readonly requested_format: string
  readonly file_extension: string
  readonly content_type: string
  readonly is_base64_encoded: boolean
  readonly content: string
}

interface Transcript {
  readonly language_code: string
  readonly language_probability: number
  readonly text: string
  readonly words: ReadonlyArray<Word>
  readonly additional_formats?: ReadonlyArray<FormatFile>
  readonly transcription_id: string
}

interface Media {
  readonly bytes: Uint8Array
  readonly name?: string
  readonly type?: string
}

/** POST /speech-to-text with multipart `fields` and optionally a `file` part. */
const stt = (fields: Record<string, string | ReadonlyArray<string>>, file?: Media, apiKey: string | null = owner.apiKey, target = service) => {
  const form = new FormData()
  for (const [name, value] of Object.entries(fields)) {
    for (const v of typeof value === "string" ? [value] : value) form.append(name, v)
  }
  if (file !== undefined) form.append("file", new Blob([file.bytes], { type: file.type ?? "application/octet-stream" }), file.name ?? "audio.wav")
  return fetch(`${target.base}/speech-to-text`, { method: "POST", headers: apiKey === null ? {} : { "xi-api-key": apiKey }, body: form })
}

/** A 200 transcript, or a failed assertion with the error body. */
const transcribe = async (t: Test, fields: Record<string, string | ReadonlyArray<string>>, file?: Media): Promise<Transcript> => {
  const res = await stt({ model_id: "scribe_v1", ...fields }, file)
  if (res.status !== 200) {
    t.fail(`speech-to-text answered ${res.status}: ${await res.text()}`)
    throw new Error("speech-to-text failed")
  }
  t.match(res.headers.get("content-type"), /application\/json/)
  return (await res.json()) as Transcript
}

/** Asserts a SPEC 2.1 error body with the given status (and `detail.status` when given). */
const expectError = async (t: Test, res: Response, status: number, code?: string) => {
  t.equal(res.status, status, `answers ${status}`)
  const body = (await res.json()) as { detail?: { status?: unknown; message?: unknown } }
  t.type(body.detail?.status, "string", "detail.status is a string")
  t.type(body.detail?.message, "string", "detail.message is a string")
  if (code !== undefined) t.equal(body.detail?.status, code, `detail.status is ${code}`)
  return body.detail as { status: string; message: string }
}

/** The server's own Flite voice as a 16 kHz WAV. */
const tts = async (voice: string, text: string): Promise<Uint8Array> => {
  const res = await fetch(`${service.base}/text-to-speech/${voice}?output_format=wav_16000`, {
    method: "POST",
    headers: { "xi-api-key": owner.apiKey, "content-type": "application/json" },
    body: JSON.stringify({ text })
  })
  if (res.status !== 200) throw new Error(`text-to-speech ${voice} answered ${res.status}: ${await res.text()}`)
  return new Uint8Array(await res.arrayBuffer())
}

const pcmOf = (wav: Uint8Array): Int16Array => floatToInt16(parseWav(wav).channelData[0]!)
const wavOf = (pcm: Int16Array): Uint8Array => encodeWav(pcm, 16000)
const seconds = (wav: Uint8Array) => parseWav(wav).channelData[0]!.length / 16000
const spokenWords = (tr: Transcript) => tr.words.filter((w) => w.type === "word")
const balance = (userId: string) => Effect.runPromise(service.users.balance(userId))

/** words[] alternates word and spacing, times are monotonic and inside `audioSeconds`. */
const checkWordList = (t: Test, tr: Transcript, audioSeconds: number, label: string) => {
  const problems: Array<string> = []
  let previousEnd = 0
  tr.words.forEach((w, i) => {
    const expected = i % 2 === 0 ? "word" : "spacing"
    if (w.type !== expected) problems.push(`#${i} is ${w.type}, expected ${expected}`)
    if (w.type === "spacing" && w.text !== " ") problems.push(`#${i} spacing text ${JSON.stringify(w.text)}`)
    if (w.type === "word" && (w.text.length === 0 || /\s/.test(w.text))) problems.push(`#${i} word text ${JSON.stringify(w.text)}`)
    if (typeof w.start !== "number" || typeof w.end !== "number") return void problems.push(`#${i} has no times`)
    if (w.start < previousEnd) problems.push(`#${i} starts at ${w.start} before the previous end ${previousEnd}`)
    if (w.end < w.start) problems.push(`#${i} ends (${w.end}) before it starts (${w.start})`)
    if (w.end > audioSeconds + 0.001) problems.push(`#${i} ends at ${w.end}, after the audio (${audioSeconds} s)`)
    if (!(Number.isFinite(w.logprob) && w.logprob <= 0)) problems.push(`#${i} logprob ${w.logprob}`)
    previousEnd = w.end
  })
  if (tr.words.length > 0 && tr.words[tr.words.length - 1]!.type !== "word") problems.push("ends with a spacing")
  t.same(problems, [], `${label}: ${tr.words.length} entries alternate word/spacing, monotonic, inside ${audioSeconds.toFixed(2)} s`)
  t.equal(tr.text, spokenWords(tr).map((w) => w.text).join(" "), `${label}: text is the words joined by spaces`)
}

// Two sentences in two voices with a 1 s pause: two subtitle cues, two speakers.
const sentenceA = "The weather is nice today and we are going to the park."
const sentenceB = "Please call me back when you get this message."
const clipA = await tts("emma-en", sentenceA)
const clipB = await tts("james-en", sentenceB)
const twoSentences = wavOf(concatInt16([pcmOf(clipA), new Int16Array(16000), pcmOf(clipB)]))
const twoSentencesFile = path.join(dir, "two.wav")
writeFileSync(twoSentencesFile, twoSentences)

// ---------------------------------------------------------------------------------------------
// Round trip and the transcript's shape
// ---------------------------------------------------------------------------------------------

t.test("round trip: the server's Flite voices → speech-to-text, WER under 20 %", async (t) => {
  const all: Array<WerTally> = []
  const perVoice: Array<string> = []
  // One voice per lane, so both workers stay busy without flooding the queue.
  await Promise.all(FLITE_VOICES.map(async (voice) => {
    const tallies: Array<WerTally> = []
    for (const sentence of ROUND_TRIP) {
      const wav = await tts(voice, sentence)
      const tr = await transcribe(t, {}, { bytes: wav, name: `${voice}.wav` })
      const one = tally(sentence, tr.text)
      if (one.errors > 0) t.comment(`${voice}: "${sentence}" → "${tr.text}"`)
      tallies.push(one)
      checkWordList(t, tr, seconds(wav), `${voice} "${sentence.slice(0, 20)}…"`)
      t.equal(tr.language_code, "en")
      t.equal(tr.language_probability, 1)
      t.match(tr.transcription_id, /^\S+$/, "a transcription_id")
      t.equal(tr.additional_formats, undefined, "no additional_formats unless asked")
      t.ok(spokenWords(tr).every((w) => w.speaker_id === undefined), "no speaker_id without diarize")
    }
    perVoice.push(`${voice} ${(wer(tallies) * 100).toFixed(1)} %`)
    all.push(...tallies)
  }))
  const total = wer(all)
  t.comment(`measured WER over ${all.reduce((n, x) => n + x.words, 0)} words: ${(total * 100).toFixed(1)} % (${perVoice.join(", ")})`)
  t.ok(total < 0.2, `WER ${(total * 100).toFixed(1)} % < 20 %`)
})

t.test("all-silence audio: empty text, language_probability 0, language_code still a string", async (t) => {
  const tr = await transcribe(t, {}, { bytes: wavOf(new Int16Array(3 * 16000)), name: "silence.wav" })
  t.equal(tr.text, "")
  t.same(tr.words, [])
  t.equal(tr.language_probability, 0)
  t.type(tr.language_code, "string", `language_code ${JSON.stringify(tr.language_code)}`)
})

t.test("timestamps_granularity: none drops the times, character equals word", async (t) => {
  const media = { bytes: clipA }
  const [word, byDefault, character, none] = await Promise.all([
    transcribe(t, { timestamps_granularity: "word" }, media),
    transcribe(t, {}, media),
    transcribe(t, { timestamps_granularity: "character" }, media),
    transcribe(t, { timestamps_granularity: "none" }, media)
  ])
  const strip = ({ transcription_id: _, ...rest }: Transcript) => rest
  t.same(strip(byDefault), strip(word), "word is the default")
  t.same(strip(character), strip(word), "character falls back to word")
  t.ok(word.words.length > 0)
  t.equal(none.text, word.text)
  t.equal(none.words.length, word.words.length)
  t.ok(none.words.every((w) => !("start" in w) && !("end" in w)), "no start or end on any entry")
  t.same(none.words.map((w) => [w.text, w.type, w.logprob]), word.words.map((w) => [w.text, w.type, w.logprob]), "same entries otherwise")
  await expectError(t, await stt({ model_id: "scribe_v1", timestamps_granularity: "syllable" }, media), 400, "invalid_request")
})

// ---------------------------------------------------------------------------------------------
// additional_formats
// ---------------------------------------------------------------------------------------------

const srtTime = /^(\d{2}):([0-5]\d):([0-5]\d),(\d{3})$/
const srtMs = (s: string) => {
  const m = srtTime.exec(s)
  if (m === null) return NaN
  return ((Number(m[1]) * 60 + Number(m[2])) * 60 + Number(m[3])) * 1000 + Number(m[4])
}

/** Parses and validates SubRip; returns the cues' text (lines joined by spaces). */
const checkSrt = (t: Test, srt: string): Array<{ startMs: number; endMs: number; text: string }> => {
  const problems: Array<string> = []
  const cues: Array<{ startMs: number; endMs: number; text: string }> = []
  const blocks = srt.replace(/\r\n/g, "\n").trim().split(/\n{2,}/)
  let previousEnd = -1
  blocks.forEach((block, i) => {
    const lines = block.split("\n")
    if (lines[0] !== String(i + 1)) problems.push(`cue ${i + 1} is numbered ${JSON.stringify(lines[0])}`)
    const times = /^(\S+) --> (\S+)$/.exec(lines[1] ?? "")
    const startMs = srtMs(times?.[1] ?? "")
    const endMs = srtMs(times?.[2] ?? "")
    if (times === null || Number.isNaN(startMs) || Number.isNaN(endMs)) problems.push(`cue ${i + 1} timing line ${JSON.stringify(lines[1])}`)
    else {
      if (!(startMs < endMs)) problems.push(`cue ${i + 1} ends (${times[2]}) before it starts (${times[1]})`)
      if (startMs < previousEnd) problems.push(`cue ${i + 1} starts before the previous cue ends`)
      previousEnd = endMs
    }
    const text = lines.slice(2)
    if (text.length < 1 || text.length > 2 || text.some((l) => l.trim() === "")) problems.push(`cue ${i + 1} text lines ${JSON.stringify(text)}`)
    if (text.some((l) => /speaker|^\s*[\[(<]?[A-Za-z_]+\d*[\])>]?\s*:/i.test(l))) problems.push(`cue ${i + 1} carries a speaker label: ${JSON.stringify(text)}`)
    cues.push({ startMs, endMs, text: text.join(" ") })
  })
  t.same(problems, [], `srt: ${blocks.length} numbered cues, HH:MM:SS,mmm --> HH:MM:SS,mmm, increasing, no speaker labels`)
  return cues
}

interface Segment {
  readonly text: string
  readonly start: number
  readonly end: number
  readonly speaker_id: string | null
  readonly words: ReadonlyArray<{ text: string; start: number; end: number; speaker_id: string | null; logprob: number }>
}

/** The segmented_json schema documented in actors/Transcript.ts, against the transcript. */
const checkSegmentedJson = (t: Test, content: string, tr: Transcript, diarized: boolean) => {
  const doc = JSON.parse(content) as { segments?: ReadonlyArray<Segment> }
  t.same(Object.keys(doc), ["segments"], "one key: segments")
  const segments = doc.segments ?? []
  t.ok(Array.isArray(segments) && segments.length >= 2, `${segments.length} segments (a pause of 1 s separates two)`)
  const problems: Array<string> = []
  let previousEnd = -1
  for (const [i, s] of segments.entries()) {
    if (typeof s.text !== "string" || typeof s.start !== "number" || typeof s.end !== "number") problems.push(`segment ${i} field types`)
    if (diarized ? typeof s.speaker_id !== "string" : s.speaker_id !== null) problems.push(`segment ${i} speaker_id ${JSON.stringify(s.speaker_id)}`)
    if (!Array.isArray(s.words) || s.words.length === 0) {
      problems.push(`segment ${i} has no words`)
      continue
    }
    if (s.text !== s.words.map((w) => w.text).join(" ")) problems.push(`segment ${i} text is not its words joined`)
    if (s.start !== s.words[0]!.start || s.end !== s.words[s.words.length - 1]!.end) problems.push(`segment ${i} span is not its words' span`)
    if (s.start < previousEnd || s.end < s.start) problems.push(`segment ${i} out of order`)
    previousEnd = s.end
    for (const w of s.words) {
      const keys = Object.keys(w).sort().join(",")
      if (keys !== "end,logprob,speaker_id,start,text") problems.push(`segment ${i} word keys ${keys}`)
      if (diarized && w.speaker_id !== s.speaker_id) problems.push(`segment ${i} mixes speakers`)
    }
  }
  t.same(problems, [], "segments: text, start, end, speaker_id, words[{text, start, end, speaker_id, logprob}]")
  const flat = segments.flatMap((s) => s.words)
  t.same(
    flat.map((w) => [w.text, w.start, w.end, w.speaker_id ?? undefined, w.logprob]),
    spokenWords(tr).map((w) => [w.text, w.start, w.end, w.speaker_id, w.logprob]),
    "the segments' words are the transcript's words, in order"
  )
}

t.test("additional_formats as the SDK sends them: srt, txt, segmented_json made, pdf skipped", async (t) => {
  for (const diarize of [true, false]) {
    await t.test(diarize ? "with diarize=true" : "without diarize", async (t) => {
      const tr = await transcribe(t, { additional_formats: ALL_FORMATS, ...(diarize ? { diarize: "true" } : {}) }, { bytes: twoSentences })
      const files = tr.additional_formats ?? []
      t.same(files.map((f) => f.requested_format), ["srt", "txt", "segmented_json"], "pdf is skipped")
      t.same(files.map((f) => [f.file_extension, f.content_type, f.is_base64_encoded]), [
        ["srt", "application/x-subrip", false],
        ["txt", "text/plain", false],
        ["json", "application/json", false]
      ])
      if (diarize) {
        t.ok(spokenWords(tr).every((w) => typeof w.speaker_id === "string"), "every word has a speaker_id")
        t.ok(tr.words.every((w) => typeof w.speaker_id === "string"), "and every spacing")
      }
      const [srt, txt, json] = files.map((f) => f.content)
      const cues = checkSrt(t, srt!)
      t.ok(cues.length >= 2, `${cues.length} cues`)
      t.same(normalizeWords(cues.map((c) => c.text).join(" ")), normalizeWords(tr.text), "the cues spell the transcript")
      const firstWord = spokenWords(tr)[0]!
      t.ok(Math.abs(cues[0]!.startMs - firstWord.start! * 1000) <= 1, "the first cue starts with the first word")
      t.same(normalizeWords(txt!), normalizeWords(tr.text), "txt holds the transcript")
      t.ok(txt!.endsWith("\n") && txt!.split("\n").length >= 3, "txt: one line per cue")
      checkSegmentedJson(t, json!, tr, diarize)
    })
  }
  await t.test("a plain comma list is accepted too; an unknown format is refused", async (t) => {
    const tr = await transcribe(t, { additional_formats: "txt" }, { bytes: clipA })
    t.same(tr.additional_formats?.map((f) => f.requested_format), ["txt"])
    const only = await transcribe(t, { additional_formats: JSON.stringify([{ format: "docx" }, { format: "html" }]) }, { bytes: clipA })
    t.same(only.additional_formats ?? [], [], "docx and html skipped")
    const error = await expectError(t, await stt({ model_id: "scribe_v1", additional_formats: JSON.stringify([{ format: "srt" }, { format: "vtt" }]) }, { bytes: clipA }), 400, "invalid_request")
    t.match(error.message, /vtt/, "the message names the unknown format")
  })
})

// ---------------------------------------------------------------------------------------------
// Media types
// ---------------------------------------------------------------------------------------------

t.test("mp3, ogg (vorbis and opus), flac and mp4 (aac) decode to the same transcript as the WAV", async (t) => {
  const reference = await transcribe(t, {}, { bytes: twoSentences })
  t.ok(spokenWords(reference).length >= 15, `WAV: "${reference.text}"`)
  const encodings: Record<string, ReadonlyArray<string>> = {
    "speech.mp3": ["-c:a", "libmp3lame", "-b:a", "64k"],
    "speech.ogg": ["-c:a", "libvorbis"],
    "speech.opus.ogg": ["-c:a", "libopus", "-b:a", "48k"],
    "speech.flac": ["-c:a", "flac"],
    "speech.mp4": ["-c:a", "aac", "-b:a", "96k"]
  }
  // Encoded one by one, transcribed side by side (two workers, room for ten decodes).
  const transcripts = await Promise.all(Object.entries(encodings).map(([name, args]) => {
    const file = path.join(dir, name)
    ffmpeg(["-i", twoSentencesFile, ...args, file])
    // As SDKs send it: application/octet-stream, so the type must come from the bytes.
    return transcribe(t, {}, { bytes: readFileSync(file), name: `upload-${name}` }).then((tr) => [name, tr] as const)
  }))
  for (const [name, tr] of transcripts) {
    t.equal(tr.text, reference.text, `${name}: same transcript`)
    t.ok(Math.abs(spokenWords(tr)[0]!.start! - spokenWords(reference)[0]!.start!) <= 0.1, `${name}: first word within 100 ms of the WAV's`)
  }
})

t.test("refusals: 415 not media, 400 damaged, 400 missing model_id or media, 401 no key", async (t) => {
  const text = new TextEncoder().encode("This is a plain text file, not audio.\n".repeat(200))
  await expectError(t, await stt({ model_id: "scribe_v1" }, { bytes: text, name: "notes.txt", type: "text/plain" }), 415, "unsupported_media_type")
  await expectError(t, await stt({ model_id: "scribe_v1" }, { bytes: text, name: "notes.wav", type: "audio/wav" }), 415, "unsupported_media_type")

  const mp4 = path.join(dir, "whole.mp4")
  ffmpeg(["-i", twoSentencesFile, "-c:a", "aac", mp4])
  const whole = readFileSync(mp4)
  t.ok(whole.indexOf("moov") > whole.length / 2, "ffmpeg wrote moov at the end")
  const truncated = whole.subarray(0, Math.floor(whole.length / 2))
  const damaged = await expectError(t, await stt({ model_id: "scribe_v1" }, { bytes: truncated, name: "cut.mp4" }), 400, "invalid_media")
  t.comment(`truncated mp4: ${damaged.message}`)

  await expectError(t, await stt({}, { bytes: clipA }), 400, "invalid_request")
  await expectError(t, await stt({ model_id: "  " }, { bytes: clipA }), 400, "invalid_request")
  await expectError(t, await stt({ model_id: "scribe_v1" }), 400, "invalid_request")
  await expectError(t, await stt({ model_id: "scribe_v1", cloud_storage_url: "" }), 400, "invalid_request")
  await expectError(t, await stt({ model_id: "scribe_v1" }, { bytes: clipA }, null), 401)
  await expectError(t, await stt({ model_id: "scribe_v1", num_speakers: "0" }, { bytes: clipA }), 400, "invalid_request")
  const webhook = await expectError(t, await stt({ model_id: "scribe_v1", webhook: "true", webhook_id: "wh_1" }, { bytes: clipA }), 404, "webhook_not_found")
  t.match(webhook.message, /wh_1/, "webhook=true with a webhook_id that is not the caller's")
  await expectError(t, await stt({ model_id: "scribe_v1", webhook: "true" }, { bytes: clipA }), 400, "invalid_request")
  const json = await fetch(`${service.base}/speech-to-text`, {
    method: "POST",
    headers: { "xi-api-key": owner.apiKey, "content-type": "application/json" },
    body: JSON.stringify({ model_id: "scribe_v1" })
  })
  await expectError(t, json, 415, "unsupported_media_type")
})

t.test("every accepted-and-ignored field of SPEC 2.5 is accepted", async (t) => {
  // Ignoring a field does not depend on the audio's length: a short clip (with the keyterms in it).
  const clip = { bytes: await tts("emma-en", "The weather in the park.") }
  const plain = await transcribe(t, {}, clip)
  t.ok(spokenWords(plain).length >= 2, `the clip has words to change: "${plain.text}"`)
  const ignored: Record<string, string | ReadonlyArray<string>> = {
    tag_audio_events: "true",
    num_speakers: "3",
    temperature: "0.7",
    seed: "12345",
    entity_detection: ["all", "pii"],
    entity_redaction: ["pii"],
    entity_redaction_mode: "redacted",
    no_verbatim: "true",
    detect_speaker_roles: "true",
    keyterms: ["weather", "park"],
    use_multi_channel: "false",
    file_format: "other",
    enable_logging: "false",
    max_characters_per_line: "32",
    max_segment_chars: "80",
    max_segment_duration_s: "4.5",
    segment_on_silence_longer_than_s: "0.5",
    diarization_threshold: "0.22",
    webhook: "false",
    webhook_metadata: JSON.stringify({ order: 7 }),
    use_speaker_library: "false",
    multichannel_output_style: "individual",
    transcript_edit: "false"
  }
  // Three requests at a time: the service has two workers and room for ten decodes (2 + 8 waiting).
  const entries = Object.entries(ignored)
  for (let i = 0; i < entries.length; i += 3) {
    await Promise.all(entries.slice(i, i + 3).map(async ([name, value]) => {
      const res = await stt({ model_id: "scribe_v1", [name]: value }, clip)
      t.equal(res.status, 200, `${name}=${JSON.stringify(value)} accepted`)
      if (res.status === 200) t.equal(((await res.json()) as Transcript).text, plain.text, `${name}: same transcript`)
      else t.comment(await res.text())
    }))
  }
  const together = await transcribe(t, { ...ignored, language_code: "en", model_id: "scribe_v2" }, clip)
  t.equal(together.text, plain.text, "all of them in one request (and another model id, and language_code en)")
})

// ---------------------------------------------------------------------------------------------
// 413 while the body streams in
// ---------------------------------------------------------------------------------------------

t.test("413 past 100 MB, sent while the upload streams in (chunked, no Content-Length)", async (t) => {
  const LIMIT = 100 * 1024 * 1024
  const TOTAL = 160 * 1024 * 1024
  const boundary = "----speech-test-413"
  const frame = (b: Buffer) => Buffer.concat([Buffer.from(`${b.length.toString(16)}\r\n`), b, Buffer.from("\r\n")])
  const payload = frame(Buffer.alloc(1024 * 1024, 0x5a)) // one MiB of file bytes per chunk, reused
  const gc = (globalThis as { gc?: () => void }).gc
  gc?.()
  const rssBefore = process.memoryUsage().rss
  let rssPeak = rssBefore
  const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, process.memoryUsage().rss)), 10)
  const outcome = await new Promise<{ response: string; writtenAtResponse: number; written: number }>((resolve) => {
    const socket = net.connect(service.port, "127.0.0.1")
    let written = 0
    let writtenAtResponse = -1
    let response = ""
    socket.setTimeout(120_000, () => socket.destroy())
    socket.on("error", () => {}) // EPIPE / ECONNRESET once the server closes after its answer
    socket.on("data", (d: Buffer) => {
      if (writtenAtResponse < 0) writtenAtResponse = written
      response += d.toString("latin1")
    })
    socket.on("close", () => resolve({ response, writtenAtResponse, written }))
    socket.write(
      `POST /api/v1/speech-to-text HTTP/1.1\r\nHost: 127.0.0.1\r\nxi-api-key: ${owner.apiKey}\r\n` +
        `Content-Type: multipart/form-data; boundary=${boundary}\r\nTransfer-Encoding: chunked\r\n\r\n`
    )
    socket.write(frame(Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="model_id"\r\n\r\nscribe_v1\r\n` +
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="huge.wav"\r\nContent-Type: application/octet-stream\r\n\r\n`
    )))
    const pump = () => {
      // Stop as soon as the answer arrives; honour the socket's backpressure.
      while (writtenAtResponse < 0 && written < TOTAL && !socket.destroyed) {
        written += 1024 * 1024
        if (!socket.write(payload)) return void socket.once("drain", pump)
      }
      if (written >= TOTAL && writtenAtResponse < 0 && !socket.destroyed) socket.end(`0\r\n\r\n`)
    }
    pump()
  })
  clearInterval(sampler)
  const growthMb = (rssPeak - rssBefore) / (1024 * 1024)
  const mb = (n: number) => `${(n / (1024 * 1024)).toFixed(1)} MB`
  t.comment(`413 arrived after ${mb(outcome.writtenAtResponse)} written (of ${mb(TOTAL)}); peak RSS growth of this process (server + client) ${growthMb.toFixed(1)} MB`)
  if (outcome.response === "") {
    // The documented race (README, HTTP framing): uWS answers 413 and closes at once; a client
    // still writing can get the reset before it reads the answer, more often on a loaded machine.
    // What must hold then: the server cut the upload off past the limit, before its end.
    t.comment("the reset overtook the 413 (documented race for chunked uploads without Content-Length)")
    t.ok(outcome.written > LIMIT && outcome.written < TOTAL, `the connection was closed past the limit and before the end (${mb(outcome.written)} written)`)
  } else {
    t.match(outcome.response, /^HTTP\/1\.1 413 /, "413 Payload Too Large")
    const body = outcome.response.slice(outcome.response.indexOf("\r\n\r\n") + 4)
    t.match(JSON.parse(body), { detail: { status: "payload_too_large" } })
    t.match(outcome.response, /\r\nconnection: close\r\n/i, "the server closes the connection (the rest is never read)")
    t.ok(outcome.writtenAtResponse > LIMIT, "the limit was really passed")
    t.ok(outcome.writtenAtResponse >= 0 && outcome.writtenAtResponse < TOTAL, "the answer came before the client had sent everything")
  }
  t.ok(growthMb < 64, `memory did not grow with the upload (${growthMb.toFixed(1)} MB < 64 MB)`)
  const after = await transcribe(t, {}, { bytes: clipA })
  t.ok(after.text.length > 0, "the service goes on transcribing")
})

// ---------------------------------------------------------------------------------------------
// Diarization
// ---------------------------------------------------------------------------------------------

/** The true speaker of a recognised word: the turn it overlaps most (else the nearest turn). */
const trueSpeaker = (turns: ReadonlyArray<Turn>, startMs: number, endMs: number): string => {
  let best = turns[0]!
  let bestScore = -Infinity
  for (const turn of turns) {
    const overlap = Math.min(endMs, turn.endMs) - Math.max(startMs, turn.startMs)
    const score = overlap > 0 ? overlap : -Math.min(Math.abs(startMs - turn.endMs), Math.abs(turn.startMs - endMs))
    if (score > bestScore) [best, bestScore] = [turn, score]
  }
  return best.speaker
}

t.test("diarization: a two-voice Flite dialogue (emma-en / james-en voices), right speaker for ≥ 85 % of words with num_speakers=2", async (t) => {
  const lines = [
    "Good morning, did you sleep well last night?",
    "Yes, thank you. The weather is nice today and we are going to the park.",
    "That sounds lovely. Can you tell me how to get to the train station?",
    "Take the second street on the left and walk for ten minutes.",
    "Thank you very much. I would like to order a large pizza with cheese.",
    "The meeting has been moved to next Tuesday afternoon.",
    "We need to finish this report by the end of the week.",
    "My brother works as a doctor in a small town."
  ].map((text, i) => ({ voice: i % 2 === 0 ? ("flite:slt" as const) : ("flite:rms" as const), text }))
  const spoken = await dialogue(lines, [500, 800, 600, 700])
  const wav = wavOf(floatToInt16(spoken.pcm))
  t.comment(`dialogue: ${lines.length} turns, ${(spoken.pcm.length / 16000).toFixed(1)} s`)

  const score = (tr: Transcript) => {
    const words = spokenWords(tr)
    const truth = words.map((w) => trueSpeaker(spoken.turns, w.start! * 1000, w.end! * 1000))
    const hypothesis = words.map((w) => w.speaker_id ?? "none")
    return { accuracy: labelAccuracy(truth, hypothesis), speakers: new Set(hypothesis).size, words: words.length }
  }

  const hinted = await transcribe(t, { diarize: "true", num_speakers: "2" }, { bytes: wav })
  t.ok(hinted.words.every((w) => /^speaker_\d+$/.test(w.speaker_id ?? "")), "speaker ids are speaker_0, speaker_1, ...")
  const withHint = score(hinted)
  t.comment(`measured with num_speakers=2: ${(withHint.accuracy * 100).toFixed(1)} % of ${withHint.words} words right`)
  t.equal(withHint.speakers, 2, "two speakers found")
  t.ok(withHint.accuracy >= 0.85, `num_speakers=2: ${(withHint.accuracy * 100).toFixed(1)} % of ${withHint.words} words on the right speaker (≥ 85 %)`)

  const free = score(await transcribe(t, { diarize: "true" }, { bytes: wav }))
  t.comment(`measured without num_speakers: ${(free.accuracy * 100).toFixed(1)} % of ${free.words} words right, ${free.speakers} speaker(s) found`)
})

// ---------------------------------------------------------------------------------------------
// Credits
// ---------------------------------------------------------------------------------------------

t.test("credits: one per started second of audio; 402 with none; failures cost nothing", async (t) => {
  const user = await service.newUser(100)
  const res = await stt({ model_id: "scribe_v1" }, { bytes: twoSentences }, user.apiKey)
  t.equal(res.status, 200)
  await res.json()
  const durationMs = Number(res.headers.get("x-audio-duration-ms"))
  t.ok(Math.abs(durationMs - seconds(twoSentences) * 1000) <= 1, `x-audio-duration-ms ${durationMs} is the audio's length`)
  const cost = Math.ceil(seconds(twoSentences))
  t.equal(await balance(user.userId), 100 - cost, `${seconds(twoSentences).toFixed(2)} s of audio cost ${cost} credits`)

  const oneSecond = await stt({ model_id: "scribe_v1" }, { bytes: wavOf(new Int16Array(8000)) }, user.apiKey)
  t.equal(oneSecond.status, 200)
  await oneSecond.arrayBuffer()
  t.equal(await balance(user.userId), 100 - cost - 1, "half a second of silence costs one credit (a started second)")

  const text = new TextEncoder().encode("not audio at all\n".repeat(100))
  await expectError(t, await stt({ model_id: "scribe_v1" }, { bytes: text }, user.apiKey), 415)
  t.equal(await balance(user.userId), 100 - cost - 1, "a refused file costs nothing")

  const broke = await service.newUser(0)
  await expectError(t, await stt({ model_id: "scribe_v1" }, { bytes: clipA }, broke.apiKey), 402, "quota_exceeded")
  const short = await service.newUser(2)
  await expectError(t, await stt({ model_id: "scribe_v1" }, { bytes: twoSentences }, short.apiKey), 402, "quota_exceeded")
  t.equal(await balance(short.userId), 2, "a refused debit leaves the balance alone")
})
