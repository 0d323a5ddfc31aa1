/**
 * G.711 µ-law companding (8-bit, for `ulaw_8000` served as audio/basic).
 *
 * Encoder follows the ITU-T G.711 reference: bias 0x84 (132), clip at 32635, segment + 4-bit
 * mantissa, all bits inverted. The decoder is here for tests and for decoding telephony input.
 */

const BIAS = 0x84
const CLIP = 32635

/** One signed 16-bit sample → one µ-law byte. */
export const linearToMulaw = (sample: number): number => {
  let s = sample | 0
  const sign = s < 0 ? 0x80 : 0
  if (s < 0) s = -s
  if (s > CLIP) s = CLIP
  s += BIAS
  // Segment = position of the highest set bit above bit 7 (0..7).
  let exponent = 7
  for (let mask = 0x4000; (s & mask) === 0 && exponent > 0; mask >>= 1) exponent--
  const mantissa = (s >> (exponent + 3)) & 0x0f
  return ~(sign | (exponent << 4) | mantissa) & 0xff
}

/** One µ-law byte → signed 16-bit sample (range ±32124). */
export const mulawToLinear = (byte: number): number => {
  const u = ~byte & 0xff
  const exponent = (u >> 4) & 0x07
  const mantissa = u & 0x0f
  const magnitude = (((mantissa << 3) + BIAS) << exponent) - BIAS
  return u & 0x80 ? -magnitude : magnitude
}

/** Encodes Int16 samples to µ-law bytes (one byte per sample). */
export const mulawEncode = (samples: Int16Array): Uint8Array => {
  const out = new Uint8Array(samples.length)
  for (let i = 0; i < samples.length; i++) out[i] = linearToMulaw(samples[i]!)
  return out
}

/** Decodes µ-law bytes to Int16 samples. */
export const mulawDecode = (bytes: Uint8Array): Int16Array => {
  const out = new Int16Array(bytes.length)
  for (let i = 0; i < bytes.length; i++) out[i] = mulawToLinear(bytes[i]!)
  return out
}
