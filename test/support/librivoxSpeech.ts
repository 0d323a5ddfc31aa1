/**
 * Real human speech for tests: the 7.1 s LibriVox reading (16 kHz mono 16-bit WAV) that
 * Debian's pocketsphinx-testdata ships, installed by scripts/setup.sh.
 */
import * as fs from "node:fs"

export const LIBRIVOX_WAV = "/usr/share/pocketsphinx/test/data/librivox/sense_and_sensibility_01_austen_64kb-0870.wav"

export const SPEECH: Buffer = fs.readFileSync(LIBRIVOX_WAV)

/** The recording `times` over in one WAV: real speech long enough to still be running when a test acts. */
export const repeatedSpeech = (times: number): Buffer => {
  const dataAt = SPEECH.indexOf("data", 12)
  const body = Buffer.concat(Array.from({ length: times }, () => SPEECH.subarray(dataAt + 8)))
  const header = Buffer.from(SPEECH.subarray(0, dataAt + 8))
  header.writeUInt32LE(36 + body.length, 4)
  header.writeUInt32LE(body.length, dataAt + 4)
  return Buffer.concat([header, body])
}

/** The 16-bit PCM of a 16 kHz mono WAV file, or of a headerless .raw recording of the testdata. */
export const pcmOf = (file: string): Buffer => {
  const bytes = fs.readFileSync(file)
  if (bytes.subarray(0, 4).toString("latin1") !== "RIFF") return bytes
  const dataAt = bytes.indexOf("data", 12)
  return bytes.subarray(dataAt + 8, dataAt + 8 + bytes.readUInt32LE(dataAt + 4))
}

/** A 16 kHz mono WAV of the given PCM parts with `gapMs` of silence between them. */
export const conversationWav = (parts: ReadonlyArray<Buffer>, gapMs = 400): Buffer => {
  const gap = Buffer.alloc(Math.round((gapMs * 16000) / 1000) * 2)
  const body = Buffer.concat(parts.flatMap((p, i) => (i === 0 ? [p] : [gap, p])))
  const header = Buffer.alloc(44)
  header.write("RIFF", 0, "latin1")
  header.writeUInt32LE(36 + body.length, 4)
  header.write("WAVEfmt ", 8, "latin1")
  header.writeUInt32LE(16, 16)
  header.writeUInt16LE(1, 20)
  header.writeUInt16LE(1, 22)
  header.writeUInt32LE(16000, 24)
  header.writeUInt32LE(32000, 28)
  header.writeUInt16LE(2, 32)
  header.writeUInt16LE(16, 34)
  header.write("data", 36, "latin1")
  header.writeUInt32LE(body.length, 40)
  return Buffer.concat([header, body])
}
