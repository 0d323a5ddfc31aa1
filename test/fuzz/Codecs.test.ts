/**
 * Property tests of the audio codecs (engines/audio/Pcm.ts, Mulaw.ts, Wav.ts): lossless s16
 * round trips, the G.711 µ-law quantization bound, and a WAV parser that, on any bytes (random,
 * truncated, mutated headers), either parses or throws its own `WavParseError`, never a
 * RangeError from a DataView read past the end. Fixed seeds: a failure reproduces.
 */
import fc from "fast-check"
import t from "tap"
import { mulawDecode, mulawEncode, mulawToLinear, linearToMulaw } from "../../engines/audio/Mulaw.ts"
import { bytesLEToInt16, floatToInt16, int16ToBytesLE, int16ToFloat } from "../../engines/audio/Pcm.ts"
import { encodeWav, parseWav, WAV_HEADER_BYTES, wavHeader, WavParseError } from "../../engines/audio/Wav.ts"

const int16s = fc.array(fc.integer({ min: -32768, max: 32767 }), { maxLength: 2000 }).map((a) => Int16Array.from(a))

/** Parses, or throws only the module's own error type; answers whether it parsed. */
const parsesOrRefuses = (bytes: Uint8Array): boolean => {
  try {
    parseWav(bytes)
    return true
  } catch (e) {
    if (e instanceof WavParseError) return false
    throw new Error(`parseWav threw ${(e as Error).name}: ${(e as Error).message} on ${Buffer.from(bytes.subarray(0, 64)).toString("hex")}`)
  }
}

t.test("s16: bytes round trip and float round trip are the identity", async (t) => {
  fc.assert(fc.property(int16s, (s) => {
    const back = bytesLEToInt16(int16ToBytesLE(s))
    const viaFloat = floatToInt16(int16ToFloat(s))
    return back.length === s.length && viaFloat.length === s.length && s.every((v, i) => back[i] === v && viaFloat[i] === v)
  }), { seed: 0x5eed01, numRuns: 300 })
  t.pass("300 arrays")
})

t.test("s16: an odd trailing byte is ignored, never read", async (t) => {
  fc.assert(fc.property(fc.uint8Array({ maxLength: 301 }), (b) => {
    const s = bytesLEToInt16(b)
    return s.length === b.length >> 1 && s.every((v, i) => v === ((b[2 * i]! | (b[2 * i + 1]! << 8)) << 16 >> 16))
  }), { seed: 0x5eed02, numRuns: 300 })
  t.pass("300 byte strings")
})

t.test("floatToInt16: any float (NaN, ±Infinity, huge) lands in range; in-range values round to nearest", async (t) => {
  fc.assert(fc.property(fc.array(fc.float({ noDefaultInfinity: false }), { maxLength: 200 }), (xs) => {
    const out = floatToInt16(Float32Array.from(xs))
    return xs.every((x, i) => {
      const v = out[i]!
      if (Number.isNaN(x)) return v === 0
      const f = Math.fround(x)
      if (f * 32768 >= 32767) return v === 32767
      if (f * 32768 <= -32768) return v === -32768
      return Math.abs(v - f * 32768) <= 0.5
    })
  }), { seed: 0x5eed03, numRuns: 300 })
  t.pass("300 arrays")
})

t.test("µ-law: decode∘encode is within half a quantization step of the clipped input", async (t) => {
  fc.assert(fc.property(fc.integer({ min: -32768, max: 32767 }), (x) => {
    const clipped = Math.max(-32635, Math.min(32635, x))
    const y = mulawToLinear(linearToMulaw(x))
    // Segment e covers |x| + 132 in [2^(e+7), 2^(e+8)) with steps of 2^(e+3): error ≤ 2^(e+2) ≤ (|x| + 132) / 32.
    const bound = (Math.abs(clipped) + 132) / 32
    return Math.abs(y - clipped) <= bound && Math.sign(y) * Math.sign(clipped) >= 0 && Math.abs(y) <= 32124
  }), { seed: 0x5eed04, numRuns: 2000 })
  t.pass("2000 samples")
})

t.test("µ-law: encode∘decode is the identity on codes (0x7f, negative zero, maps to 0xff)", async (t) => {
  fc.assert(fc.property(fc.integer({ min: 0, max: 255 }), (b) => linearToMulaw(mulawToLinear(b)) === (b === 0x7f ? 0xff : b)), { seed: 0x5eed05, numRuns: 256 })
  t.pass("codes")
})

t.test("µ-law: array codecs agree with the scalar ones and are monotonic", async (t) => {
  fc.assert(fc.property(int16s, (s) => {
    const enc = mulawEncode(s)
    const dec = mulawDecode(enc)
    if (enc.length !== s.length || dec.length !== s.length) return false
    for (let i = 0; i < s.length; i++) {
      if (enc[i] !== linearToMulaw(s[i]!) || dec[i] !== mulawToLinear(enc[i]!)) return false
    }
    const sorted = Int16Array.from(s).sort()
    const decSorted = mulawDecode(mulawEncode(sorted))
    for (let i = 1; i < decSorted.length; i++) if (decSorted[i]! < decSorted[i - 1]!) return false
    return true
  }), { seed: 0x5eed06, numRuns: 200 })
  t.pass("200 arrays")
})

