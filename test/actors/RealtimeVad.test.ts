/**
 * The VAD commit decision of realtime speech-to-text (actors/RealtimeVad.ts), frame by frame
 * (32 ms frames), and the wire's parsing of the query and of client frames
 * (protocol/ws/SttRealtimeFrames.ts).
 */
import t from "tap"
import { VadCommitDetector } from "../../actors/RealtimeVad.ts"
import { parseClientFrame, RealtimeRefusal, realtimeConfig, timestampedWords } from "../../protocol/ws/SttRealtimeFrames.ts"

const frames = (ms: number, p: number) => Array.from({ length: Math.round(ms / 32) }, () => p)
const options = { threshold: 0.5, minSpeechMs: 100, minSilenceMs: 100, silenceThresholdMs: 500 }

t.test("speech then enough silence commits once; short silence does not", async (t) => {
  const d = new VadCommitDetector(options)
  t.notOk(d.feed(frames(320, 0.05)), "silence alone never commits")
  t.notOk(d.feed(frames(640, 0.9)), "speech: no commit yet")
  t.notOk(d.feed(frames(256, 0.05)), "a pause shorter than the threshold")
  t.notOk(d.feed(frames(640, 0.9)), "speech again")
  t.ok(d.feed(frames(640, 0.05)), "0.64 s of silence ≥ 0.5 s: commit")
  t.notOk(d.feed(frames(2000, 0.05)), "and not again without new speech")
})

t.test("a pause to prepare the commit for: after counted speech and half the threshold of silence; loud frames counted", async (t) => {
  const d = new VadCommitDetector(options) // threshold 500 ms: prepare after min(400, 250) ms
  d.feed(frames(320, 0.05))
  t.notOk(d.paused, "silence before any speech is no pause")
  d.feed(frames(640, 0.9))
  const loud = d.loudFrames
  t.equal(loud, 20, "20 frames at or above the threshold")
  d.feed(frames(128, 0.05))
  t.notOk(d.paused, "128 ms after the speech: not yet")
  d.feed(frames(160, 0.05))
  t.ok(d.paused, "288 ms ≥ 250 ms of silence after counted speech: a pause")
  t.equal(d.loudFrames, loud, "silence does not move the count")
  d.feed(frames(64, 0.9))
  t.notOk(d.paused, "speech again ends the pause")
  t.ok(d.loudFrames > loud, "and moves the count (a pause prepared before it is stale)")
  t.ok(d.feed(frames(640, 0.05)), "the commit")
  t.notOk(d.paused, "a commit starts a new utterance: no pause")
})

t.test("a blip shorter than min_speech_duration_ms is noise", async (t) => {
  const d = new VadCommitDetector(options)
  t.notOk(d.feed([...frames(64, 0.9), ...frames(2000, 0.05)]), "64 ms of speech < 100 ms: no commit")
})

t.test("reset (a manual commit) starts a new utterance", async (t) => {
  const d = new VadCommitDetector(options)
  d.feed(frames(640, 0.9))
  d.reset()
  t.notOk(d.feed(frames(2000, 0.05)), "the speech before the reset is committed already")
})

t.test("query: defaults, ranges and unknown values", async (t) => {
  const c = realtimeConfig(new URLSearchParams("model_id=scribe_v2_realtime&keyterms=a&keyterms=b"))
  t.match(c, { audioFormat: "pcm_16000", commitStrategy: "manual", vadSilenceThresholdSecs: 1.5, vadThreshold: 0.4, keyterms: ["a", "b"] })
  for (const q of ["model_id=m&audio_format=opus", "model_id=m&vad_silence_threshold_secs=0.1", "model_id=m&min_speech_duration_ms=x", "model_id=m&no_verbatim=1", "model_id="]) {
    let type: string | undefined
    try {
      realtimeConfig(new URLSearchParams(q))
    } catch (e) {
      type = e instanceof RealtimeRefusal ? e.type : String(e)
    }
    t.equal(type, "input_error", q)
  }
})

t.test("frames: base64, sample_rate, chunk size", async (t) => {
  const ok = parseClientFrame(JSON.stringify({ message_type: "input_audio_chunk", audio_base_64: Buffer.alloc(3200).toString("base64"), sample_rate: 16000 }), "pcm_16000")
  t.equal(ok.audioMs, 100)
  t.equal(parseClientFrame(JSON.stringify({ message_type: "input_audio_chunk", audio_base_64: Buffer.alloc(800).toString("base64") }), "ulaw_8000").audioMs, 100, "µ-law: a byte a sample")
  const refusal = (text: string, format: "pcm_16000" | "ulaw_8000" = "pcm_16000") => {
    try {
      parseClientFrame(text, format)
      return "accepted"
    } catch (e) {
      return (e as RealtimeRefusal).type
    }
  }
  t.equal(refusal("{"), "input_error")
  t.equal(refusal(JSON.stringify({ message_type: "input_audio_chunk", audio_base_64: "abc" })), "input_error", "length not a multiple of 4")
  t.equal(refusal(JSON.stringify({ message_type: "input_audio_chunk", audio_base_64: "", sample_rate: 16000 }), "ulaw_8000"), "input_error", "sample_rate of another format")
  t.equal(refusal(JSON.stringify({ message_type: "input_audio_chunk", audio_base_64: Buffer.alloc(8000 * 6).toString("base64") }), "ulaw_8000"), "chunk_size_exceeded")
})

t.test("timestamped words: a spacing between words, seconds", async (t) => {
  t.same(timestampedWords([{ text: "a", startMs: 100, endMs: 300, logprob: -0.1 }, { text: "b", startMs: 350, endMs: 600, logprob: -0.2 }]), [
    { text: "a", start: 0.1, end: 0.3, type: "word", logprob: -0.1 },
    { text: " ", start: 0.3, end: 0.35, type: "spacing", logprob: 0 },
    { text: "b", start: 0.35, end: 0.6, type: "word", logprob: -0.2 }
  ])
})
