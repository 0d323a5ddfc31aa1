/**
 * The diarization evaluation set (issue 12): conversations mixed from real human speech that
 * nobody here synthesised, with reference speaker turns as RTTM.
 *
 * Sources: Debian's pocketsphinx-testdata (installed by scripts/setup.sh). What it holds decides
 * what can be built, and it is little:
 *  - `reader`: five LibriVox readings by one reader (median F0 ≈ 105 Hz), 24.7 s in all;
 *  - `cards`: five utterances by another speaker (F0 140-215 Hz), 9.6 s in all;
 *  - `goforward`, `numbers`, `something` (CMU recordings) and `dhd` (a TIDIGITS utterance):
 *    2.4-4.0 s each. Whether these four are four people is not documented; by ear goforward and
 *    something sound alike. They serve as speakers 3 and 4 and are labelled "unverified".
 * So 2-speaker mixes are the trustworthy part of the set; 3- and 4-speaker mixes repeat short
 * pieces and may hold two recordings of one person.
 *
 * A conversation: speakers take turns (never the same one twice in a row, unless there is one), each turn one
 * piece of that speaker's recordings (a whole recording, or a part of it cut at a pause, 1-8 s),
 * pieces used in a shuffled cycle; between turns a gap of 150-700 ms (70 %), 0-150 ms (20 %) or
 * an overlap of 200-500 ms (10 %). Each piece is levelled to -24 dBFS ± 3 dB; the mix gets a
 * -66 dBFS noise floor so that pauses are not digital silence. Reference turns are the speech
 * regions inside each piece (20 ms frames within 35 dB of the piece's loudest, pauses of 300 ms
 * or more split a turn), which is what a forced alignment would give to ±20 ms.
 *
 * Conditions: wideband (16 kHz PCM WAV) and telephone (band-pass 300-3400 Hz, 8 kHz µ-law WAV,
 * by ffmpeg, as a telephony bridge sends it). Everything is seeded: the same seed gives the
 * same audio bit for bit.
 */
import { execFileSync } from "node:child_process"
import { readFileSync, writeFileSync } from "node:fs"
import * as path from "node:path"
import { mulberry32 } from "../engines/audio/Prng.ts"
import { encodeWav } from "../engines/audio/Wav.ts"
import { ffmpegBinary } from "../engines/media/MediaDecoder.ts"
import { toRttm, type Turn } from "./der.ts"

const DATA = "/usr/share/pocketsphinx/test/data"
const RATE = 16000
const FRAME = RATE / 50 // 20 ms

export interface SourceSpeaker {
  readonly name: string
  readonly files: ReadonlyArray<string>
  /** Known to be a different person from every other "distinct" speaker. */
  readonly identity: "distinct" | "unverified"
}

export const SOURCE_SPEAKERS: ReadonlyArray<SourceSpeaker> = [
  {
    name: "reader",
    files: ["0870", "0880", "0890", "0920", "0930"].map((id) => `${DATA}/librivox/sense_and_sensibility_01_austen_64kb-${id}.wav`),
    identity: "distinct"
  },
  { name: "cards", files: ["001", "002", "003", "004", "005"].map((id) => `${DATA}/cards/${id}.wav`), identity: "distinct" },
  { name: "goforward", files: [`${DATA}/goforward.raw`], identity: "unverified" },
  { name: "numbers", files: [`${DATA}/numbers.raw`], identity: "unverified" },
  { name: "something", files: [`${DATA}/something.raw`], identity: "unverified" },
  { name: "dhd", files: [`${DATA}/tidigits/dhd.2934z.raw`], identity: "unverified" }
]

/** 16 kHz mono float PCM of a WAV (16-bit) or headerless 16-bit .raw file of the testdata. */
export const loadPcm = (file: string): Float32Array => {
  const bytes = readFileSync(file)
  let body = bytes
  if (bytes.subarray(0, 4).toString("latin1") === "RIFF") {
    const at = bytes.indexOf("data", 12)
    body = bytes.subarray(at + 8, at + 8 + bytes.readUInt32LE(at + 4))
  }
  const out = new Float32Array(body.length >> 1)
  for (let i = 0; i < out.length; i++) out[i] = body.readInt16LE(2 * i) / 32768
  return out
}

