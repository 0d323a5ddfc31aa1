/**
 * Expressive tags over HTTP (SPEC 2.4): tagged text takes the expressive path and answers WAV
 * whatever output_format asks; /stream answers in sentence mode. The whole service runs in this
 * process with real engines.
 */
import t from "tap"
import { parseWav } from "../../engines/audio/Wav.ts"
import { startTestService } from "../support/service.ts"

const service = await startTestService(t, { WORKERS: "2" })
const owner = await service.newUser(1_000_000)

const ESTONIAN = "mari" // espeak-ng, et+f3
const ENGLISH_FLITE = "emma-en" // Flite slt
const TAGGED_ET = "[rahulolu]\nTere hommikust, kallis sõber.\n[/rahulolu]\n[sosin]\nTäna on ilus ilm.\n[/sosin]\nLähme jalutama [naer]"
const TAGGED_EN = "[raev]\n[huue]\nGet out of my garden right now!\n[/huue]\n[/raev]\n[laul]\nLa la la, the garden is mine.\n[/laul] [ohe]"

const post = (path: string, body: unknown, query = "") =>
  fetch(`${service.base}${path}${query === "" ? "" : `?${query}`}`, {
    method: "POST",
    headers: { "content-type": "application/json", "xi-api-key": owner.apiKey },
    body: JSON.stringify(body)
  })

const wavOf = async (res: Response) => parseWav(new Uint8Array(await res.arrayBuffer()))

t.test("tagged text answers WAV even when raw PCM is asked for", async (t) => {
  for (const voice of [ESTONIAN, ENGLISH_FLITE]) {
    const res = await post(`/text-to-speech/${voice}`, { text: voice === ESTONIAN ? TAGGED_ET : TAGGED_EN }, "output_format=pcm_16000")
    t.equal(res.status, 200, voice)
    t.equal(res.headers.get("content-type"), "audio/wav", `${voice}: audio/wav, not audio/pcm`)
    t.equal(res.headers.get("x-audio-sample-rate"), "24000", `${voice}: non-WAV formats give WAV at 24000 Hz`)
    const wav = await wavOf(res)
    t.equal(wav.sampleRate, 24000)
    t.ok(wav.channelData[0]!.length > 24000, `${voice}: more than a second of audio`)
    t.ok(Number(res.headers.get("x-audio-duration-ms")) > 1000)
  }
})

t.test("a requested WAV rate is kept; ulaw and mp3 are ignored for tagged text", async (t) => {
  const wav16 = await post(`/text-to-speech/${ESTONIAN}`, { text: TAGGED_ET }, "output_format=wav_16000")
  t.equal(wav16.headers.get("content-type"), "audio/wav")
  t.equal((await wavOf(wav16)).sampleRate, 16000)
  for (const format of ["ulaw_8000", "mp3_44100_128"]) {
    const res = await post(`/text-to-speech/${ESTONIAN}`, { text: TAGGED_ET }, `output_format=${format}`)
    t.equal(res.status, 200, format)
    t.equal(res.headers.get("content-type"), "audio/wav", format)
    t.equal((await wavOf(res)).sampleRate, 24000, format)
  }
})

t.test("untagged text keeps the standard path (raw PCM stays raw; unknown brackets are not tags)", async (t) => {
  const res = await post(`/text-to-speech/${ESTONIAN}`, { text: "Tere! [naerab] Kuidas sul läheb?" }, "output_format=pcm_16000")
  t.equal(res.status, 200)
  t.equal(res.headers.get("content-type"), "audio/pcm")
  t.equal(res.headers.get("x-audio-sample-rate"), "16000")
})

t.test("the sync and streamed expressive audio are the same bytes", async (t) => {
  const whole = new Uint8Array(await (await post(`/text-to-speech/${ESTONIAN}`, { text: TAGGED_ET })).arrayBuffer())
  const streamed = new Uint8Array(await (await post(`/text-to-speech/${ESTONIAN}/stream`, { text: TAGGED_ET })).arrayBuffer())
  t.same(Buffer.from(streamed.subarray(44)), Buffer.from(whole.subarray(44)), "same PCM after the 44-byte headers")
  const again = new Uint8Array(await (await post(`/text-to-speech/${ESTONIAN}`, { text: TAGGED_ET })).arrayBuffer())
  t.same(Buffer.from(again), Buffer.from(whole), "deterministic")
})

t.test("/stream with tags: sentence mode, WAV, even with sentence_chunking false", async (t) => {
  for (const chunking of [true, false]) {
    const res = await post(`/text-to-speech/${ENGLISH_FLITE}/stream`, { text: TAGGED_EN, sentence_chunking: chunking }, "output_format=pcm_22050")
    t.equal(res.status, 200)
    t.equal(res.headers.get("x-streaming-mode"), "sentence", `sentence_chunking ${chunking}`)
    t.equal(res.headers.get("x-sentence-count"), "2", "one segment per tagged sentence, the exhale riding with the song")
    t.equal(res.headers.get("content-type"), "audio/wav")
    const bytes = new Uint8Array(await res.arrayBuffer())
    t.equal(new TextDecoder().decode(bytes.subarray(0, 4)), "RIFF")
    t.equal(new DataView(bytes.buffer).getUint32(40, true), 0xffffffff, "streaming WAV header with placeholder length")
    t.ok(bytes.length > 44 + 2 * 24000, "audio follows")
  }
})

t.test("with-timestamps: WAV audio, and the tags' characters are in the alignment but unspoken", async (t) => {
  const res = await post(`/text-to-speech/${ENGLISH_FLITE}/with-timestamps`, { text: TAGGED_EN }, "output_format=pcm_16000")
  t.equal(res.status, 200)
  const body = await res.json() as { audio_base64: string; alignment: { characters: Array<string>; character_start_times_seconds: Array<number> } }
  t.equal(Buffer.from(body.audio_base64, "base64").subarray(0, 4).toString("latin1"), "RIFF")
  t.equal(body.alignment.characters.join(""), TAGGED_EN, "alignment spells the request")
  const garden = TAGGED_EN.indexOf("garden")
  const song = TAGGED_EN.indexOf("La la")
  t.ok(body.alignment.character_start_times_seconds[song]! > body.alignment.character_start_times_seconds[garden]!, "timings follow the text")
})

t.test("text that is only tags is refused", async (t) => {
  const res = await post(`/text-to-speech/${ESTONIAN}`, { text: "[raev]\n[/raev] [laughs]" })
  t.equal(res.status, 400)
  const body = await res.json() as { detail: { status: string } }
  t.equal(body.detail.status, "invalid_request")
})
