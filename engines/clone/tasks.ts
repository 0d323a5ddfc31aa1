/**
 * Worker-side task kinds of voice cloning.
 *
 * `clone.analyze`: the reference speech (16 kHz Int16, moved) with its VAD segments and optional
 * transcript → the speaker profile (VoiceAnalysis.ts) and the synthesis plan (CloneVoice.ts).
 * Runs once per clone; a few seconds of one thread (several base syntheses).
 * `clone.synthesize`: one segment of text with a clone plan → the same output as
 * `tts.synthesize`, so the speech actors treat clones and presets alike.
 *
 * A neural zero-shot engine would implement these two kinds over the stored sample and
 * transcript instead; callers would not change.
 */
import { floatToInt16, int16ToFloat } from "../audio/Pcm.ts"
import { resample } from "../audio/Resampler.ts"
import { defineTasks, TaskError, transfer } from "../tasks.ts"
import { engineFor, type SynthesizeOutput } from "../tts/tasks.ts"
import { TtsError } from "../tts/TtsEngine.ts"
import { type ClonePlan, planClone, renderClone } from "./CloneVoice.ts"
import { analyzeVoice, type VoiceProfile } from "./VoiceAnalysis.ts"

export interface CloneAnalyzeInput {
  /** s16le mono at 16 kHz. */
  readonly pcm: Int16Array
  /** Speech segments by VAD, ms. */
  readonly segments: ReadonlyArray<{ readonly startMs: number; readonly endMs: number }>
  readonly language: string
  readonly refText?: string | undefined
}

export interface CloneAnalyzeOutput {
  readonly profile: VoiceProfile
  readonly plan: ClonePlan
  readonly candidates: ReadonlyArray<{ readonly voiceId: string; readonly score: number }>
  readonly dropped: ReadonlyArray<string>
  readonly engineMs: number
}

export interface CloneSynthesizeInput {
  readonly text: string
  readonly plan: ClonePlan
  /** 0.5 to 2. */
  readonly speed: number
  /** Hz of the returned PCM. */
  readonly sampleRate: number
}

const asTaskError = (e: unknown): unknown => (TtsError.is(e) ? new TaskError(e.reason, e.message, "TtsError") : e)

export const cloneTasks = defineTasks({
  "clone.analyze": async (input: CloneAnalyzeInput): Promise<CloneAnalyzeOutput> => {
    if (!(input.pcm instanceof Int16Array)) throw new TaskError("InvalidInput", "pcm must be an Int16Array", "CloneError")
    const started = performance.now()
    const samples = int16ToFloat(input.pcm)
    const wordCount = input.refText !== undefined ? input.refText.split(/\s+/).filter((w) => w !== "").length : undefined
    const profile = analyzeVoice(samples, { segments: input.segments, ...(wordCount !== undefined ? { wordCount } : {}) })
    try {
      const { plan, candidates, dropped } = await planClone({
        reference: samples,
        profile,
        language: input.language,
        refText: input.refText,
        engineFor: (voice) => engineFor({ voice })
      })
      return { profile, plan, candidates, dropped, engineMs: performance.now() - started }
    } catch (e) {
      throw asTaskError(e)
    }
  },
  "clone.synthesize": async (input: CloneSynthesizeInput) => {
    const started = performance.now()
    let result
    try {
      result = await renderClone(await engineFor({ voice: input.plan.engineVoice }), input.plan, input.text, input.speed)
    } catch (e) {
      throw asTaskError(e)
    }
    const engineMs = performance.now() - started
    const samples = result.sampleRate === input.sampleRate ? result.samples : resample(result.samples, result.sampleRate, input.sampleRate)
    const pcm = floatToInt16(samples)
    const output: SynthesizeOutput = { pcm, sampleRate: input.sampleRate, engineSampleRate: result.sampleRate, words: result.words, engineMs }
    return transfer(output, [pcm.buffer as ArrayBuffer])
  }
})