interface Region {
  /** samples */
  readonly start: number
  readonly end: number
}

/** Speech regions: 20 ms frames within 35 dB of the loudest, joined across pauses < `joinMs`. */
export const speechRegions = (pcm: Float32Array, joinMs = 300): Array<Region> => {
  const frames = Math.floor(pcm.length / FRAME)
  const db = new Float64Array(frames)
  for (let f = 0; f < frames; f++) {
    let s = 0
    for (let i = f * FRAME; i < (f + 1) * FRAME; i++) s += pcm[i]! * pcm[i]!
    db[f] = 10 * Math.log10(s / FRAME + 1e-12)
  }
  const floor = Math.max(...db) - 35
  const regions: Array<Region> = []
  for (let f = 0; f < frames; f++) {
    if (db[f]! < floor) continue
    const start = f * FRAME
    const end = (f + 1) * FRAME
    const last = regions[regions.length - 1]
    if (last !== undefined && start - last.end < (joinMs * RATE) / 1000) regions[regions.length - 1] = { start: last.start, end }
    else regions.push({ start, end })
  }
  // A lone 20-60 ms burst is a click, not speech.
  return regions.filter((r) => r.end - r.start >= 0.08 * RATE)
}

export interface Piece {
  readonly speaker: string
  readonly pcm: Float32Array
  /** Speech inside `pcm`, samples. */
  readonly regions: ReadonlyArray<Region>
}

const PAD = 0.05 * RATE

/** A recording as turns: whole, and where it is longer than 4 s also as two parts cut at its longest pause. */
export const piecesOf = (speaker: string, pcm: Float32Array): Array<Piece> => {
  const regions = speechRegions(pcm)
  if (regions.length === 0) return []
  const piece = (rs: ReadonlyArray<Region>): Piece => {
    const from = Math.max(0, rs[0]!.start - PAD)
    const to = Math.min(pcm.length, rs[rs.length - 1]!.end + PAD)
    return { speaker, pcm: pcm.slice(from, to), regions: rs.map((r) => ({ start: r.start - from, end: r.end - from })) }
  }
  const whole = piece(regions)
  const out = [whole]
  if (whole.pcm.length > 4 * RATE && regions.length > 1) {
    let cut = 1
    for (let i = 2; i < regions.length; i++) if (regions[i]!.start - regions[i - 1]!.end > regions[cut]!.start - regions[cut - 1]!.end) cut = i
    const parts = [regions.slice(0, cut), regions.slice(cut)].map(piece)
    if (parts.every((p) => p.pcm.length >= RATE)) out.push(...parts)
  }
  return out.filter((p) => p.pcm.length <= 8 * RATE)
}

const rms = (pcm: Float32Array) => Math.sqrt(pcm.reduce((s, x) => s + x * x, 0) / Math.max(1, pcm.length))

/** Box-Muller from a uniform source. */
const gaussian = (random: () => number) => Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random())

export interface ConversationSpec {
  readonly name: string
  readonly seed: number
  readonly speakers: ReadonlyArray<string>
  /** Stop adding turns once the mix is this long, s. */
  readonly seconds: number
}

export interface Conversation {
  readonly spec: ConversationSpec
  /** 16 kHz mono float PCM. */
  readonly pcm: Float32Array
  readonly turns: Array<Turn>
}

