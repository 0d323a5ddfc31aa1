/**
 * RIFF/WAVE for PCM s16le mono output, and a tolerant parser for test fixtures and inputs.
 *
 * Output header (44 bytes): RIFF size = 36 + data bytes, fmt chunk of 16 bytes (PCM = 1),
 * data size = data bytes. For streamed output the total is unknown, so both size fields hold the
 * 0xFFFFFFFF placeholder (what ffmpeg/sox and the spec's streamed WAV do); players read to EOF.
 * Hazard: a WAV data chunk cannot exceed 4 GiB - 1 bytes; `wavHeader` refuses larger sizes.
 */
import { int16ToBytesLE, floatToInt16 } from "./Pcm.ts"

export const WAV_HEADER_BYTES = 44
/** Placeholder for RIFF and data sizes of a stream whose length is not known yet. */
export const WAV_STREAMING_SIZE = 0xffffffff

export interface WavHeaderOptions {
  readonly sampleRate: number
  readonly channels?: number
  readonly bitsPerSample?: number
  /** Byte length of the data chunk; omit for a streaming header with placeholder sizes. */
  readonly dataBytes?: number
}

/** 44-byte PCM WAV header (little-endian fields). */
export const wavHeader = (options: WavHeaderOptions): Uint8Array => {
  const channels = options.channels ?? 1
  const bits = options.bitsPerSample ?? 16
  const blockAlign = channels * (bits / 8)
  if (!Number.isInteger(options.sampleRate) || options.sampleRate <= 0) throw new RangeError(`bad sample rate ${options.sampleRate}`)
  if (options.dataBytes !== undefined && (options.dataBytes < 0 || options.dataBytes > 0xffffffff - 36)) {
    throw new RangeError(`WAV data size out of range: ${options.dataBytes}`)
  }
  const out = new Uint8Array(WAV_HEADER_BYTES)
  const v = new DataView(out.buffer)
  const ascii = (offset: number, s: string) => {
    for (let i = 0; i < s.length; i++) out[offset + i] = s.charCodeAt(i)
  }
  ascii(0, "RIFF")
  v.setUint32(4, options.dataBytes === undefined ? WAV_STREAMING_SIZE : 36 + options.dataBytes, true)
  ascii(8, "WAVE")
  ascii(12, "fmt ")
  v.setUint32(16, 16, true)
  v.setUint16(20, 1, true) // PCM
  v.setUint16(22, channels, true)
  v.setUint32(24, options.sampleRate, true)
  v.setUint32(28, options.sampleRate * blockAlign, true) // byte rate
  v.setUint16(32, blockAlign, true)
  v.setUint16(34, bits, true)
  ascii(36, "data")
  v.setUint32(40, options.dataBytes === undefined ? WAV_STREAMING_SIZE : options.dataBytes, true)
  return out
}

/** Complete mono s16le WAV file; float input is clipped to 16 bits. */
export const encodeWav = (samples: Int16Array | Float32Array, sampleRate: number): Uint8Array => {
  const pcm = int16ToBytesLE(samples instanceof Float32Array ? floatToInt16(samples) : samples)
  const out = new Uint8Array(WAV_HEADER_BYTES + pcm.length)
  out.set(wavHeader({ sampleRate, dataBytes: pcm.length }), 0)
  out.set(pcm, WAV_HEADER_BYTES)
  return out
}

export interface ParsedWav {
  readonly sampleRate: number
  readonly channels: number
  readonly bitsPerSample: number
  /** 1 = integer PCM, 3 = IEEE float (WAVE_FORMAT_EXTENSIBLE is resolved to its subformat). */
  readonly format: 1 | 3
  /** Declared data size was the streaming placeholder (or ran past the end of the bytes). */
  readonly streaming: boolean
  /** One float array per channel, samples scaled to [-1, 1]. */
  readonly channelData: ReadonlyArray<Float32Array>
}

export class WavParseError extends Error {
  readonly _tag = "WavParseError"
  override readonly name = "WavParseError"
}