t.test("WAV: encodeWav → parseWav gives back the samples and the rate", async (t) => {
  fc.assert(fc.property(int16s, fc.integer({ min: 1, max: 192_000 }), (s, rate) => {
    const bytes = encodeWav(s, rate)
    const wav = parseWav(bytes)
    const ch = wav.channelData[0]!
    return bytes.length === WAV_HEADER_BYTES + 2 * s.length && wav.sampleRate === rate && wav.channels === 1 &&
      wav.bitsPerSample === 16 && wav.format === 1 && !wav.streaming && ch.length === s.length &&
      s.every((v, i) => ch[i] === v / 32768)
  }), { seed: 0x5eed07, numRuns: 200 })
  t.pass("200 files")
})

t.test("WAV: wavHeader refuses bad rates and sizes with a RangeError, otherwise is 44 bytes", async (t) => {
  fc.assert(fc.property(fc.oneof(fc.integer(), fc.double()), fc.option(fc.oneof(fc.integer(), fc.double({ min: 0, max: 2 ** 33 }))), (rate, dataBytes) => {
    try {
      const h = wavHeader({ sampleRate: rate, ...(dataBytes !== null ? { dataBytes } : {}) })
      return h.length === 44 && Number.isInteger(rate) && rate > 0
    } catch (e) {
      return e instanceof RangeError
    }
  }), { seed: 0x5eed08, numRuns: 300 })
  t.pass("300 headers")
})

t.test("WAV: random bytes never throw anything but WavParseError", async (t) => {
  fc.assert(fc.property(fc.uint8Array({ maxLength: 200 }), (b) => {
    parsesOrRefuses(b)
  }), { seed: 0x5eed09, numRuns: 500 })
  t.pass("500 byte strings")
})

/** A WAV header whose fields are random where the parser reads them. */
const fuzzedHeader = fc.record({
  format: fc.constantFrom(1, 3, 0xfffe, 0, 2, 0xffff),
  channels: fc.constantFrom(0, 1, 2, 3, 8),
  rate: fc.constantFrom(0, 8000, 24000, 0xffffffff),
  bits: fc.constantFrom(0, 1, 8, 12, 16, 24, 32, 40, 64, 0xffff),
  fmtSize: fc.constantFrom(0, 15, 16, 18, 26, 40, 0xffffffff),
  junk: fc.option(fc.record({ id: fc.constantFrom("LIST", "fact", "JUNK"), size: fc.constantFrom(0, 1, 3, 100, 0xfffffff0) })),
  dataSize: fc.constantFrom(0, 1, 7, 100, 0xffffffff, 0x7fffffff),
  data: fc.uint8Array({ maxLength: 64 })
})

t.test("WAV: fuzzed header fields and every truncation point throw only WavParseError", async (t) => {
  fc.assert(fc.property(fuzzedHeader, fc.nat(), (h, cutSeed) => {
    const chunks: Array<Buffer> = [Buffer.from("RIFF\xff\xff\xff\xffWAVE", "latin1")]
    if (h.junk !== null) {
      const j = Buffer.alloc(8)
      j.write(h.junk.id, 0, "latin1")
      j.writeUInt32LE(h.junk.size, 4)
      chunks.push(j, Buffer.alloc(Math.min(h.junk.size, 8)))
    }
    const fmt = Buffer.alloc(8 + 40)
    fmt.write("fmt ", 0, "latin1")
    fmt.writeUInt32LE(h.fmtSize, 4)
    fmt.writeUInt16LE(h.format, 8)
    fmt.writeUInt16LE(h.channels, 10)
    fmt.writeUInt32LE(h.rate, 12)
    fmt.writeUInt16LE(h.bits, 22)
    fmt.writeUInt16LE(h.format === 0xfffe ? 3 : 0, 32) // extensible subformat
    const fmtBody = Math.min(h.fmtSize, 40)
    chunks.push(fmt.subarray(0, 8 + fmtBody + (fmtBody & 1)))
    const data = Buffer.alloc(8)
    data.write("data", 0, "latin1")
    data.writeUInt32LE(h.dataSize, 4)
    chunks.push(data, Buffer.from(h.data))
    const whole = Buffer.concat(chunks)
    parsesOrRefuses(whole)
    // Every cut of the same file, and one random cut with the rest mutated.
    for (let cut = 0; cut < whole.length; cut++) parsesOrRefuses(whole.subarray(0, cut))
    const m = Buffer.from(whole)
    m[cutSeed % m.length] = cutSeed & 0xff
    parsesOrRefuses(m)
  }), { seed: 0x5eed0a, numRuns: 300 })
  t.pass("300 headers with all their truncations")
})

t.test("WAV: a valid file cut anywhere parses as streaming or is refused, never a RangeError", async (t) => {
  fc.assert(fc.property(int16s, fc.double({ min: 0, max: 1, noNaN: true }), (s, at) => {
    const bytes = encodeWav(s, 16000)
    const cut = bytes.subarray(0, Math.floor(bytes.length * at))
    if (!parsesOrRefuses(cut)) return cut.length < WAV_HEADER_BYTES
    const wav = parseWav(cut)
    const ch = wav.channelData[0]!
    return ch.length === Math.max(0, (cut.length - WAV_HEADER_BYTES) >> 1) && ch.every((v, i) => v === s[i]! / 32768)
  }), { seed: 0x5eed0b, numRuns: 300 })
  t.pass("300 cuts")
})
