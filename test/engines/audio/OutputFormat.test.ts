import t from "tap"
import { OutputFormatError, parseOutputFormat } from "../../../engines/audio/OutputFormat.ts"

t.test("accepted values", async (t) => {
  const table: Array<[string | undefined, string, number, string]> = [
    [undefined, "wav", 24000, "audio/wav"],
    ["wav", "wav", 24000, "audio/wav"],
    ["wav_8000", "wav", 8000, "audio/wav"],
    ["wav_44100", "wav", 44100, "audio/wav"],
    ["wav_48000", "wav", 48000, "audio/wav"],
    ["pcm_8000", "pcm", 8000, "audio/pcm"],
    ["pcm_16000", "pcm", 16000, "audio/pcm"],
    ["pcm_22050", "pcm", 22050, "audio/pcm"],
    ["pcm_24000", "pcm", 24000, "audio/pcm"],
    ["pcm_32000", "pcm", 32000, "audio/pcm"],
    ["pcm_44100", "pcm", 44100, "audio/pcm"],
    ["pcm_48000", "pcm", 48000, "audio/pcm"],
    ["ulaw_8000", "ulaw", 8000, "audio/basic"]
  ]
  for (const [value, container, rate, type] of table) {
    const f = parseOutputFormat(value, 24000)
    t.same([f.container, f.sampleRate, f.contentType, f.name], [container, rate, type, `${container}_${rate}`], String(value))
    t.equal(f.bytesPerSample, container === "ulaw" ? 1 : 2)
  }
  t.equal(parseOutputFormat("wav", 16000).sampleRate, 16000, "bare wav uses the service default")
})

t.test("everything else is a 415 OutputFormatError", async (t) => {
  const table: Array<[string, string]> = [
    ["mp3_44100_128", "UnsupportedCodec"],
    ["mp3_22050_32", "UnsupportedCodec"],
    ["opus_48000_64", "UnsupportedCodec"],
    ["flac_44100", "UnsupportedCodec"],
    ["pcm_11025", "UnsupportedSampleRate"],
    ["pcm_016000", "UnsupportedSampleRate"],
    ["ulaw_16000", "UnsupportedSampleRate"],
    ["wav_12345", "UnsupportedSampleRate"],
    ["wav_44100_16", "Malformed"],
    ["pcm", "Malformed"],
    ["WAV", "Malformed"],
    ["", "Malformed"],
    ["mp3", "Malformed"]
  ]
  for (const [value, reason] of table) {
    let caught: unknown
    try {
      parseOutputFormat(value, 24000)
    } catch (e) {
      caught = e
    }
    t.ok(caught instanceof OutputFormatError && caught.reason === reason && caught.httpStatus === 415 && caught.value === value, `${JSON.stringify(value)} → ${reason}`)
  }
})
