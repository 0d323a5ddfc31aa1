/**
 * The text-to-speech endpoints as a client meets them (SPEC 2.2, 2.4, 4 endpoints 1, 3, 4, 5 and
 * the with-timestamps variants): the whole service runs in this process with real engines, and
 * every check goes over HTTP. Mid-stream failures need an engine that fails on demand, so those
 * run the same routes on the bridge with a fake Synthesizer (the only fake in this file).
 */
import { Effect, Exit, Layer, References, Scope } from "effect"
import t, { type Test } from "tap"
import { SpeechError } from "../../engines/tts/SpeechError.ts"
import { asOneBlock, type SynthesisRequest, Synthesizer } from "../../actors/Synthesizer.ts"
import { mulawDecode } from "../../engines/audio/Mulaw.ts"
import { OUTPUT_SAMPLE_RATES } from "../../engines/audio/OutputFormat.ts"
import { bytesLEToInt16, int16ToFloat, rms } from "../../engines/audio/Pcm.ts"
import { parseWav, WAV_HEADER_BYTES } from "../../engines/audio/Wav.ts"
import { segmentSentences } from "../../engines/text/Segmenter.ts"
import type { SynthesizeOutput } from "../../engines/tts/tasks.ts"
import { findPreset, PRESET_VOICES } from "../../engines/tts/Voices.ts"
import { ttsRoutes } from "../../protocol/routes/tts.ts"
import { makeHttpServer } from "../../runtime/HttpServer.ts"
import { HttpMetrics } from "../../runtime/Metrics.ts"
import { Router } from "../../runtime/Router.ts"
import { ApiKeys } from "../../storage/ApiKeys.ts"
import { Users } from "../../storage/Users.ts"
import { Credits, makeCredits } from "../../storage/Credits.ts"
import { accountLayers } from "../support/accounts.ts"
import { useTestDatabaseWith } from "../support/database.ts"
import { startTestService } from "../support/service.ts"

const service = await startTestService(t, { WORKERS: "2" })
const owner = await service.newUser(1_000_000)

const ESTONIAN = "mari" // espeak-ng, et+f3
const ENGLISH_FLITE = "emma-en" // Flite slt
const SHORT_ET = "Tere! Kuidas sul täna läheb?"
const THREE_SENTENCES_ET = "Tere hommikust, kallis sõber. Täna on ilus ja päikeseline ilm. Lähme koos pargis jalutama."

interface Call {
  readonly query?: string
  readonly apiKey?: string | null
  readonly rawBody?: string
  readonly signal?: AbortSignal
}

/** POST a TTS request; `body` is JSON-encoded unless `rawBody` is given. */
const post = (path: string, body: unknown, call: Call = {}): Promise<Response> => {
  const headers: Record<string, string> = { "content-type": "application/json" }
  const key = call.apiKey === undefined ? owner.apiKey : call.apiKey
  if (key !== null) headers["xi-api-key"] = key
  const query = call.query === undefined ? "" : `?${call.query}`
  return fetch(`${service.base}${path}${query}`, {
    method: "POST",
    headers,
    body: call.rawBody ?? JSON.stringify(body),
    ...(call.signal !== undefined ? { signal: call.signal } : {})
  })
}

const bytesOf = async (res: Response) => new Uint8Array(await res.arrayBuffer())

/** Asserts a SPEC 2.1 error body with the given status (and `detail.status` code when given). */
const expectError = async (t: Test, res: Response, status: number, code?: string) => {
  t.equal(res.status, status, `answers ${status}`)
  t.match(res.headers.get("content-type"), /application\/json/, "error body is JSON")
  const body = await res.json() as { detail?: { status?: unknown; message?: unknown } }
  t.type(body.detail?.status, "string", "detail.status is a string")
  t.type(body.detail?.message, "string", "detail.message is a string")
  if (code !== undefined) t.equal(body.detail?.status, code, `detail.status is ${code}`)
  return body
}

const wavSamples = (bytes: Uint8Array): Float32Array => parseWav(bytes).channelData[0]!
const pcmSamples = (bytes: Uint8Array): Float32Array => int16ToFloat(bytesLEToInt16(bytes))
const u32 = (bytes: Uint8Array, offset: number) => new DataView(bytes.buffer, bytes.byteOffset).getUint32(offset, true)
const ascii = (bytes: Uint8Array, offset: number) => String.fromCharCode(...bytes.subarray(offset, offset + 4))
const balance = (userId: string) => Effect.runPromise(service.users.balance(userId))

/** Non-silent: RMS above -40 dBFS (espeak and Flite speech sits around -20). */
const SPEECH_RMS = 0.01

/** Reads a streamed body to its end or to a transport error; keeps the chunks as they came. */
const readStream = async (res: Response) => {
  const chunks: Array<Uint8Array> = []
  let error: unknown
  const reader = res.body!.getReader()
  try {
    while (true) {
      const { done, value } = await reader.read()
      if (done) break
      chunks.push(value)
    }
  } catch (e) {
    error = e
  }
  return { chunks, bytes: Buffer.concat(chunks), error }
}

/** Polls until `check` returns true or the (generous) deadline passes; returns the last result. */
const eventually = async (check: () => Promise<boolean>, timeoutMs = 30_000): Promise<boolean> => {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (await check()) return true
    await new Promise((r) => setTimeout(r, 50))
  }
  return check()
}

const metric = (text: string, name: string): number => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1] ?? NaN)

// ---------------------------------------------------------------------------------------------
// POST /text-to-speech/{voice_id}
// ---------------------------------------------------------------------------------------------

