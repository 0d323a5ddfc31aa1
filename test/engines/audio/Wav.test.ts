import t from "tap"
import { bytesLEToInt16, concatFloat32, durationMs, floatToInt16, int16ToBytesLE, int16ToFloat, peak, rms, rmsDbfs, samplesForMs, silence } from "../../../engines/audio/Pcm.ts"
import { encodeWav, parseWav, toMono, WAV_HEADER_BYTES, wavHeader } from "../../../engines/audio/Wav.ts"

const view = (b: Uint8Array) => new DataView(b.buffer, b.byteOffset, b.byteLength)
const ascii = (b: Uint8Array, o: number) => String.fromCharCode(...b.subarray(o, o + 4))

t.test("header fields for a known size", async (t) => {
  const h = wavHeader({ sampleRate: 24000, dataBytes: 48000 })
  const v = view(h)
  t.equal(h.length, WAV_HEADER_BYTES)
  t.same([ascii(h, 0), ascii(h, 8), ascii(h, 12), ascii(h, 36)], ["RIFF", "WAVE", "fmt ", "data"])
  t.equal(v.getUint32(4, true), 36 + 48000, "RIFF size")
  t.equal(v.getUint32(16, true), 16, "fmt size")
  t.equal(v.getUint16(20, true), 1, "PCM")
  t.equal(v.getUint16(22, true), 1, "mono")
  t.equal(v.getUint32(24, true), 24000, "sample rate")
  t.equal(v.getUint32(28, true), 48000, "byte rate")
  t.equal(v.getUint16(32, true), 2, "block align")
  t.equal(v.getUint16(34, true), 16, "bits")
  t.equal(v.getUint32(40, true), 48000, "data size")
})

t.test("streaming header uses 0xFFFFFFFF placeholders and parses to EOF", async (t) => {
  const h = wavHeader({ sampleRate: 22050 })
  t.equal(view(h).getUint32(4, true), 0xffffffff)
  t.equal(view(h).getUint32(40, true), 0xffffffff)
  const body = int16ToBytesLE(Int16Array.of(1000, -1000, 5))
  const parsed = parseWav(Uint8Array.from([...h, ...body]))
  t.ok(parsed.streaming)
  t.equal(parsed.channelData[0]!.length, 3)
  t.throws(() => wavHeader({ sampleRate: 16000, dataBytes: 2 ** 32 }), RangeError)
})

t.test("encode → parse round trip", async (t) => {
  const samples = Int16Array.of(0, 1, -1, 32767, -32768, 1234)
  const wav = encodeWav(samples, 16000)
  t.equal(wav.length, 44 + 12)
  const p = parseWav(wav)
  t.same([p.sampleRate, p.channels, p.bitsPerSample, p.format, p.streaming], [16000, 1, 16, 1, false])
  t.same(Array.from(floatToInt16(p.channelData[0]!)), Array.from(samples))
  t.same(Array.from(floatToInt16(toMono(parseWav(encodeWav(Float32Array.of(0.5, -0.5), 8000))))), [16384, -16384], "float input")
})

t.test("parser: other encodings, extra chunks, errors", async (t) => {
  const build = (format: number, channels: number, bits: number, data: Uint8Array, extra?: Uint8Array) => {
    const fmt = new Uint8Array(16)
    const f = view(fmt)
    f.setUint16(0, format, true)
    f.setUint16(2, channels, true)
    f.setUint32(4, 8000, true)
    f.setUint32(8, 8000 * channels * (bits / 8), true)
    f.setUint16(12, channels * (bits / 8), true)
    f.setUint16(14, bits, true)
    const chunk = (id: string, body: Uint8Array) => {
      const head = new Uint8Array(8)
      head.set([...id].map((c) => c.charCodeAt(0)))
      view(head).setUint32(4, body.length, true)
      return [...head, ...body, ...(body.length % 2 ? [0] : [])]
    }
    return Uint8Array.from([..."RIFF"].map((c) => c.charCodeAt(0)).concat([0, 0, 0, 0], [..."WAVE"].map((c) => c.charCodeAt(0)), chunk("fmt ", fmt), extra ? chunk("LIST", extra) : [], chunk("data", data)))
  }
  const u8 = parseWav(build(1, 1, 8, Uint8Array.of(128, 255, 0)))
  t.same(Array.from(u8.channelData[0]!), [0, 127 / 128, -1], "8-bit unsigned")
  const s24 = parseWav(build(1, 1, 24, Uint8Array.of(0, 0, 0x40, 0, 0, 0xc0)))
  t.same(Array.from(s24.channelData[0]!), [0.5, -0.5], "24-bit")
  const f32 = new Uint8Array(8)
  view(f32).setFloat32(0, 0.25, true)
  view(f32).setFloat32(4, -0.75, true)
  const stereo = parseWav(build(3, 2, 32, f32, Uint8Array.of(1, 2, 3)))
  t.same([stereo.channels, stereo.format, stereo.channelData[0]![0], stereo.channelData[1]![0]], [2, 3, 0.25, -0.75], "float stereo after an odd-sized chunk")
  t.same(Array.from(toMono(stereo)), [-0.25], "mono mixdown")
  t.throws(() => parseWav(Uint8Array.of(1, 2, 3)), { name: "WavParseError", message: /not a RIFF/ })
  t.throws(() => parseWav(build(2, 1, 16, Uint8Array.of(0, 0))), /format tag 2/)
})

t.test("PCM helpers", async (t) => {
  t.same(Array.from(floatToInt16(Float32Array.of(0, 1, -1, 2, -2, 0.5, NaN))), [0, 32767, -32768, 32767, -32768, 16384, 0], "clips, never wraps")
  t.same(Array.from(int16ToFloat(Int16Array.of(-32768, 16384))), [-1, 0.5])
  t.same(Array.from(bytesLEToInt16(int16ToBytesLE(Int16Array.of(-2, 300)))), [-2, 300])
  t.same(Array.from(int16ToBytesLE(Int16Array.of(0x0102))), [0x02, 0x01], "little-endian")
  t.equal(rms(Float32Array.of(0.5, -0.5)), 0.5)
  t.equal(rms(new Float32Array(0)), 0)
  t.equal(rmsDbfs(new Float32Array(4)), -Infinity)
  t.equal(peak(Float32Array.of(0.1, -0.7, 0.3)), Float32Array.of(0.7)[0])
  t.equal(durationMs(22050, 22050), 1000)
  t.equal(samplesForMs(20, 48000), 960)
  t.equal(silence(10, 16000).length, 160)
  t.same(Array.from(concatFloat32([Float32Array.of(1), Float32Array.of(2, 3)])), [1, 2, 3])
})
