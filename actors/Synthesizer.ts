/**
 * Main-thread face of text-to-speech: resolves a voice id, and runs one synthesis of one piece
 * of text on the worker pool. Everything heavier (engines, resampling, s16 conversion) happens
 * in the workers; this module only routes and translates errors.
 */
import { Context, Effect, Layer } from "effect"
import { languageInfo, PRESET_VOICES, type PresetVoice } from "../engines/tts/Voices.ts"
import { piperPresets } from "./PiperVoices.ts"
import type { SynthesizeInput, SynthesizeOutput } from "../engines/tts/tasks.ts"
import type { ExpressivePart } from "../engines/tts/ExpressiveTags.ts"
import type { ExpressiveInput } from "../engines/tts/expressiveTasks.ts"
import type { EngineVoice } from "../engines/tts/TtsEngine.ts"
import { type Priority, type PoolError, WorkerPool } from "../runtime/WorkerPool.ts"
import { fromPool, SpeechError } from "./SpeechError.ts"

export interface ResolvedVoice {
  readonly voiceId: string
  readonly kind: "preset" | "clone"
  /** ISO 639-1; also the segmenter's locale. */
  readonly language: string
  readonly engineVoice: EngineVoice
}

export interface SynthesisRequest {
  readonly voice: ResolvedVoice
  readonly text: string
  /** 0.5 to 2, already clamped. */
  readonly speed: number
  /** Hz of the PCM wanted back. */
  readonly sampleRate: number
  readonly priority: Priority
}

/** One segment of tagged text (SPEC 2.4) for the expressive path. */
export interface ExpressiveSynthesisRequest {
  readonly voice: ResolvedVoice
  /** The segment's parts, offsets relative to the segment (ExpressiveTags.expressiveSegments). */
  readonly parts: ReadonlyArray<ExpressivePart>
  /** 0.5 to 2, already clamped. */
  readonly speed: number
  /** Hz of the PCM wanted back. */
  readonly sampleRate: number
  readonly priority: Priority
}

export class Synthesizer extends Context.Service<Synthesizer, {
  /** Every voice callers may use: the catalogue presets, then this deployment's Piper voices. */
  readonly voices: ReadonlyArray<PresetVoice>
  readonly findVoice: (voiceId: string) => PresetVoice | undefined
  readonly resolveVoice: (voiceId: string) => Effect.Effect<ResolvedVoice, SpeechError>
  readonly synthesize: (request: SynthesisRequest) => Effect.Effect<SynthesizeOutput, SpeechError | PoolError>
  /** Task `tts.expressive`: the same output as `synthesize`, rendered with the tags' prosody and effects. */
  readonly synthesizeExpressive: (request: ExpressiveSynthesisRequest) => Effect.Effect<SynthesizeOutput, SpeechError | PoolError>
}>()("speech/actors/Synthesizer") {}

export const SynthesizerLive = (options: { readonly piperDirectory?: string | undefined }) =>
  Layer.effect(
    Synthesizer,
    Effect.gen(function*() {
      const pool = yield* WorkerPool
      const voices: Array<PresetVoice> = [...PRESET_VOICES]
      if (options.piperDirectory !== undefined) {
        const piper = piperPresets(options.piperDirectory, new Set(voices.map((v) => v.voiceId)))
        voices.push(...piper.voices)
        yield* Effect.logInfo("piper voices", { directory: options.piperDirectory, voices: piper.voices.map((v) => v.voiceId), skipped: piper.skipped })
      }
      const byId = new Map(voices.map((v) => [v.voiceId, v]))
      const findVoice = (voiceId: string) => byId.get(voiceId)
      const resolveVoice = Effect.fn("Synthesizer.resolveVoice")(function*(voiceId: string) {
        const preset = byId.get(voiceId)
        if (preset === undefined) {
          return yield* new SpeechError({ reason: "VoiceNotFound", message: `voice "${voiceId}" not found; GET /v1/voices lists the voices` })
        }
        return { voiceId, kind: "preset" as const, language: preset.engineVoice.language, engineVoice: preset.engineVoice }
      })
      const synthesize = Effect.fn("Synthesizer.synthesize")(function*(request: SynthesisRequest) {
        const input: SynthesizeInput = {
          text: request.text,
          voice: request.voice.engineVoice,
          speed: request.speed,
          sampleRate: request.sampleRate,
          ...(options.piperDirectory !== undefined ? { piperDirectory: options.piperDirectory } : {})
        }
        return yield* pool.run<SynthesizeOutput>("tts.synthesize", input, { priority: request.priority }).pipe(
          Effect.mapError(fromPool)
        )
      })
      const synthesizeExpressive = Effect.fn("Synthesizer.synthesizeExpressive")(function*(request: ExpressiveSynthesisRequest) {
        const input: ExpressiveInput = {
          parts: request.parts,
          voice: request.voice.engineVoice,
          speed: request.speed,
          sampleRate: request.sampleRate,
          ...(options.piperDirectory !== undefined ? { piperDirectory: options.piperDirectory } : {})
        }
        return yield* pool.run<SynthesizeOutput>("tts.expressive", input, { priority: request.priority }).pipe(
          Effect.mapError(fromPool)
        )
      })
      return { voices, findVoice, resolveVoice, synthesize, synthesizeExpressive }
    })
  )

/** The canned preview sentence of a language (VoiceCatalogue data). */
export const previewSentence = (language: string): string => languageInfo(language)?.sample ?? "Hello!"
