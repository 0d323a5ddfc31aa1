/**
 * Media container detection from a file's first bytes (magic numbers), never from a declared
 * content type: SDKs upload everything as `application/octet-stream`.
 *
 * Only containers that ffmpeg decodes to audio are listed; anything else (text, images,
 * archives, PDFs, MIDI) is `undefined`, and the decoder refuses it without running ffmpeg.
 * That refusal matters: ffmpeg's own probing "decodes" plain text with its `tty` demuxer and
 * would follow playlists (`#EXTM3U`) to other files or URLs.
 *
 * MPEG audio without an ID3 tag is recognised by its frame header (sync, a valid layer,
 * bitrate and rate index), ADTS AAC by its sync word with layer 0. An ID3v2 tag is skipped when
 * its end lies within the sniffed bytes, so FLAC or AAC behind a tag is named correctly; a
 * longer tag (cover art) is assumed to precede MP3, which is what ffmpeg then probes anyway.
 */

export type MediaContainer =
  | "wav" | "mp3" | "aac" | "ogg" | "flac" | "mp4" | "m4a" | "mov" | "3gp" | "webm" | "mkv"
  | "aiff" | "caf" | "amr" | "asf" | "au" | "avi" | "flv" | "ac3" | "dts" | "wavpack" | "ape"
  | "mpegts" | "mpeg"

/** Bytes to read for `detectContainer` (MPEG-TS needs three packets of 188; EBML's DocType). */
export const SNIFF_BYTES = 4096

export const MEDIA_MIME: Readonly<Record<MediaContainer, string>> = {
  wav: "audio/wav", mp3: "audio/mpeg", aac: "audio/aac", ogg: "audio/ogg", flac: "audio/flac",
  mp4: "video/mp4", m4a: "audio/mp4", mov: "video/quicktime", "3gp": "video/3gpp", webm: "video/webm",
  mkv: "video/x-matroska", aiff: "audio/aiff", caf: "audio/x-caf", amr: "audio/amr", asf: "video/x-ms-asf",
  au: "audio/basic", avi: "video/x-msvideo", flv: "video/x-flv", ac3: "audio/ac3", dts: "audio/vnd.dts",
  wavpack: "audio/x-wavpack", ape: "audio/x-ape", mpegts: "video/mp2t", mpeg: "video/mpeg"
}

const ascii = (b: Uint8Array, offset: number, text: string): boolean => {
  if (b.length < offset + text.length) return false
  for (let i = 0; i < text.length; i++) if (b[offset + i] !== text.charCodeAt(i)) return false
  return true
}

const bytes = (b: Uint8Array, offset: number, values: ReadonlyArray<number>): boolean =>
  b.length >= offset + values.length && values.every((v, i) => b[offset + i] === v)

/** MPEG-1/2/2.5 audio layer I–III frame header at `o` (not ADTS, whose layer bits are 00). */
const mpegAudioHeader = (b: Uint8Array, o: number): boolean => {
  if (b.length < o + 4 || b[o] !== 0xff || (b[o + 1]! & 0xe0) !== 0xe0) return false
  const version = (b[o + 1]! >> 3) & 3 // 1 is reserved
  const layer = (b[o + 1]! >> 1) & 3 // 0 is reserved (ADTS uses it)
  const bitrate = b[o + 2]! >> 4 // 15 is invalid
  const rate = (b[o + 2]! >> 2) & 3 // 3 is reserved
  return version !== 1 && layer !== 0 && bitrate !== 15 && rate !== 3
}

const adtsHeader = (b: Uint8Array, o: number): boolean =>
  b.length >= o + 7 && b[o] === 0xff && (b[o + 1]! & 0xf6) === 0xf0 && ((b[o + 2]! >> 2) & 0xf) < 13

const isoBrand = (b: Uint8Array): MediaContainer => {
  const brand = String.fromCharCode(...b.subarray(8, 12))
  if (brand === "qt  ") return "mov"
  if (brand.startsWith("3g")) return "3gp"
  if (brand === "M4A " || brand === "M4B " || brand === "M4P ") return "m4a"
  return "mp4"
}

/** Size of an ID3v2 tag at the start (header, synchsafe size, optional footer), else 0. */
const id3Length = (b: Uint8Array): number => {
  if (!ascii(b, 0, "ID3") || b.length < 10) return 0
  const size = ((b[6]! & 0x7f) << 21) | ((b[7]! & 0x7f) << 14) | ((b[8]! & 0x7f) << 7) | (b[9]! & 0x7f)
  return 10 + size + (b[5]! & 0x10 ? 10 : 0)
}

/** The container the bytes start with, or undefined when they are not audio/video we decode. */
export const detectContainer = (b: Uint8Array): MediaContainer | undefined => {
  if ((ascii(b, 0, "RIFF") || ascii(b, 0, "RF64")) && ascii(b, 8, "WAVE")) return "wav"
  if (ascii(b, 0, "RIFF") && ascii(b, 8, "AVI ")) return "avi"
  if (ascii(b, 0, "ID3")) {
    const end = id3Length(b)
    const inner = end + 4 <= b.length ? detectContainer(b.subarray(end)) : undefined
    return inner === "flac" || inner === "aac" ? inner : "mp3"
  }
  if (ascii(b, 0, "OggS")) return "ogg"
  if (ascii(b, 0, "fLaC")) return "flac"
  if (ascii(b, 4, "ftyp")) return isoBrand(b)
  if (ascii(b, 4, "moov") || ascii(b, 4, "mdat") || ascii(b, 4, "wide")) return "mov" // QuickTime before ftyp existed
  if (bytes(b, 0, [0x1a, 0x45, 0xdf, 0xa3])) {
    const head = String.fromCharCode(...b.subarray(0, 64))
    return head.includes("webm") ? "webm" : "mkv"
  }
  if (ascii(b, 0, "FORM") && (ascii(b, 8, "AIFF") || ascii(b, 8, "AIFC"))) return "aiff"
  if (ascii(b, 0, "caff")) return "caf"
  if (ascii(b, 0, "#!AMR")) return "amr"
  if (bytes(b, 0, [0x30, 0x26, 0xb2, 0x75, 0x8e, 0x66, 0xcf, 0x11])) return "asf"
  if (ascii(b, 0, ".snd")) return "au"
  if (ascii(b, 0, "FLV") && b[3] === 1) return "flv"
  if (ascii(b, 0, "wvpk")) return "wavpack"
  if (ascii(b, 0, "MAC ")) return "ape"
  if (ascii(b, 0, "ADIF")) return "aac"
  if (bytes(b, 0, [0x0b, 0x77]) && b.length > 4 && b[4]! >> 6 !== 3) return "ac3" // fscod 3 is reserved
  if (bytes(b, 0, [0x7f, 0xfe, 0x80, 0x01])) return "dts"
  if (bytes(b, 0, [0x00, 0x00, 0x01, 0xba])) return "mpeg"
  if (b.length >= 377 && b[0] === 0x47 && b[188] === 0x47 && b[376] === 0x47) return "mpegts"
  if (mpegAudioHeader(b, 0)) return "mp3"
  if (adtsHeader(b, 0)) return "aac"
  return undefined
}