t.test("default wav: a valid RIFF/WAVE at 24 kHz whose length matches x-audio-duration-ms", async (t) => {
  const res = await post(`/text-to-speech/${ESTONIAN}`, { text: SHORT_ET })
  t.equal(res.status, 200)
  t.equal(res.headers.get("content-type"), "audio/wav")
  t.equal(res.headers.get("x-audio-sample-rate"), "24000")
  const bytes = await bytesOf(res)
  t.equal(ascii(bytes, 0), "RIFF", "RIFF tag")
  t.equal(u32(bytes, 4), bytes.length - 8, "RIFF size = file size - 8")
  t.equal(ascii(bytes, 8), "WAVE", "WAVE tag")
  t.equal(ascii(bytes, 12), "fmt ", "fmt chunk first")
  t.equal(ascii(bytes, 36), "data", "data chunk after a 16-byte fmt")
  t.equal(u32(bytes, 40), bytes.length - WAV_HEADER_BYTES, "data size = bytes after the 44-byte header")
  const wav = parseWav(bytes)
  t.match(wav, { sampleRate: 24000, channels: 1, bitsPerSample: 16, format: 1, streaming: false }, "PCM s16 mono 24 kHz")
  const samples = wav.channelData[0]!.length
  const headerMs = Number(res.headers.get("x-audio-duration-ms"))
  t.ok(headerMs > 1000, `about two seconds of speech (${headerMs} ms)`)
  // The header is the exact duration rounded to whole ms: within half a millisecond of frames.
  t.ok(Math.abs((samples * 1000) / 24000 - headerMs) <= 0.5, `${samples} frames at 24 kHz = ${(samples * 1000) / 24000} ms vs header ${headerMs}`)
  t.ok(rms(wav.channelData[0]!) > SPEECH_RMS, "not silent")
})

/** Every accepted output_format with its container, content type, rate and bytes per frame. */
const formats: Array<{ name: string; container: "wav" | "pcm" | "ulaw"; rate: number }> = [
  { name: "wav", container: "wav", rate: 24000 },
  ...OUTPUT_SAMPLE_RATES.map((rate) => ({ name: `wav_${rate}`, container: "wav" as const, rate })),
  ...OUTPUT_SAMPLE_RATES.map((rate) => ({ name: `pcm_${rate}`, container: "pcm" as const, rate })),
  { name: "ulaw_8000", container: "ulaw", rate: 8000 }
]

t.test("every output_format: content type, rate header, container and length", async (t) => {
  const contentType = { wav: "audio/wav", pcm: "audio/pcm", ulaw: "audio/basic" }
  const durations: Array<number> = []
  for (const f of formats) {
    await t.test(f.name, async (t) => {
      const res = await post(`/text-to-speech/${ESTONIAN}`, { text: SHORT_ET }, { query: `output_format=${f.name}` })
      t.equal(res.status, 200)
      t.equal(res.headers.get("content-type"), contentType[f.container], "content type")
      t.equal(res.headers.get("x-audio-sample-rate"), String(f.rate), "x-audio-sample-rate")
      const headerMs = Number(res.headers.get("x-audio-duration-ms"))
      durations.push(headerMs)
      const bytes = await bytesOf(res)
      let frames: number
      let samples: Float32Array
      if (f.container === "wav") {
        const wav = parseWav(bytes)
        t.equal(wav.sampleRate, f.rate, "fmt sample rate")
        t.equal(u32(bytes, 40), bytes.length - WAV_HEADER_BYTES, "data size field")
        samples = wav.channelData[0]!
        frames = samples.length
      } else {
        t.not(ascii(bytes, 0), "RIFF", "raw audio, no WAV header")
        const bytesPerFrame = f.container === "pcm" ? 2 : 1
        t.equal(bytes.length % bytesPerFrame, 0, `${bytesPerFrame} byte(s) per sample`)
        frames = bytes.length / bytesPerFrame
        samples = f.container === "pcm" ? pcmSamples(bytes) : int16ToFloat(mulawDecode(bytes))
      }
      const expectedFrames = (headerMs * f.rate) / 1000
      // Whole-ms header: frames agree within the rounding of the header (half a ms of frames).
      t.ok(Math.abs(frames - expectedFrames) <= f.rate / 2000 + 1, `${frames} frames vs ${headerMs} ms × ${f.rate} Hz = ${expectedFrames}`)
      t.ok(rms(samples) > SPEECH_RMS, `not silent (rms ${rms(samples).toFixed(3)})`)
    })
  }
  const spread = Math.max(...durations) - Math.min(...durations)
  t.ok(spread <= 2, `the same speech lasts the same at every rate (durations ${Math.min(...durations)}–${Math.max(...durations)} ms)`)
})

t.test("MP3, Opus and unknown formats give 415 with the error body, on sync and stream, without charge", async (t) => {
  const before = await balance(owner.userId)
  for (const name of ["mp3_44100_128", "opus_48000_64", "mp3_22050_32", "pcm_11025", "ulaw_16000", "flac"]) {
    await expectError(t, await post(`/text-to-speech/${ESTONIAN}`, { text: SHORT_ET }, { query: `output_format=${name}` }), 415, "unsupported_output_format")
    await expectError(t, await post(`/text-to-speech/${ESTONIAN}/stream`, { text: SHORT_ET }, { query: `output_format=${name}` }), 415, "unsupported_output_format")
  }
  t.equal(await balance(owner.userId), before, "refused requests cost nothing")
})

