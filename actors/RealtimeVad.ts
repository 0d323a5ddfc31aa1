/**
 * `commit_strategy=vad` of a realtime speech-to-text session: Silero VAD over the session's
 * 16 kHz audio as it arrives, deciding when the caller paused long enough to commit.
 *
 * Each received chunk runs as one ordinary pool task (`vad.probabilities`, realtime priority)
 * with the model state carried from the previous chunk, so the probabilities are those of one
 * pass over the whole session. Only whole 32 ms frames go to the model; the remainder waits for
 * the next chunk (a frame split across chunks is the same frame).
 *
 * The decision, per frame (ElevenLabs' parameters):
 *  - speech begins at p ≥ vad_threshold and ends after min_silence_duration_ms below
 *    vad_threshold − 0.15 (Silero's hysteresis, as SpeechSegments.ts);
 *  - a stretch of speech shorter than min_speech_duration_ms is noise and does not count;
 *  - once the utterance has counted speech, vad_silence_threshold_secs of silence since its
 *    last speech commits it.
 *
 * For the commit's prepared final pass (RealtimeTranscription.ts) the detector also says when
 * a pause is long enough to prepare for (`paused`: counted speech, then PREPARE_AFTER_MS of
 * silence, or half the threshold when that is shorter) and counts the frames at or above
 * vad_threshold (`loudFrames`): a pause whose count has not moved since is silence. Not at the
 * stretch's end itself: a 7 s sentence has several 100 ms pauses, and a final pass prepared at
 * each (up to a second of CPU apiece, on the session's thread) put the live decoder seconds
 * behind (measured: the first commit of a session came 5.9 s late instead of 1.4 s).
 */
import { Effect } from "effect"
import { type EngineError, Inference } from "../engines/Inference.ts"
import { VAD_FRAME_MS, VAD_FRAME_SAMPLES, type VadCarry } from "../engines/vad/SileroVad.ts"
import type { VadProbabilitiesInput } from "../engines/vad/tasks.ts"

export interface VadCommitOptions {
  readonly threshold: number
  readonly minSpeechMs: number
  readonly minSilenceMs: number
  readonly silenceThresholdMs: number
}

/** Silence after speech before the commit's final pass is prepared, ms (at most half the threshold). */
export const PREPARE_AFTER_MS = 400

/** The frame-by-frame decision, without the model (tested on its own). */
export class VadCommitDetector {
  private readonly negThreshold: number
  /** Frames of the speech stretch in progress; 0 outside speech. */
  private speechFrames = 0
  /** Frames below negThreshold since the stretch's last speech frame. */
  private quietFrames = 0
  /** The utterance has a stretch long enough to count. */
  private heardSpeech = false
  /** Frames since the last counted speech ended. */
  private silenceFrames = 0
  /** Frames at or above the threshold, ever (never reset): unchanged means only quiet frames came. */
  loudFrames = 0

  constructor(private readonly o: VadCommitOptions) {
    this.negThreshold = Math.max(0.01, o.threshold - 0.15)
  }

  /** Feeds frames' probabilities; true when a commit is due after one of them (the state is then reset). */
  feed(probabilities: ArrayLike<number>): boolean {
    let due = false
    for (let i = 0; i < probabilities.length; i++) if (this.frame(probabilities[i]!)) due = true
    return due
  }

  /** Starts a new utterance (after any commit, manual ones included). */
  reset(): void {
    this.speechFrames = 0
    this.quietFrames = 0
    this.heardSpeech = false
    this.silenceFrames = 0
  }

  /** The utterance has counted speech, and has been silent long enough since to prepare its commit. */
  get paused(): boolean {
    const ms = this.silenceFrames * VAD_FRAME_MS
    return this.heardSpeech && this.speechFrames === 0 && ms >= Math.min(PREPARE_AFTER_MS, this.o.silenceThresholdMs / 2)
  }

  private frame(p: number): boolean {
    const ms = (frames: number) => frames * VAD_FRAME_MS
    if (p >= this.o.threshold) this.loudFrames++
    if (this.speechFrames === 0) {
      if (p >= this.o.threshold) {
        this.speechFrames = 1
        this.quietFrames = 0
        return false
      }
      this.silenceFrames++
      if (this.heardSpeech && ms(this.silenceFrames) >= this.o.silenceThresholdMs) {
        this.reset()
        return true
      }
      return false
    }
    // In a stretch of speech.
    this.speechFrames++
    if (p >= this.o.threshold) this.quietFrames = 0
    else if (p < this.negThreshold || this.quietFrames > 0) this.quietFrames++
    if (this.quietFrames > 0 && ms(this.quietFrames) >= this.o.minSilenceMs) {
      const spoken = this.speechFrames - this.quietFrames
      if (ms(spoken) >= this.o.minSpeechMs) this.heardSpeech = true
      // The quiet frames that ended the stretch count towards the commit's silence.
      this.silenceFrames = this.quietFrames
      this.speechFrames = 0
      this.quietFrames = 0
      if (this.heardSpeech && ms(this.silenceFrames) >= this.o.silenceThresholdMs) {
        this.reset()
        return true
      }
    }
    return false
  }
}

/** A session's VAD: `push` 16 kHz samples, true when the caller paused long enough to commit. */
export const makeRealtimeVad = (options: VadCommitOptions) =>
  Effect.map(Inference, (pool) => {
    const detector = new VadCommitDetector(options)
    let carry: VadCarry | undefined
    let pending = new Int16Array(0)
    const push = (pcm: Int16Array): Effect.Effect<boolean, EngineError> =>
      Effect.suspend(() => {
        const all = new Int16Array(pending.length + pcm.length)
        all.set(pending)
        all.set(pcm, pending.length)
        const whole = all.length - (all.length % VAD_FRAME_SAMPLES)
        pending = all.slice(whole)
        if (whole === 0) return Effect.succeed(false)
        const block = all.slice(0, whole)
        const moved = [block.buffer, ...(carry !== undefined ? [carry.state.buffer as ArrayBuffer, carry.context.buffer as ArrayBuffer] : [])]
        const input: VadProbabilitiesInput = { pcm: block, ...(carry !== undefined ? { carry } : {}) }
        carry = undefined
        return Effect.map(pool.run("vad.probabilities", input, { priority: "realtime", transfer: moved }), (out) => {
          carry = out.carry
          return detector.feed(out.probabilities)
        })
      })
    return { push, reset: () => detector.reset(), paused: () => detector.paused, loudFrames: () => detector.loudFrames }
  })
