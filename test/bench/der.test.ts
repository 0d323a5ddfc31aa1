/**
 * The diarization scorer of the real-speech evaluation (bench/der.ts) on hand-made turns whose
 * DER is worked out by hand: perfect, relabelled, missed, false alarm, confusion, overlap, the
 * collar, the mapping, word-speaker accuracy and the RTTM round trip.
 */
import t, { type Test } from "tap"
import { bestMapping, diarizationErrorRate, fromRttm, toRttm, type Turn, wordSpeakerAccuracy } from "../../bench/der.ts"

const ref: Array<Turn> = [{ speaker: "A", start: 0, end: 4 }, { speaker: "B", start: 4, end: 10 }]
const close = (t: Test, got: number, want: number, what: string) => t.ok(Math.abs(got - want) < 1e-9, `${what}: ${got} ≈ ${want}`)

t.test("perfect and relabelled hypotheses score 0", async (t) => {
  close(t, diarizationErrorRate(ref, ref, 0).der, 0, "same")
  const renamed = ref.map((x) => ({ ...x, speaker: x.speaker === "A" ? "spk_1" : "spk_0" }))
  const r = diarizationErrorRate(ref, renamed, 0)
  close(t, r.der, 0, "renamed")
  t.same([...r.mapping], [["A", "spk_1"], ["B", "spk_0"]])
})

t.test("missed speech, false alarm and confusion, without a collar", async (t) => {
  // B's last 2 s missing: 2 of 10 s missed.
  const missed = diarizationErrorRate(ref, [{ speaker: "x", start: 0, end: 4 }, { speaker: "y", start: 4, end: 8 }], 0)
  close(t, missed.der, 0.2, "missed")
  close(t, missed.missed, 2, "missed seconds")
  // A hypothesis speaker talking over 1 s of silence after the end: 1 s false alarm.
  const fa = diarizationErrorRate(ref, [...ref.map((x) => ({ ...x })), { speaker: "B", start: 10, end: 11 }], 0)
  close(t, fa.der, 0.1, "false alarm")
  // The turn change 1 s late: 1 s of B given to A's speaker.
  const late = diarizationErrorRate(ref, [{ speaker: "x", start: 0, end: 5 }, { speaker: "y", start: 5, end: 10 }], 0)
  close(t, late.confusion, 1, "confusion seconds")
  close(t, late.der, 0.1, "late change")
  // Everything one speaker: the best mapping takes B (6 s); A's 4 s are confusion.
  const one = diarizationErrorRate(ref, [{ speaker: "x", start: 0, end: 10 }], 0)
  close(t, one.der, 0.4, "one speaker for two")
  t.same([...one.mapping], [["B", "x"]])
})

t.test("overlap counts once per speaker", async (t) => {
  const overlapped: Array<Turn> = [{ speaker: "A", start: 0, end: 6 }, { speaker: "B", start: 4, end: 10 }]
  // Scored: 12 speaker-seconds. A hypothesis without the overlap misses 2 of them.
  const r = diarizationErrorRate(overlapped, [{ speaker: "x", start: 0, end: 5 }, { speaker: "y", start: 5, end: 10 }], 0)
  close(t, r.scored, 12, "scored")
  close(t, r.missed, 2, "missed in the overlap")
  close(t, r.der, 2 / 12, "der")
})

t.test("the collar forgives boundary errors up to its width", async (t) => {
  const late = [{ speaker: "x", start: 0, end: 4.2 }, { speaker: "y", start: 4.2, end: 10 }]
  close(t, diarizationErrorRate(ref, late, 0.25).der, 0, "0.2 s late inside a 0.25 s collar")
  t.ok(diarizationErrorRate(ref, late, 0).der > 0, "and an error without it")
  // Scored time shrinks by the collars: boundaries at 0, 4 and 10, so 10 - 0.25 - 0.5 - 0.25 = 9 s.
  close(t, diarizationErrorRate(ref, ref, 0.25).scored, 9, "scored time outside the collars")
})

t.test("best mapping is one-to-one", async (t) => {
  const m = bestMapping(ref, [{ speaker: "x", start: 0, end: 10 }, { speaker: "y", start: 3, end: 4 }])
  t.same([...m].sort(), [["A", "y"], ["B", "x"]].sort(), "A takes y because x is worth more to B")
})

t.test("word-speaker accuracy under the mapping", async (t) => {
  const mapping = new Map([["A", "s0"], ["B", "s1"]])
  const words = [
    { start: 0.5, end: 1, speaker: "s0" },
    { start: 2, end: 3, speaker: "s0" },
    { start: 5, end: 6, speaker: "s1" },
    { start: 7, end: 8, speaker: "s0" } // wrong
  ]
  close(t, wordSpeakerAccuracy(ref, words, mapping), 0.75, "3 of 4")
  t.ok(Number.isNaN(wordSpeakerAccuracy(ref, [{ start: 20, end: 21, speaker: "s0" }], mapping)), "no scorable word")
})

t.test("RTTM round trip", async (t) => {
  const back = fromRttm(toRttm("conv1", ref))
  t.same(back.map((x) => [x.speaker, x.start, Number(x.end.toFixed(3))]), [["A", 0, 4], ["B", 4, 10]])
  t.same(fromRttm("garbage\n\nSPEAKER short"), [])
})