/** Parses PCM 8/16/24/32-bit integer or 32/64-bit float WAV; skips unknown chunks. */
export const parseWav = (bytes: Uint8Array): ParsedWav => {
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const tag = (o: number) => String.fromCharCode(bytes[o]!, bytes[o + 1]!, bytes[o + 2]!, bytes[o + 3]!)
  if (bytes.length < 12 || tag(0) !== "RIFF" || tag(8) !== "WAVE") throw new WavParseError("not a RIFF/WAVE file")
  let fmt: { format: number; channels: number; sampleRate: number; bits: number } | undefined
  let offset = 12
  while (offset + 8 <= bytes.length) {
    const id = tag(offset)
    const declared = v.getUint32(offset + 4, true)
    const body = offset + 8
    if (id === "fmt ") {
      if (declared < 16) throw new WavParseError("fmt chunk too short")
      // A file cut inside its fmt chunk: the fields past the end cannot be read.
      if (body + 16 > bytes.length) throw new WavParseError("fmt chunk truncated")
      let format = v.getUint16(body, true)
      if (format === 0xfffe && declared >= 26 && body + 26 <= bytes.length) format = v.getUint16(body + 24, true) // extensible subformat GUID starts with the tag
      fmt = { format, channels: v.getUint16(body + 2, true), sampleRate: v.getUint32(body + 4, true), bits: v.getUint16(body + 14, true) }
    } else if (id === "data") {
      if (fmt === undefined) throw new WavParseError("data chunk before fmt chunk")
      const available = bytes.length - body
      const streaming = declared === WAV_STREAMING_SIZE || declared > available
      const size = streaming ? available : declared
      return decodeData(bytes.subarray(body, body + size), fmt, streaming)
    }
    // Chunks are word-aligned: odd sizes carry one pad byte.
    offset = body + declared + (declared & 1)
  }
  throw new WavParseError("no data chunk")
}

const decodeData = (
  data: Uint8Array,
  fmt: { format: number; channels: number; sampleRate: number; bits: number },
  streaming: boolean
): ParsedWav => {
  const { format, channels, bits } = fmt
  if (format !== 1 && format !== 3) throw new WavParseError(`unsupported WAV format tag ${format}`)
  if (channels < 1) throw new WavParseError("zero channels")
  const bytesPer = bits / 8
  if (!Number.isInteger(bytesPer) || bytesPer < 1 || bytesPer > 8) throw new WavParseError(`unsupported bit depth ${bits}`)
  const frames = Math.floor(data.length / (bytesPer * channels))
  const v = new DataView(data.buffer, data.byteOffset, data.byteLength)
  const out = Array.from({ length: channels }, () => new Float32Array(frames))
  const read = sampleReader(format, bits, v)
  for (let f = 0; f < frames; f++) {
    for (let c = 0; c < channels; c++) out[c]![f] = read((f * channels + c) * bytesPer)
  }
  return { sampleRate: fmt.sampleRate, channels, bitsPerSample: bits, format, streaming, channelData: out }
}

const sampleReader = (format: number, bits: number, v: DataView): ((o: number) => number) => {
  if (format === 3 && bits === 32) return (o) => v.getFloat32(o, true)
  if (format === 3 && bits === 64) return (o) => v.getFloat64(o, true)
  if (format === 3) throw new WavParseError(`unsupported float bit depth ${bits}`)
  switch (bits) {
    case 8:
      return (o) => (v.getUint8(o) - 128) / 128 // 8-bit WAV is unsigned
    case 16:
      return (o) => v.getInt16(o, true) / 32768
    case 24:
      return (o) => ((v.getUint8(o) | (v.getUint8(o + 1) << 8) | (v.getInt8(o + 2) << 16)) / 8388608)
    case 32:
      return (o) => v.getInt32(o, true) / 2147483648
    default:
      throw new WavParseError(`unsupported bit depth ${bits}`)
  }
}

/** Mono mixdown of parsed channels (average). */
export const toMono = (wav: ParsedWav): Float32Array => {
  if (wav.channels === 1) return wav.channelData[0]!
  const n = wav.channelData[0]!.length
  const out = new Float32Array(n)
  for (const ch of wav.channelData) for (let i = 0; i < n; i++) out[i]! += ch[i]! / wav.channels
  return out
}
