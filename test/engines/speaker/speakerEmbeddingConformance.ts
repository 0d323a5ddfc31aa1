/**
 * Shared conformance suite: every SpeakerEmbedding implementation runs this (MfccEmbedding.test.ts;
 * a neural embedding would too). It checks the contract of engines/speaker/SpeakerEmbedding.ts
 * and one coarse ability every speaker embedding must have (a woman and a man apart), not the
 * quality of a particular implementation.
 */
import type { Test } from "tap"
import { concatFloat32, silence } from "../../../engines/audio/Pcm.ts"
import { cosine, isZero, SpeakerEmbeddingError, type SpeakerEmbedding } from "../../../engines/speaker/SpeakerEmbedding.ts"
import { speak } from "./speakers.ts"

const norm = (v: Float32Array) => Math.sqrt(v.reduce((s, x) => s + x * x, 0))

const reasonOf = (f: () => unknown): string => {
  try {
    f()
    return "returned"
  } catch (e) {
    return e instanceof SpeakerEmbeddingError ? e.reason : `not a SpeakerEmbeddingError: ${String(e)}`
  }
}

export const runSpeakerEmbeddingConformance = (t: Test, embedding: SpeakerEmbedding): void => {
  t.test(`${embedding.name}: contract`, async (t) => {
    const a = await speak("flite:slt", "The quick brown fox jumps over the lazy dog near the river bank.")
    const v = embedding.embed(a)
    t.equal(v.length, embedding.dimension, "fixed dimension")
    t.ok(v instanceof Float32Array)
    t.ok(Math.abs(norm(v) - 1) < 1e-5, `L2-normalised (norm ${norm(v)})`)
    t.ok(v.every(Number.isFinite), "finite")
    t.same(Array.from(embedding.embed(a)), Array.from(v), "deterministic: same samples, same vector")
    t.same(Array.from(embedding.embed(a.slice())), Array.from(v), "depends on the samples, not on the buffer")

    const quieter = a.map((x) => x * 0.25)
    t.ok(cosine(embedding.embed(quieter), v) > 0.99, "a 12 dB quieter copy is the same voice")

    t.ok(isZero(embedding.embed(new Float32Array(16000))), "digital silence gives the zero vector")
    t.ok(isZero(embedding.embed(new Float32Array(100))), "shorter than a frame gives the zero vector")
    t.equal(reasonOf(() => embedding.embed(new Int16Array(16000) as unknown as Float32Array)), "InvalidInput", "Float32Array only")
  })

  t.test(`${embedding.name}: windows`, async (t) => {
    const a = await speak("flite:slt", "Please bring your own paper and a pencil to the meeting on Friday.")
    const b = await speak("flite:rms", "Please bring your own paper and a pencil to the meeting on Friday.")
    const pcm = concatFloat32([a, silence(500, 16000), b])
    const aMs = (a.length * 1000) / 16000
    const bStart = aMs + 500
    const windows = [
      { startMs: 0, endMs: aMs },
      { startMs: bStart, endMs: bStart + 3000 },
      { startMs: aMs + 50, endMs: aMs + 450 }, // silence only
      { startMs: bStart + 3000, endMs: 1e9 } // past the end: clamped
    ]
    const vs = embedding.embedWindows(pcm, windows)
    t.equal(vs.length, windows.length, "one vector per window")
    t.ok(vs.every((v) => v.length === embedding.dimension))
    t.ok(isZero(vs[2]!), "a window of silence gives the zero vector")
    t.ok(Math.abs(norm(vs[3]!) - 1) < 1e-5, "a window running past the end is clamped, not refused")
    t.ok(cosine(vs[0]!, embedding.embed(a)) > 0.98, `window = slice (cos ${cosine(vs[0]!, embedding.embed(a)).toFixed(4)})`)
    t.ok(cosine(vs[1]!, vs[3]!) > cosine(vs[0]!, vs[1]!), "two windows of one man are closer than the woman and the man")
    t.same(embedding.embedWindows(pcm, []), [])
    t.equal(reasonOf(() => embedding.embedWindows(pcm, [{ startMs: 500, endMs: 100 }])), "InvalidInput", "end before start")
    t.equal(reasonOf(() => embedding.embedWindows(pcm, [{ startMs: Number.NaN, endMs: 100 }])), "InvalidInput", "NaN")
  })
}
