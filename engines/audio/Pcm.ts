/**
 * PCM sample helpers shared by the engines and the HTTP/WS encoders.
 *
 * Float samples are nominally in [-1, 1]; Int16 samples are signed 16-bit. Conversions clip
 * instead of wrapping, because a wrapped sample is an audible click. Durations are in ms, rates
 * in Hz, lengths in samples (mono: one sample per frame).
 */

/**
 * Float [-1, 1] → signed 16-bit, clipping out-of-range values; rounds to nearest. Scale 32768,
 * the exact inverse of `int16ToFloat`, so Int16 → float → Int16 is lossless (+1.0 clips to 32767).
 */
export const floatToInt16 = (samples: Float32Array): Int16Array => {
  const out = new Int16Array(samples.length)
  for (let i = 0; i < samples.length; i++) {
    // floor(v + 0.5) is Math.round(v) here (v = s · 2^15 and v + 0.5 are exact in a double) and
    // twice as fast on this hot path. NaN fails both compares and stores as 0: silence.
    const v = Math.floor(samples[i]! * 32768 + 0.5)
    out[i] = v > 32767 ? 32767 : v < -32768 ? -32768 : v
  }
  return out
}

/** Signed 16-bit → float, dividing by 32768 (so -32768 maps to exactly -1). */
export const int16ToFloat = (samples: Int16Array): Float32Array => {
  const out = new Float32Array(samples.length)
  for (let i = 0; i < samples.length; i++) out[i] = samples[i]! / 32768
  return out
}

const HOST_IS_LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1

/**
 * Little-endian bytes of Int16 samples (s16le), independent of host byte order.
 * Hazard: on a little-endian host (every platform Node ships for) this is a view of the same
 * memory, not a copy, because the audio hot paths would otherwise copy every response once more;
 * do not mutate `samples` while the bytes are in use.
 */
export const int16ToBytesLE = (samples: Int16Array): Uint8Array => {
  if (HOST_IS_LITTLE_ENDIAN) return new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength)
  const out = new Uint8Array(samples.length * 2)
  const view = new DataView(out.buffer)
  for (let i = 0; i < samples.length; i++) view.setInt16(i * 2, samples[i]!, true)
  return out
}

/** Reads s16le bytes; an odd trailing byte is ignored. */
export const bytesLEToInt16 = (bytes: Uint8Array): Int16Array => {
  const n = bytes.length >> 1
  const out = new Int16Array(n)
  const view = new DataView(bytes.buffer, bytes.byteOffset, n * 2)
  for (let i = 0; i < n; i++) out[i] = view.getInt16(i * 2, true)
  return out
}

/** Root mean square of float samples (0 for an empty array). */
export const rms = (samples: Float32Array): number => {
  if (samples.length === 0) return 0
  let sum = 0
  for (let i = 0; i < samples.length; i++) sum += samples[i]! * samples[i]!
  return Math.sqrt(sum / samples.length)
}

/** RMS in dB relative to full scale; -Infinity for digital silence. */
export const rmsDbfs = (samples: Float32Array): number => 20 * Math.log10(rms(samples))

/** Largest absolute sample value. */
export const peak = (samples: Float32Array): number => {
  let p = 0
  for (let i = 0; i < samples.length; i++) {
    const a = Math.abs(samples[i]!)
    if (a > p) p = a
  }
  return p
}

/** Duration of `sampleCount` samples at `sampleRate` Hz, in ms (not rounded). */
export const durationMs = (sampleCount: number, sampleRate: number): number => (sampleCount * 1000) / sampleRate

/** Number of samples covering `ms` at `sampleRate` Hz, rounded to the nearest sample. */
export const samplesForMs = (ms: number, sampleRate: number): number => Math.round((ms * sampleRate) / 1000)

/** Digital silence lasting `ms` at `sampleRate` Hz. */
export const silence = (ms: number, sampleRate: number): Float32Array => new Float32Array(samplesForMs(ms, sampleRate))

/** Joins typed arrays into one of the same kind (one copy), made by `make` for the total length. */
export const concat = <T extends Float32Array | Int16Array | Uint8Array>(parts: ReadonlyArray<T>, make: (length: number) => T): T => {
  let n = 0
  for (const p of parts) n += p.length
  const out = make(n)
  let o = 0
  for (const p of parts) {
    out.set(p, o)
    o += p.length
  }
  return out
}

/** Concatenates float chunks into one array. */
export const concatFloat32 = (parts: ReadonlyArray<Float32Array>): Float32Array => concat(parts, (n) => new Float32Array(n))

/** Concatenates Int16 chunks into one array. */
export const concatInt16 = (parts: ReadonlyArray<Int16Array>): Int16Array => concat(parts, (n) => new Int16Array(n))

/** Concatenates byte chunks into one array. */
export const concatBytes = (...parts: ReadonlyArray<Uint8Array>): Uint8Array => concat(parts, (n) => new Uint8Array(n))

/** The blocks as one array: the block itself when there is one (no copy), else one copy. */
export const joinBlocks = (blocks: ReadonlyArray<Int16Array>): Int16Array => (blocks.length === 1 ? blocks[0]! : concatInt16(blocks))