t.test("text limits: over 8000 characters is 400 text_too_long; exactly 8000 is accepted", async (t) => {
  const sentence = "Üks lause, mis kordub ikka ja jälle. "
  const exactly = sentence.repeat(Math.ceil(8000 / sentence.length)).slice(0, 8000)
  await expectError(t, await post(`/text-to-speech/${ESTONIAN}`, { text: exactly + "x" }), 400, "text_too_long")
  await expectError(t, await post(`/text-to-speech/${ESTONIAN}/stream`, { text: exactly + "x" }), 400, "text_too_long")
  const res = await post(`/text-to-speech/${ESTONIAN}`, { text: exactly }, { query: "output_format=pcm_8000" })
  t.equal(res.status, 200, "8000 characters synthesize")
  t.ok((await bytesOf(res)).length > 8000 * 2 * 60, "minutes of audio")
})

t.test("malformed requests give 400", async (t) => {
  const cases: Array<[string, Call & { body?: unknown }]> = [
    ["empty text", { body: { text: "" } }],
    ["blank text", { body: { text: "  \n\t " } }],
    ["text missing", { body: { model_id: "svc_v1" } }],
    ["text not a string", { body: { text: 42 } }],
    ["speed above 2", { body: { text: SHORT_ET, voice_settings: { speed: 3 } } }],
    ["speed below 0.5", { body: { text: SHORT_ET, voice_settings: { speed: 0.1 } } }],
    ["malformed JSON", { rawBody: '{"text": "Tere' }],
    ["JSON that is not an object", { rawBody: '"Tere"' }],
    ["no body at all", { rawBody: "" }]
  ]
  for (const [name, c] of cases) {
    await t.test(name, async (t) => {
      await expectError(t, await post(`/text-to-speech/${ESTONIAN}`, c.body, c), 400)
    })
  }
})

t.test("accepted-and-ignored fields do not break a request", async (t) => {
  const res = await post(`/text-to-speech/${ESTONIAN}`, {
    text: SHORT_ET,
    model_id: "eleven_multilingual_v2",
    voice_settings: { stability: 0.5, similarity_boost: 0.75, style: 0, use_speaker_boost: true },
    previous_text: "Eelmine.",
    next_text: "Järgmine.",
    seed: 42
  }, { query: "optimize_streaming_latency=3&enable_logging=false" })
  t.equal(res.status, 200)
  t.ok(parseWav(await bytesOf(res)).channelData[0]!.length > 0)
})

