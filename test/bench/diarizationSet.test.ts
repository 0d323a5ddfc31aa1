/**
 * The diarization evaluation set generator (bench/diarizationSet.ts) on the real recordings of
 * pocketsphinx-testdata: deterministic, reference turns that lie on speech, the turn-taking it
 * promises, and files in the two conditions as a client would send them.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import t from "tap"
import { fromRttm } from "../../bench/der.ts"
import { loadPcm, mixConversation, piecesOf, SOURCE_SPEAKERS, speechRegions, writeSet } from "../../bench/diarizationSet.ts"

const RATE = 16000

const rmsOf = (pcm: Float32Array, from: number, to: number) => {
  let s = 0
  for (let i = from; i < to; i++) s += pcm[i]! * pcm[i]!
  return Math.sqrt(s / Math.max(1, to - from))
}

t.test("every source recording is there and yields pieces of 1-8 s with speech inside", async (t) => {
  for (const speaker of SOURCE_SPEAKERS) {
    const pieces = speaker.files.flatMap((f) => piecesOf(speaker.name, loadPcm(f)))
    t.ok(pieces.length >= 1, `${speaker.name}: ${pieces.length} pieces`)
    for (const p of pieces) {
      t.ok(p.pcm.length <= 8 * RATE, `${speaker.name}: piece of ${(p.pcm.length / RATE).toFixed(2)} s is at most 8 s`)
      t.ok(p.regions.length >= 1 && p.regions.every((r) => r.start >= 0 && r.end <= p.pcm.length && r.end > r.start), "regions inside the piece")
    }
  }
})

t.test("speech regions: a tone burst between silences is found where it is", async (t) => {
  const pcm = new Float32Array(3 * RATE)
  for (let i = RATE; i < 2 * RATE; i++) pcm[i] = 0.3 * Math.sin((2 * Math.PI * 220 * i) / RATE)
  const regions = speechRegions(pcm)
  t.equal(regions.length, 1)
  t.ok(Math.abs(regions[0]!.start - RATE) <= 0.02 * RATE && Math.abs(regions[0]!.end - 2 * RATE) <= 0.02 * RATE, `region ${JSON.stringify(regions[0])}`)
})

t.test("a conversation: deterministic, turns on speech, speakers alternate, gaps and overlaps", async (t) => {
  const spec = { name: "t", seed: 7, speakers: ["reader", "cards"], seconds: 40 }
  const a = mixConversation(spec)
  const b = mixConversation(spec)
  t.same(Buffer.from(a.pcm.buffer), Buffer.from(b.pcm.buffer), "same seed, same audio bit for bit")
  t.same(a.turns, b.turns)
  const other = mixConversation({ ...spec, seed: 8 })
  t.not(Buffer.from(other.pcm.buffer).equals(Buffer.from(a.pcm.buffer)), "another seed, other audio")
  t.ok(a.pcm.length / RATE >= 40, `${(a.pcm.length / RATE).toFixed(1)} s long`)
  t.same([...new Set(a.turns.map((x) => x.speaker))].sort(), ["cards", "reader"])
  const inside = a.turns.reduce((s, x) => s + rmsOf(a.pcm, Math.round(x.start * RATE), Math.round(x.end * RATE)), 0) / a.turns.length
  t.ok(20 * Math.log10(inside / rmsOf(a.pcm, 0, Math.round(a.turns[0]!.start * RATE))) > 30, "reference turns are over 30 dB above the lead-in silence")
  for (const x of a.turns) t.ok(x.start >= 0 && x.end <= a.pcm.length / RATE && x.end > x.start, `turn ${x.start.toFixed(2)}-${x.end.toFixed(2)} inside the audio`)
  // Speaker changes: some with a gap, some overlapping.
  let overlaps = 0
  let gaps = 0
  for (let i = 1; i < a.turns.length; i++) {
    if (a.turns[i]!.speaker === a.turns[i - 1]!.speaker) continue
    if (a.turns[i]!.start < a.turns[i - 1]!.end) overlaps++
    else gaps++
  }
  t.ok(gaps >= 3, `${gaps} speaker changes with a gap`)
  t.ok(overlaps + gaps >= 8, `${overlaps + gaps} speaker changes`)
})

t.test("a monologue has one speaker; an unknown source is refused", async (t) => {
  const solo = mixConversation({ name: "solo", seed: 3, speakers: ["reader"], seconds: 15 })
  t.same([...new Set(solo.turns.map((x) => x.speaker))], ["reader"])
  t.throws(() => mixConversation({ name: "x", seed: 1, speakers: ["nobody"], seconds: 5 }), /unknown source speaker nobody/)
})

t.test("the written set: a 16 kHz PCM WAV, an 8 kHz µ-law WAV and RTTM that reads back", async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), "diarization-set-"))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const entries = writeSet(dir, [{ name: "pair", seed: 5, speakers: ["reader", "cards"], seconds: 10 }])
  t.same(entries.map((e) => e.condition), ["wideband", "telephone"])
  const wide = readFileSync(entries[0]!.file)
  t.equal(wide.readUInt16LE(20), 1, "wideband: PCM")
  t.equal(wide.readUInt32LE(24), 16000, "wideband: 16 kHz")
  const phone = readFileSync(entries[1]!.file)
  t.equal(phone.readUInt16LE(20), 7, "telephone: µ-law (format 7)")
  t.equal(phone.readUInt32LE(24), 8000, "telephone: 8 kHz")
  const turns = fromRttm(readFileSync(entries[0]!.rttm, "utf8"))
  t.equal(turns.length, entries[0]!.turns.length)
  turns.forEach((x, i) => {
    t.equal(x.speaker, entries[0]!.turns[i]!.speaker)
    t.ok(Math.abs(x.start - entries[0]!.turns[i]!.start) < 0.001 && Math.abs(x.end - entries[0]!.turns[i]!.end) < 0.002)
  })
})
