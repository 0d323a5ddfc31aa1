/**
 * The neural-embedding slot (SpeakerModel.ts, Fbank.ts, OnnxEmbedding.ts) with a tiny ONNX model
 * built here (tinySpeakerModel.ts): the manifest is checked with messages an operator can act
 * on, fbank features follow Kaldi's definition, and windows go through onnxruntime to
 * L2-normalised vectors of the model's dimension, deterministic, zero for silence.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import t from "tap"
import { fbank, fbankFrameCount } from "../../../engines/speaker/Fbank.ts"
import { loadOnnxEmbedding } from "../../../engines/speaker/OnnxEmbedding.ts"
import { cosine, isZero } from "../../../engines/speaker/SpeakerEmbedding.ts"
import { CLASSICAL_SPEAKER_MODEL, speakerModelProfile } from "../../../engines/speaker/SpeakerModel.ts"
import { speak } from "./speakers.ts"
import { TINY_DIMENSION, writeTinySpeakerModel } from "./tinySpeakerModel.ts"

const scratch = mkdtempSync(path.join(tmpdir(), "onnx-speaker-"))
t.teardown(() => rmSync(scratch, { recursive: true, force: true }))
let n = 0
const modelDir = (manifest: Record<string, unknown> = {}) => writeTinySpeakerModel(path.join(scratch, `m${n++}`), manifest)

const tone = (hz: number, seconds: number, amplitude = 0.3) =>
  Float32Array.from({ length: Math.round(seconds * 16000) }, (_, i) => amplitude * Math.sin((2 * Math.PI * hz * i) / 16000))

t.test("fbank: Kaldi frame count, a tone lands in its band, gain is an additive constant", async (t) => {
  t.equal(fbankFrameCount(399), 0)
  t.equal(fbankFrameCount(400), 1)
  t.equal(fbankFrameCount(16000), 98, "1 s: (16000 - 400) / 160 + 1 whole frames")
  const { frames, features } = fbank(tone(1000, 1), 80)
  t.equal(frames, 98)
  const mid = features.subarray(50 * 80, 51 * 80)
  const peak = mid.indexOf(Math.max(...mid))
  // Kaldi's mel scale from 20 Hz to 8 kHz in 81 steps.
  const mel = (hz: number) => 1127 * Math.log(1 + hz / 700)
  const expected = Math.round((mel(1000) - mel(20)) / ((mel(8000) - mel(20)) / 81)) - 1
  t.ok(Math.abs(peak - expected) <= 1, `peak band ${peak}, expected about ${expected}`)
  const louder = fbank(tone(1000, 1, 0.6), 80).features
  const diffs = Array.from(mid, (v, b) => louder[50 * 80 + b]! - v).filter((_, b) => mid[b]! > Math.max(...mid) - 20)
  t.ok(diffs.every((d) => Math.abs(d - Math.log(4)) < 1e-3), "twice the amplitude adds ln 4 to every band that holds energy")
  const silent = fbank(new Float32Array(8000), 80).features
  t.ok(silent.every((v) => Math.abs(v - Math.log(1.1920928955078125e-7)) < 1e-6), "digital silence is the log floor")
  t.throws(() => fbank(tone(100, 1), 3), RangeError)
})

t.test("manifest: the classical default, a valid directory, and every mistake named", async (t) => {
  t.equal(speakerModelProfile(undefined), CLASSICAL_SPEAKER_MODEL)
  const dir = modelDir()
  t.match(speakerModelProfile(dir), { name: "tiny-speaker-v1", directory: dir, diarizationThreshold: 0.3, matchThreshold: 0.9 })
  const bad = (manifest: Record<string, unknown>, pattern: RegExp, what: string) =>
    t.throws(() => speakerModelProfile(modelDir(manifest)), pattern, what)
  bad({ diarizationThreshold: "high" }, /"diarizationThreshold" must be a number/, "threshold not a number")
  bad({ matchThreshold: 3 }, /"matchThreshold" must be a number in \[-1, 1\]/, "similarity above 1")
  bad({ model: "missing.onnx" }, /model file .*missing\.onnx does not exist/, "model file missing")
  bad({ name: "a b" }, /"name" must be/, "name with a space")
  bad({ name: CLASSICAL_SPEAKER_MODEL.name }, /must differ from the built-in/, "the classical name")
  t.throws(() => speakerModelProfile(path.join(scratch, "nowhere")), /has no speaker-embedding\.json/)
  const broken = modelDir()
  writeFileSync(path.join(broken, "speaker-embedding.json"), "{ not json")
  t.throws(() => speakerModelProfile(broken), /is not JSON/)
})

t.test("an ONNX model from a directory embeds windows through onnxruntime", async (t) => {
  const embedder = await loadOnnxEmbedding(modelDir())
  t.equal(embedder.name, "tiny-speaker-v1")
  t.equal(embedder.dimension, TINY_DIMENSION)
  const a = await speak("flite:slt", "The quick brown fox jumps over the lazy dog near the river bank.")
  const b = await speak("flite:rms", "The quick brown fox jumps over the lazy dog near the river bank.")
  const windows = [{ startMs: 0, endMs: 1500 }, { startMs: 500, endMs: 2000 }, { startMs: 0, endMs: 200 }]
  const [first, second, short] = await embedder.embedWindows(a, windows)
  t.equal(first!.length, TINY_DIMENSION)
  t.ok(Math.abs(Math.hypot(...first!) - 1) < 1e-5, "L2-normalised")
  t.ok(isZero(short!), "a window under 300 ms is the zero vector")
  t.not(cosine(first!, second!), 1, "other frames, another vector")
  t.same(Array.from((await embedder.embedWindows(a.slice(), windows))[0]!), Array.from(first!), "deterministic")
  const [other] = await embedder.embedWindows(b, [windows[0]!])
  t.ok(cosine(first!, other!) < 0.9999, `another voice, another vector (cosine ${cosine(first!, other!).toFixed(4)})`)
  const [silent] = await embedder.embedWindows(new Float32Array(32000), [{ startMs: 0, endMs: 2000 }])
  t.ok(isZero(silent!), "digital silence gives the zero vector")
})

t.test("a file that is not an ONNX model fails to load with its path in the message", async (t) => {
  const dir = modelDir()
  writeFileSync(path.join(dir, "tiny.onnx"), "not a model")
  await t.rejects(loadOnnxEmbedding(dir), /speaker embedding model .*tiny\.onnx could not be loaded/)
})