t.test("unknown voice gives 404; a missing or wrong key 401", async (t) => {
  await expectError(t, await post("/text-to-speech/no-such-voice", { text: SHORT_ET }), 404, "voice_not_found")
  await expectError(t, await post("/text-to-speech/no-such-voice/stream", { text: SHORT_ET }), 404, "voice_not_found")
  const anonymous = await post(`/text-to-speech/${ESTONIAN}`, { text: SHORT_ET }, { apiKey: null })
  t.match(anonymous.headers.get("www-authenticate"), /^Bearer resource_metadata="/, "WWW-Authenticate points at the resource metadata")
  await expectError(t, anonymous, 401)
  await expectError(t, await post(`/text-to-speech/${ESTONIAN}/stream`, { text: SHORT_ET }, { apiKey: null }), 401)
  await expectError(t, await post(`/text-to-speech/${ESTONIAN}`, { text: SHORT_ET }, { apiKey: "sk_svc_wrong" }), 401, "invalid_api_key")
})

t.test("credits: debited by text length on success; too few credits is 402 and nothing is taken", async (t) => {
  const before = await balance(owner.userId)
  t.equal((await post(`/text-to-speech/${ESTONIAN}`, { text: SHORT_ET })).status, 200)
  t.equal(await balance(owner.userId), before - SHORT_ET.length, `${SHORT_ET.length} credits for ${SHORT_ET.length} characters`)

  const poor = await service.newUser(SHORT_ET.length - 1)
  await expectError(t, await post(`/text-to-speech/${ESTONIAN}`, { text: SHORT_ET }, { apiKey: poor.apiKey }), 402)
  await expectError(t, await post(`/text-to-speech/${ESTONIAN}/stream`, { text: SHORT_ET }, { apiKey: poor.apiKey }), 402)
  t.equal(await balance(poor.userId), SHORT_ET.length - 1, "balance unchanged after 402")

  const exact = await service.newUser(SHORT_ET.length)
  t.equal((await post(`/text-to-speech/${ESTONIAN}`, { text: SHORT_ET }, { apiKey: exact.apiKey })).status, 200, "an exact balance is enough")
  t.equal(await balance(exact.userId), 0)
})

t.test("text a voice renders as no audio at all (punctuation only on Flite's kal voices) is 400, not an empty 200, and costs nothing", async (t) => {
  for (const voice of ["walter-en", "kevin-en"]) {
    for (const text of ["----------", "\"\"\"\"", "... ", "!? "]) {
      const before = await balance(owner.userId)
      await expectError(t, await post(`/text-to-speech/${voice}`, { text }), 400, "invalid_request")
      await expectError(t, await post(`/text-to-speech/${voice}/stream`, { text }), 400, "invalid_request")
      await expectError(t, await post(`/text-to-speech/${voice}/with-timestamps`, { text }), 400, "invalid_request")
      await expectError(t, await post(`/text-to-speech/${voice}/stream/with-timestamps`, { text }), 400, "invalid_request")
      t.ok(await eventually(async () => (await balance(owner.userId)) === before), `${voice} ${text}: nothing charged`)
    }
  }
})

t.test("deterministic: the same request twice gives identical bytes", async (t) => {
  for (const voice of [ESTONIAN, ENGLISH_FLITE]) {
    const body = { text: voice === ESTONIAN ? THREE_SENTENCES_ET : "The quick brown fox jumps over the lazy dog. Twice, in fact." }
    const a = await bytesOf(await post(`/text-to-speech/${voice}`, body))
    const b = await bytesOf(await post(`/text-to-speech/${voice}`, body))
    t.ok(a.length > WAV_HEADER_BYTES, `${voice}: audio returned`)
    t.ok(Buffer.from(a).equals(b), `${voice}: byte-identical`)
  }
})

t.test("voice_settings.speed: 2 is shorter than 1, which is shorter than 0.5", async (t) => {
  const duration = async (speed: number) => {
    const res = await post(`/text-to-speech/${ESTONIAN}`, { text: THREE_SENTENCES_ET, voice_settings: { speed } })
    t.equal(res.status, 200)
    await res.arrayBuffer()
    return Number(res.headers.get("x-audio-duration-ms"))
  }
  const [fast, normal, slow] = [await duration(2), await duration(1), await duration(0.5)]
  t.ok(fast < normal && normal < slow, `speed 2: ${fast} ms, 1: ${normal} ms, 0.5: ${slow} ms`)
  t.ok(slow > 2 * fast, "0.5 is much slower than 2")
})

t.test("audio is speech, not silence: Estonian espeak preset and English Flite preset", async (t) => {
  for (const [voice, text] of [[ESTONIAN, SHORT_ET], [ENGLISH_FLITE, "Hello! How are you today?"]] as const) {
    const res = await post(`/text-to-speech/${voice}`, { text })
    t.equal(res.status, 200)
    const samples = wavSamples(await bytesOf(res))
    const level = rms(samples)
    t.ok(level > SPEECH_RMS, `${voice}: rms ${level.toFixed(4)} > ${SPEECH_RMS}`)
    t.ok(samples.length > 24000 * 0.5, `${voice}: more than half a second`)
  }
})

// ---------------------------------------------------------------------------------------------
// POST /text-to-speech/{voice_id}/stream
// ---------------------------------------------------------------------------------------------

t.test("stream, sentence mode: headers, one segment per sentence, streaming WAV header", async (t) => {
  const segments = segmentSentences(THREE_SENTENCES_ET, { locale: "et" })
  t.equal(segments.length, 3, "the text has three sentence segments")
  const res = await post(`/text-to-speech/${ESTONIAN}/stream`, { text: THREE_SENTENCES_ET })
  t.equal(res.status, 200)
  t.equal(res.headers.get("content-type"), "audio/wav")
  t.equal(res.headers.get("x-streaming-mode"), "sentence")
  t.equal(res.headers.get("x-sentence-count"), String(segments.length), "x-sentence-count equals the segments")
  t.equal(res.headers.get("x-audio-sample-rate"), "24000")
  t.equal(res.headers.get("content-length"), null, "length unknown: chunked")
  const { bytes, error } = await readStream(res)
  t.equal(error, undefined, "the stream ends cleanly")
  t.equal(ascii(bytes, 0), "RIFF")
  t.equal(u32(bytes, 4), 0xffffffff, "RIFF size placeholder")
  t.equal(ascii(bytes, 8), "WAVE")
  t.equal(u32(bytes, 40), 0xffffffff, "data size placeholder")
  const wav = parseWav(bytes)
  t.match(wav, { sampleRate: 24000, channels: 1, bitsPerSample: 16, streaming: true })
  t.equal((bytes.length - WAV_HEADER_BYTES) % 2, 0, "whole s16 frames")
  t.ok(rms(wav.channelData[0]!) > SPEECH_RMS, "the streamed audio is speech")
})

t.test("stream and sync give the same audio for the same text (same segments, same PCM; the stream in engine blocks)", async (t) => {
  for (const format of ["wav_24000", "pcm_16000", "ulaw_8000", "pcm_22050", "pcm_44100"]) {
    const sync = await post(`/text-to-speech/${ESTONIAN}`, { text: THREE_SENTENCES_ET }, { query: `output_format=${format}` })
    const syncBytes = await bytesOf(sync)
    const stream = await readStream(await post(`/text-to-speech/${ESTONIAN}/stream`, { text: THREE_SENTENCES_ET }, { query: `output_format=${format}` }))
    const header = format.startsWith("wav") ? WAV_HEADER_BYTES : 0
    const syncAudio = syncBytes.subarray(header)
    const streamAudio = stream.bytes.subarray(header)
    t.equal(streamAudio.length, syncAudio.length, `${format}: same number of audio bytes`)
    t.ok(Buffer.from(streamAudio).equals(syncAudio), `${format}: byte-identical audio after the header`)
  }
})

t.test("stream with sentence_chunking:false is one synthesis, mode single, no sentence count", async (t) => {
  const res = await post(`/text-to-speech/${ESTONIAN}/stream`, { text: THREE_SENTENCES_ET, sentence_chunking: false })
  t.equal(res.status, 200)
  t.equal(res.headers.get("x-streaming-mode"), "single")
  t.equal(res.headers.get("x-sentence-count"), null, "no x-sentence-count in single mode")
  const { bytes, error } = await readStream(res)
  t.equal(error, undefined)
  t.equal(u32(bytes, 40), 0xffffffff, "still a streaming WAV header")
  t.ok(rms(wavSamples(bytes)) > SPEECH_RMS)
})

t.test("pcm_ stream has no header; ulaw stream is audio/basic", async (t) => {
  const pcm = await post(`/text-to-speech/${ESTONIAN}/stream`, { text: THREE_SENTENCES_ET }, { query: "output_format=pcm_22050" })
  t.equal(pcm.headers.get("content-type"), "audio/pcm")
  t.equal(pcm.headers.get("x-audio-sample-rate"), "22050")
  const { bytes } = await readStream(pcm)
  t.not(ascii(bytes, 0), "RIFF", "raw PCM from the first byte")
  t.equal(bytes.length % 2, 0)
  t.ok(rms(pcmSamples(bytes)) > SPEECH_RMS)
  const ulaw = await post(`/text-to-speech/${ESTONIAN}/stream`, { text: THREE_SENTENCES_ET }, { query: "output_format=ulaw_8000" })
  t.equal(ulaw.headers.get("content-type"), "audio/basic")
  t.ok(rms(int16ToFloat(mulawDecode((await readStream(ulaw)).bytes))) > SPEECH_RMS)
})

t.test("a client that disconnects mid-stream stops the work and gets the rest refunded", async (t) => {
  const user = await service.newUser(20_000)
  // 150 sentences, ~7,200 characters, minutes of 48 kHz audio: far more than socket buffers
  // hold, so the server is still synthesizing (held back by backpressure) when the client goes.
  const sentences = Array.from({ length: 150 }, (_, i) => `Pika jutu lause number ${i + 1}, mida keegi ei kuula.`)
  const text = sentences.join(" ")
  t.ok(text.length <= 8000, `${text.length} characters`)
  const controller = new AbortController()
  const res = await post(`/text-to-speech/${ESTONIAN}/stream`, { text }, { apiKey: user.apiKey, query: "output_format=wav_48000", signal: controller.signal })
  t.equal(res.status, 200)
  t.ok(Number(res.headers.get("x-sentence-count")) > 100, `${res.headers.get("x-sentence-count")} segments`)
  const reader = res.body!.getReader()
  const first = await reader.read()
  t.ok((first.value?.length ?? 0) > 0, "first chunk of audio arrived")
  controller.abort()
  await reader.cancel().catch(() => undefined)

  let last = ""
  const idle = await eventually(async () => {
    last = await (await fetch(`${service.siteUrl}/metrics`)).text()
    return metric(last, "worker_pool_running") === 0 && metric(last, "worker_pool_queue_depth") === 0 && metric(last, "http_in_flight") === 0
  })
  t.ok(idle, `pool idle and no request in flight soon after the disconnect (running ${metric(last, "worker_pool_running")}, queued ${metric(last, "worker_pool_queue_depth")}, in flight ${metric(last, "http_in_flight")})`)
  const after = await balance(user.userId)
  const charged = 20_000 - after
  t.ok(charged > 0, `something was charged (${charged} credits)`)
  t.ok(charged < text.length, `the undelivered part was refunded: charged ${charged} of ${text.length} characters`)
  t.comment(`disconnect after the first chunk: charged ${charged} of ${text.length} characters`)
})

// ---------------------------------------------------------------------------------------------
// with-timestamps
// ---------------------------------------------------------------------------------------------

interface Alignment {
  characters: Array<string>
  character_start_times_seconds: Array<number>
  character_end_times_seconds: Array<number>
}

/** Equal lengths, spells `text`, times non-decreasing, start ≤ end, inside [0, durationS]. */
const checkAlignment = (t: Test, a: Alignment, text: string, durationS: number) => {
  const n = a.characters.length
  t.equal(a.character_start_times_seconds.length, n, "as many start times as characters")
  t.equal(a.character_end_times_seconds.length, n, "as many end times as characters")
  t.equal(a.characters.join(""), text, "characters joined spell the input text")
  t.ok(a.characters.every((c) => c.length === 1), "one UTF-16 unit per entry")
  const problems: Array<string> = []
  for (let i = 0; i < n; i++) {
    const s = a.character_start_times_seconds[i]!
    const e = a.character_end_times_seconds[i]!
    if (!(s <= e)) problems.push(`#${i} starts ${s} after it ends ${e}`)
    if (i > 0 && s < a.character_start_times_seconds[i - 1]!) problems.push(`#${i} start ${s} before previous start`)
    if (i > 0 && e < a.character_end_times_seconds[i - 1]!) problems.push(`#${i} end ${e} before previous end`)
    if (s < 0 || e > durationS + 0.001) problems.push(`#${i} [${s}, ${e}] outside [0, ${durationS}]`)
  }
  t.same(problems.slice(0, 5), [], "times monotonic and within the audio")
}

t.test("/with-timestamps: base64 WAV plus character alignment of the whole text", async (t) => {
  for (const [voice, text] of [[ESTONIAN, THREE_SENTENCES_ET], [ENGLISH_FLITE, "Hello there, friend. It's 5 o'clock — time for tea!"]] as const) {
    await t.test(voice, async (t) => {
      const res = await post(`/text-to-speech/${voice}/with-timestamps`, { text })
      t.equal(res.status, 200)
      t.match(res.headers.get("content-type"), /application\/json/)
      const body = await res.json() as { audio_base64: string; alignment: Alignment; normalized_alignment: Alignment }
      const audio = Buffer.from(body.audio_base64, "base64")
      const wav = parseWav(audio)
      const durationS = wav.channelData[0]!.length / wav.sampleRate
      t.ok(Math.abs(durationS * 1000 - Number(res.headers.get("x-audio-duration-ms"))) <= 0.5, "x-audio-duration-ms matches the audio")
      checkAlignment(t, body.alignment, text, durationS)
      t.same(body.normalized_alignment, body.alignment, "normalized_alignment present")
      const last = body.alignment.character_end_times_seconds.at(-1)!
      t.ok(last > durationS * 0.5, `alignment spans the speech (last end ${last} s of ${durationS.toFixed(3)} s)`)
    })
  }
})

t.test("/stream/with-timestamps: one NDJSON line per segment; alignments concatenate to the text", async (t) => {
  const segments = segmentSentences(THREE_SENTENCES_ET, { locale: "et" })
  const res = await post(`/text-to-speech/${ESTONIAN}/stream/with-timestamps`, { text: THREE_SENTENCES_ET }, { query: "output_format=pcm_24000" })
  t.equal(res.status, 200)
  t.equal(res.headers.get("content-type"), "application/x-ndjson")
  t.equal(res.headers.get("x-sentence-count"), String(segments.length))
  const { bytes, error } = await readStream(res)
  t.equal(error, undefined)
  const lines = new TextDecoder().decode(bytes).split("\n").filter((l) => l.length > 0)
  t.equal(lines.length, segments.length, "one chunk per segment")
  const chunks = lines.map((l) => JSON.parse(l) as { audio_base64: string; alignment: Alignment })
  const audio = Buffer.concat(chunks.map((c) => Buffer.from(c.audio_base64, "base64")))
  const durationS = audio.length / 2 / 24000
  const joined: Alignment = {
    characters: chunks.flatMap((c) => c.alignment.characters),
    character_start_times_seconds: chunks.flatMap((c) => c.alignment.character_start_times_seconds),
    character_end_times_seconds: chunks.flatMap((c) => c.alignment.character_end_times_seconds)
  }
  checkAlignment(t, joined, THREE_SENTENCES_ET, durationS)
  // Each chunk's times lie inside that chunk's own audio on the response timeline.
  let offsetS = 0
  for (const [i, c] of chunks.entries()) {
    const chunkS = Buffer.from(c.audio_base64, "base64").length / 2 / 24000
    const starts = c.alignment.character_start_times_seconds
    const ends = c.alignment.character_end_times_seconds
    t.ok(starts[0]! >= offsetS - 0.001 && ends.at(-1)! <= offsetS + chunkS + 0.001, `chunk ${i} times in [${offsetS.toFixed(3)}, ${(offsetS + chunkS).toFixed(3)}] s`)
    offsetS += chunkS
  }
  const sync = await post(`/text-to-speech/${ESTONIAN}`, { text: THREE_SENTENCES_ET }, { query: "output_format=pcm_24000" })
  t.ok(Buffer.from(await bytesOf(sync)).equals(audio), "the chunks' audio equals the sync endpoint's")
})

t.test("/stream/with-timestamps, sentence_chunking:false, leading blanks: times fall on the right characters", async (t) => {
  const text = "     Hello world."
  const single = await post(`/text-to-speech/${ENGLISH_FLITE}/stream/with-timestamps`, { text, sentence_chunking: false })
  const line = JSON.parse((await single.text()).split("\n")[0]!) as { alignment: Alignment }
  const sync = await (await post(`/text-to-speech/${ENGLISH_FLITE}/with-timestamps`, { text })).json() as { alignment: Alignment }
  t.same(line.alignment, sync.alignment, "same audio (one segment either way), same alignment")
})

t.test("/stream/with-timestamps in wav: only the first chunk carries the streaming header", async (t) => {
  const res = await post(`/text-to-speech/${ESTONIAN}/stream/with-timestamps`, { text: THREE_SENTENCES_ET })
  const lines = (await res.text()).split("\n").filter((l) => l.length > 0)
  const audios = lines.map((l) => Buffer.from((JSON.parse(l) as { audio_base64: string }).audio_base64, "base64"))
  t.equal(u32(audios[0]!, 40), 0xffffffff, "first chunk starts with a streaming WAV header")
  t.ok(audios.slice(1).every((a) => ascii(a, 0) !== "RIFF"), "later chunks are bare audio")
})

// ---------------------------------------------------------------------------------------------
// GET /voices, /voices/{id}, previews
// ---------------------------------------------------------------------------------------------

interface VoiceJson {
  voice_id: string
  name: string
  category: string
  description: string | null
  preview_url: string | null
  labels: Record<string, string>
}

t.test("GET /voices: ~150 presets, Estonian default first, ids shaped by language", async (t) => {
  await expectError(t, await fetch(`${service.base}/voices`), 401)
  const res = await fetch(`${service.base}/voices`, { headers: { "xi-api-key": owner.apiKey } })
  t.equal(res.status, 200)
  const { voices } = await res.json() as { voices: Array<VoiceJson> }
  t.ok(voices.length >= 130 && voices.length <= 170, `${voices.length} presets`)
  t.equal(new Set(voices.map((v) => v.voice_id)).size, voices.length, "ids are unique")
  const first = voices[0]!
  t.match(first.voice_id, /^[a-z]+$/, "the default is a bare lowercase id")
  t.equal(first.labels.language, "et", "the default is Estonian")
  const misshapen = voices.filter((v) =>
    v.labels.language === "et" ? !/^[a-z]+$/.test(v.voice_id) : v.voice_id !== `${v.voice_id.split("-")[0]}-${v.labels.language}` || !/^[a-z]+-[a-z]{2}$/.test(v.voice_id)
  )
  t.same(misshapen.map((v) => v.voice_id), [], "Estonian ids bare, others <name>-<iso639-1>")
  t.ok(voices.every((v) => v.category === "premade"), "all presets are premade")
  t.ok(voices.every((v) => v.preview_url?.startsWith(`${service.siteUrl}/api/v1/voices/`)), "preview URLs are absolute, under the site")
  t.ok(voices.some((v) => v.voice_id === ENGLISH_FLITE), "the Flite English preset is listed")
})

t.test("GET /voices/{voice_id}: 200 for a preset, 404 otherwise", async (t) => {
  const headers = { "xi-api-key": owner.apiKey }
  const res = await fetch(`${service.base}/voices/${ENGLISH_FLITE}`, { headers })
  t.equal(res.status, 200)
  const voice = await res.json() as VoiceJson
  const listed = (await (await fetch(`${service.base}/voices`, { headers })).json() as { voices: Array<VoiceJson> }).voices.find((v) => v.voice_id === ENGLISH_FLITE)
  t.same(voice, listed, "same record as in the list")
  t.match(voice, { voice_id: ENGLISH_FLITE, name: String, category: "premade", labels: { language: "en" } })
  await expectError(t, await fetch(`${service.base}/voices/no-such-voice`, { headers }), 404, "voice_not_found")
  await expectError(t, await fetch(`${service.base}/voices/${ESTONIAN}`), 401)
})

t.test("preview_url is public and serves a WAV of the voice", async (t) => {
  const { voices } = await (await fetch(`${service.base}/voices`, { headers: { "xi-api-key": owner.apiKey } })).json() as { voices: Array<VoiceJson> }
  for (const id of [ESTONIAN, ENGLISH_FLITE]) {
    const url = voices.find((v) => v.voice_id === id)!.preview_url!
    const res = await fetch(url)
    t.equal(res.status, 200, `${id}: preview fetched without a key`)
    t.equal(res.headers.get("content-type"), "audio/wav")
    const first = await bytesOf(res)
    const samples = wavSamples(first)
    t.ok(samples.length > 0 && rms(samples) > SPEECH_RMS, `${id}: preview is speech`)
    const again = await bytesOf(await fetch(url))
    t.ok(Buffer.from(again).equals(first), `${id}: asked again, the same bytes`)
  }
  await expectError(t, await fetch(`${service.base}/voices/no-such-voice/preview`), 404)
})

// ---------------------------------------------------------------------------------------------
// Failures while streaming (SPEC 4.1 rule 3): the real routes on the bridge, a fake engine
// ---------------------------------------------------------------------------------------------

t.test("streamed synthesis that fails on segment 1 or on a later segment", async (t) => {
  const db = useTestDatabaseWith(t, accountLayers())
  const MARKER = "KATKI" // a segment containing this word fails in the engine
  const RATE = 24000
  /** The fake engine: 10 ms of a 440 Hz tone per character, so sizes are known in advance. */
  const fakePcm = (text: string) => Int16Array.from({ length: text.length * (RATE / 100) }, (_, i) => Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / RATE)))
  const fakeSynthesize = (request: SynthesisRequest) =>
    request.text.includes(MARKER)
      ? Effect.fail(new SpeechError({ reason: "EngineFailed", message: "the fake engine fails on the marker" }))
      : Effect.sleep("5 millis").pipe(Effect.as<SynthesizeOutput>({ pcm: fakePcm(request.text), sampleRate: request.sampleRate, engineSampleRate: RATE, words: [], engineMs: 0 }))
  const fake = Synthesizer.of({
    voices: PRESET_VOICES,
    findVoice: findPreset,
    resolveVoice: (voiceId) => {
      const preset = findPreset(voiceId)
      return preset === undefined
        ? Effect.fail(new SpeechError({ reason: "VoiceNotFound", message: `voice "${voiceId}" not found` }))
        : Effect.succeed({ voiceId, kind: "preset" as const, language: preset.engineVoice.language, engineVoice: preset.engineVoice })
    },
    synthesize: (request) => fakeSynthesize(request),
    synthesizeStream: (request, onBlock) => asOneBlock(fakeSynthesize(request), onBlock),
    synthesizeExpressive: () => Effect.fail(new SpeechError({ reason: "EngineUnavailable", message: "the fake engine has no expressive path" })),
    preview: () => Effect.die("no previews in this test"),
    dropPreview: () => Effect.void,
    // Detaches, as the pool's recycle does: PCM read after it was given back would come out empty.
    recycle: (pcm) => void structuredClone(pcm.buffer, { transfer: [pcm.buffer as ArrayBuffer] })
  })
  const scope = Effect.runSync(Scope.make())
  t.teardown(() => Effect.runPromise(Scope.close(scope, Exit.void)))
  const server = await db.runtime.runPromise(
    Effect.gen(function*() {
      const keys = yield* ApiKeys
      const ctx = yield* Effect.context<never>()
      return yield* makeHttpServer({
        host: "127.0.0.1",
        port: 0,
        router: new Router(ttsRoutes({ apiBase: "/api/v1", maxJsonBodyBytes: 1 << 20, ahead: 2 })),
        authenticate: (c) => keys.authenticate(c),
        metrics: new HttpMetrics(ctx)
      })
    }).pipe(
      Effect.provide(Layer.succeed(Synthesizer, fake)),
      // The engine failures below are the point of the test, not faults worth printing.
      Effect.provideService(References.MinimumLogLevel, "None"),
      Scope.provide(scope)
    )
  )
  const user = await db.run(Effect.flatMap(Users, (a) => a.createUserWithKey({ name: "stream", credits: 10_000 })))
  const creditsLeft = () => db.run(Effect.flatMap(Users, (a) => a.balance(user.userId)))
  const stream = (text: string) =>
    fetch(`http://127.0.0.1:${server.port}/api/v1/text-to-speech/${ESTONIAN}/stream?output_format=pcm_24000`, {
      method: "POST",
      headers: { "xi-api-key": user.apiKey, "content-type": "application/json" },
      body: JSON.stringify({ text })
    })
  const sentences = ["Esimene lause on täiesti korras.", "Teine lause on samuti korras.", "Kolmas lause on KATKI ja ei tule.", "Neljas lause jääb tegemata."]

  await t.test("a clean run streams every segment (control)", async (t) => {
    const text = sentences.filter((s) => !s.includes(MARKER)).join(" ")
    const res = await stream(text)
    t.equal(res.status, 200)
    const { bytes, error } = await readStream(res)
    t.equal(error, undefined)
    const expected = segmentSentences(text, { locale: "et" }).reduce((n, s) => n + fakePcm(s.text).length * 2, 0)
    t.equal(bytes.length, expected, "every segment's audio")
  })

  await t.test("failure on the first segment: the normal 502 error body, nothing charged", async (t) => {
    const before = await creditsLeft()
    const text = [sentences[2], sentences[0]].join(" ")
    const res = await stream(text)
    await expectError(t, res, 502, "engine_failed")
    t.ok(await eventually(async () => (await creditsLeft()) === before), "the whole text refunded")
  })

  await t.test("failure on segment 3: 200, segments 1 and 2, then the connection ends without an error body", async (t) => {
    const before = await creditsLeft()
    const text = sentences.join(" ")
    const segments = segmentSentences(text, { locale: "et" })
    t.equal(segments.length, 4, "four segments")
    t.ok(segments[2]!.text.includes(MARKER), "the third holds the marker")
    const res = await stream(text)
    t.equal(res.status, 200, "the head went out with segment 1")
    t.equal(res.headers.get("x-sentence-count"), "4")
    const { bytes, error } = await readStream(res)
    t.ok(error !== undefined, `the body ends in a transport error, a short read (${String((error as Error)?.message)})`)
    const twoSegments = (fakePcm(segments[0]!.text).length + fakePcm(segments[1]!.text).length) * 2
    t.equal(bytes.length, twoSegments, "exactly the audio of segments 1 and 2")
    t.notOk(new TextDecoder().decode(bytes.subarray(-200)).includes("detail"), "no error body after the audio")
    const charged = segments[1]!.charEnd
    t.ok(await eventually(async () => (await creditsLeft()) === before - charged), `only the delivered ${charged} characters are charged`)
  })

  await t.test("credits spent elsewhere after this process heard the balance: the first block goes out early, the refused reservation ends the stream right after it, nothing is charged", async (t) => {
    const spender = await db.run(Effect.flatMap(Users, (a) => a.createUserWithKey({ name: "early", credits: 200 })))
    const streamAs = (text: string) =>
      fetch(`http://127.0.0.1:${server.port}/api/v1/text-to-speech/${ESTONIAN}/stream?output_format=pcm_24000`, {
        method: "POST",
        headers: { "xi-api-key": spender.apiKey, "content-type": "application/json" },
        body: JSON.stringify({ text })
      })
    const text = [sentences[0], sentences[1]].join(" ")
    const first = await streamAs(text)
    t.equal(first.status, 200)
    t.equal((await readStream(first)).error, undefined, "a clean stream: this process now knows the balance")
    const left = await db.run(Effect.flatMap(Users, (a) => a.balance(spender.userId)))
    t.equal(left, 200 - text.length)
    // Another process (a second Credits, with hints of its own) spends the rest.
    await db.run(Effect.flatMap(makeCredits(), (other) => other.debit(spender.userId, left)))
    const res = await streamAs(text)
    t.equal(res.status, 200, "sent early: the head and the first sentence did not wait for the reservation")
    const { bytes, error } = await readStream(res)
    t.ok(error !== undefined, "then the stream is cut (a short read)")
    const segments = segmentSentences(text, { locale: "et" })
    t.equal(bytes.length, fakePcm(segments[0]!.text).length * 2, "exactly the first block (the fake engine makes one per sentence)")
    t.equal(await db.run(Effect.flatMap(Users, (a) => a.balance(spender.userId))), 0, "nothing charged, nothing overdrawn")
    t.equal(await db.run(Effect.flatMap(Credits, (c) => c.reserved(spender.userId))), 0, "no reservation left open")
    await expectError(t, await streamAs(text), 402)
  })

  await t.test("with-timestamps stream: the same short read after the delivered lines", async (t) => {
    const res = await fetch(`http://127.0.0.1:${server.port}/api/v1/text-to-speech/${ESTONIAN}/stream/with-timestamps`, {
      method: "POST",
      headers: { "xi-api-key": user.apiKey, "content-type": "application/json" },
      body: JSON.stringify({ text: sentences.join(" ") })
    })
    t.equal(res.status, 200)
    const { bytes, error } = await readStream(res)
    t.ok(error !== undefined, "short read")
    const lines = new TextDecoder().decode(bytes).split("\n").filter((l) => l.length > 0)
    t.equal(lines.length, 2, "two complete NDJSON lines")
    t.ok(lines.every((l) => "audio_base64" in JSON.parse(l)), "both are audio chunks, no error line")
  })
})