export const mixConversation = (spec: ConversationSpec): Conversation => {
  const random = mulberry32(spec.seed)
  const pools = spec.speakers.map((name) => {
    const source = SOURCE_SPEAKERS.find((s) => s.name === name)
    if (source === undefined) throw new Error(`unknown source speaker ${name}`)
    return source.files.flatMap((f) => piecesOf(name, loadPcm(f)))
  })
  const shuffled = pools.map((pool) => [...pool].sort(() => random() - 0.5))
  const used = pools.map(() => 0)
  const placed: Array<{ at: number; piece: Piece; gain: number }> = []
  let cursor = 0
  let previous = -1
  while (cursor < spec.seconds * RATE) {
    let who = Math.floor(random() * spec.speakers.length)
    if (who === previous) who = (who + 1 + Math.floor(random() * (spec.speakers.length - 1))) % spec.speakers.length
    previous = who
    const pool = shuffled[who]!
    const piece = pool[used[who]!++ % pool.length]!
    const r = random()
    const gapMs = r < 0.7 ? 150 + 550 * random() : r < 0.9 ? 150 * random() : -(200 + 300 * random())
    const lastSpeechEnd = placed.length === 0 ? 0 : (() => {
      const p = placed[placed.length - 1]!
      return p.at + p.piece.regions[p.piece.regions.length - 1]!.end
    })()
    const at = Math.max(0, Math.round(lastSpeechEnd + (gapMs * RATE) / 1000 - piece.regions[0]!.start))
    const gain = Math.pow(10, (-24 + 6 * (random() - 0.5)) / 20) / Math.max(1e-6, rms(piece.pcm))
    placed.push({ at, piece, gain })
    cursor = at + piece.pcm.length
  }
  const length = Math.max(...placed.map((p) => p.at + p.piece.pcm.length)) + RATE / 4
  const pcm = new Float32Array(length)
  const noise = Math.pow(10, -66 / 20)
  for (let i = 0; i < length; i++) pcm[i] = noise * gaussian(random)
  for (const p of placed) for (let i = 0; i < p.piece.pcm.length; i++) pcm[p.at + i]! += p.gain * p.piece.pcm[i]!
  let peak = 0
  for (const x of pcm) peak = Math.max(peak, Math.abs(x))
  if (peak > 0.99) for (let i = 0; i < length; i++) pcm[i]! *= 0.99 / peak
  const turns = placed.flatMap((p) => p.piece.regions.map((r) => ({ speaker: p.piece.speaker, start: (p.at + r.start) / RATE, end: (p.at + r.end) / RATE })))
  turns.sort((a, b) => a.start - b.start)
  return { spec, pcm, turns }
}

export type Condition = "wideband" | "telephone"

export interface SetEntry {
  readonly name: string
  readonly condition: Condition
  readonly speakers: number
  /** The audio file to send. */
  readonly file: string
  readonly rttm: string
  readonly turns: ReadonlyArray<Turn>
  readonly seconds: number
}

/** The conversations of the set; `smoke` keeps one short 2-speaker mix. */
export const conversationSpecs = (smoke: boolean): Array<ConversationSpec> => {
  if (smoke) return [{ name: "two-1", seed: 1, speakers: ["reader", "cards"], seconds: 12 }]
  const series = (prefix: string, count: number, seed: number, speakers: Array<string>, seconds: number) =>
    Array.from({ length: count }, (_, i) => ({ name: `${prefix}-${i + 1}`, seed: seed + i, speakers, seconds }))
  return [
    // One speaker: diarize=true on a monologue must find one.
    ...series("one-reader", 1, 100, ["reader"], 30),
    ...series("one-cards", 1, 110, ["cards"], 20),
    ...series("two", 6, 200, ["reader", "cards"], 40),
    ...series("three", 3, 300, ["reader", "cards", "numbers"], 40),
    ...series("four", 3, 400, ["reader", "cards", "numbers", "goforward"], 45)
  ]
}

/** Writes each conversation in both conditions, with its RTTM, to `dir`. */
export const writeSet = (dir: string, specs: ReadonlyArray<ConversationSpec>): Array<SetEntry> =>
  specs.flatMap((spec) => {
    const c = mixConversation(spec)
    const wide = path.join(dir, `${spec.name}.wav`)
    writeFileSync(wide, encodeWav(c.pcm, RATE))
    const phone = path.join(dir, `${spec.name}-phone.wav`)
    execFileSync(ffmpegBinary(), ["-nostdin", "-loglevel", "error", "-y", "-i", wide, "-af", "highpass=f=300,lowpass=f=3400", "-ar", "8000", "-c:a", "pcm_mulaw", phone])
    const rttm = path.join(dir, `${spec.name}.rttm`)
    writeFileSync(rttm, toRttm(spec.name, c.turns))
    const base = { name: spec.name, speakers: spec.speakers.length, rttm, turns: c.turns, seconds: c.pcm.length / RATE }
    return [{ ...base, condition: "wideband" as const, file: wide }, { ...base, condition: "telephone" as const, file: phone }]
  })
