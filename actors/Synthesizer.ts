/**
 * Main-thread face of text-to-speech: resolves a voice id (presets, this deployment's Piper
 * voices, the caller's clones), runs one synthesis of one piece of text through the `Tts`
 * engine service, and renders and caches voice previews. Everything heavier (engines,
 * resampling, s16 conversion) happens in the engine; this module only routes.
 */
import { Context, Effect, Layer, Metric } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import { languageInfo, PRESET_VOICES, type PresetVoice, resolveLanguage } from "../engines/tts/Voices.ts"
import { piperPresets } from "./PiperVoices.ts"
import { presetVoiceIn } from "../engines/tts/PresetTimbres.ts"
import type { SynthesizeInput, SynthesizeOutput, SynthesizeSummary } from "../engines/tts/tasks.ts"
import type { ExpressivePart } from "../engines/tts/ExpressiveTags.ts"
import type { ExpressiveInput } from "../engines/tts/expressiveTasks.ts"
import type { EngineVoice } from "../engines/tts/TtsEngine.ts"
import { Tts } from "../engines/tts/Tts.ts"
import { encodeWav } from "../engines/audio/Wav.ts"
import type { Priority, EngineError } from "../engines/Inference.ts"
import type { ClonePlan } from "../engines/clone/CloneVoice.ts"
import type { CloneSynthesizeInput } from "../engines/clone/tasks.ts"
import { VoiceClones, type VoiceClonesError } from "../storage/VoiceClones.ts"
import { SpeechError } from "../engines/tts/SpeechError.ts"
import { ClonePreviewCache, MAX_CACHED_PREVIEWS } from "./VoicePreviews.ts"

export interface ResolvedVoice {
  readonly voiceId: string
  readonly kind: "preset" | "clone"
  /** ISO 639-1; also the segmenter's locale. */
  readonly language: string
  readonly engineVoice: EngineVoice
  /** Clones only: the plan `clone.synthesize` renders with (engineVoice is its base voice). */
  readonly clonePlan?: ClonePlan
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

/** A voice's preview (WAV, 24 kHz): `shared` for presets, which anyone may cache; a clone's is its owner's. */
export interface VoicePreview {
  readonly wav: Uint8Array
  readonly shared: boolean
}

/**
 * Punctuation and white space only ("...", "!? "): nothing to say, whatever the voice. Engines
 * differed here (Flite's walter-en made 7 ms of near-silence for "... ", espeak nothing), so the
 * same text was refused with 400 over HTTP and answered with a charged frame on the WebSocket;
 * now it is silence everywhere, without an engine call (and, having no audio, uncharged).
 * Symbols ("$", "%") are spoken by the engines and stay.
 */
const unspoken = (text: string): boolean => /^[\p{P}\s]*$/u.test(text)

export class Synthesizer extends Context.Service<Synthesizer, {
  /** Every voice callers may use: the catalogue presets, then this deployment's Piper voices. */
  readonly voices: ReadonlyArray<PresetVoice>
  readonly findVoice: (voiceId: string) => PresetVoice | undefined
  /**
   * A preset, or (with `userId`, when clone storage is configured) one of that user's clones;
   * anyone else's clone is VoiceNotFound, like an unknown id.
   */
  readonly resolveVoice: (voiceId: string, userId?: string | null) => Effect.Effect<ResolvedVoice, SpeechError>
  readonly synthesize: (request: SynthesisRequest) => Effect.Effect<SynthesizeOutput, SpeechError | EngineError>
  /**
   * The same audio handed to `onBlock` as the engine makes it (main thread, outside any fiber:
   * offer to a queue and return). Clones render whole and arrive as one block.
   */
  readonly synthesizeStream: (request: SynthesisRequest, onBlock: (pcm: Int16Array) => void) => Effect.Effect<SynthesizeSummary, SpeechError | EngineError>
  /** Task `tts.expressive`: the same output as `synthesize`, rendered with the tags' prosody and effects. */
  readonly synthesizeExpressive: (request: ExpressiveSynthesisRequest) => Effect.Effect<SynthesizeOutput, SpeechError | EngineError>
  /**
   * The voice saying its language's canned sentence (a clone: its own preview text, if any),
   * rendered once and then served from memory (see actors/VoicePreviews.ts). A clone needs its
   * owner's `userId`; without it, or for anyone else, it is VoiceNotFound.
   */
  readonly preview: (voiceId: string, userId?: string | null) => Effect.Effect<VoicePreview, SpeechError | EngineError | VoiceClonesError | SqlError>
  /** Forgets a clone's cached preview (the clone was edited or deleted). */
  readonly dropPreview: (voiceId: string) => Effect.Effect<void>
  /**
   * PCM from `synthesize` / `synthesizeStream` whose bytes are written out goes back to the
   * workers for their next outputs (engines/SpareBuffers.ts). Hazard: every view of its buffer
   * reads as empty afterwards; call it only where nothing else holds the PCM.
   */
  readonly recycle: (pcm: Int16Array) => void
}>()("speech/actors/Synthesizer") {}

/** Pool tasks started by `synthesize` / `synthesizeExpressive` (what tests count to see caching work). */
export const synthesesStarted = Metric.counter("tts_syntheses_total", {
  description: "Syntheses sent to the worker pool (one per segment, preview or WebSocket chunk)"
})

export const SynthesizerLive = (options: { readonly piperDirectory?: string | undefined }) =>
  Layer.effect(
    Synthesizer,
    Effect.gen(function*() {
      const tts = yield* Tts
      const clones = yield* Effect.serviceOption(VoiceClones)
      const voices: Array<PresetVoice> = [...PRESET_VOICES]
      if (options.piperDirectory !== undefined) {
        const piper = piperPresets(options.piperDirectory, new Set(voices.map((v) => v.voiceId)))
        voices.push(...piper.voices)
        yield* Effect.logInfo("piper voices", { directory: options.piperDirectory, voices: piper.voices.map((v) => v.voiceId), skipped: piper.skipped })
      }
      const byId = new Map(voices.map((v) => [v.voiceId, v]))
      const findVoice = (voiceId: string) => byId.get(voiceId)
      const notFound = (voiceId: string) =>
        new SpeechError({ reason: "VoiceNotFound", message: `voice "${voiceId}" not found; GET /v1/voices lists the voices` })
      // Untraced: these run per request and per sentence, on the way to the first audio (a traced
      // Effect.fn captures a stack and builds a span per call).
      const resolveVoice = Effect.fnUntraced(function*(voiceId: string, userId?: string | null) {
        if (voiceId.startsWith("vc_")) {
          if (clones._tag === "None" || userId === undefined || userId === null) return yield* notFound(voiceId)
          const row = yield* clones.value.get(userId, voiceId).pipe(
            Effect.catchTag("VoiceClonesError", () => Effect.fail(notFound(voiceId))),
            Effect.orDie
          )
          const plan = (row.profile as { plan?: ClonePlan } | null)?.plan
          if (plan === undefined) return yield* notFound(voiceId)
          const clone = { voiceId, kind: "clone" as const, language: plan.engineVoice.language, engineVoice: plan.engineVoice, clonePlan: plan }
          // The plan was made on a base voice of the language the clone had then; a clone whose
          // language was changed since (voices.update) speaks the new one with the same timbre.
          return row.language === clone.language || languageInfo(row.language) === undefined
            ? clone
            : revoice(clone, row.language, byId.get(plan.baseVoiceId)?.labels.gender)
        }
        const preset = byId.get(voiceId)
        if (preset === undefined) return yield* notFound(voiceId)
        return { voiceId, kind: "preset" as const, language: preset.engineVoice.language, engineVoice: preset.engineVoice }
      })
      /** What a synthesis of nothing speakable returns: no audio, no words, no engine call. */
      const silence = (request: SynthesisRequest) => ({ sampleRate: request.sampleRate, engineSampleRate: request.sampleRate, words: [], engineMs: 0 })
      const presetInput = (request: SynthesisRequest): SynthesizeInput => ({
        text: request.text,
        voice: request.voice.engineVoice,
        speed: request.speed,
        sampleRate: request.sampleRate,
        ...(options.piperDirectory !== undefined ? { piperDirectory: options.piperDirectory } : {})
      })
      const synthesizeClone = (request: SynthesisRequest, plan: ClonePlan) =>
        tts.synthesizeClone({ text: request.text, plan, speed: request.speed, sampleRate: request.sampleRate } satisfies CloneSynthesizeInput, { priority: request.priority })
      const synthesize = Effect.fnUntraced(function*(request: SynthesisRequest) {
        if (unspoken(request.text)) return { ...silence(request), pcm: new Int16Array(0) }
        yield* Metric.update(synthesesStarted, 1)
        const plan = request.voice.clonePlan
        if (plan !== undefined) return yield* synthesizeClone(request, plan)
        return yield* tts.synthesize(presetInput(request), { priority: request.priority })
      })
      const synthesizeStream = Effect.fnUntraced(function*(request: SynthesisRequest, onBlock: (pcm: Int16Array) => void) {
        if (unspoken(request.text)) return { ...silence(request), samples: 0 }
        yield* Metric.update(synthesesStarted, 1)
        const plan = request.voice.clonePlan
        if (plan === undefined) return yield* tts.synthesizeStream(presetInput(request), { priority: request.priority }, onBlock)
        return yield* asOneBlock(synthesizeClone(request, plan), onBlock)
      })
      const synthesizeExpressive = Effect.fn("Synthesizer.synthesizeExpressive")(function*(request: ExpressiveSynthesisRequest) {
        yield* Metric.update(synthesesStarted, 1)
        const input: ExpressiveInput = {
          parts: request.parts,
          voice: request.voice.engineVoice,
          speed: request.speed,
          sampleRate: request.sampleRate,
          ...(options.piperDirectory !== undefined ? { piperDirectory: options.piperDirectory } : {})
        }
        return yield* tts.synthesizeExpressive(input, { priority: request.priority })
      })

      // Presets never change: one preview per voice for the life of the process.
      const presetPreviews = new Map<string, Uint8Array>()
      const clonePreviews = new ClonePreviewCache(MAX_CACHED_PREVIEWS)
      const render = (voice: ResolvedVoice, text: string) =>
        Effect.map(synthesize({ voice, text, speed: 1, sampleRate: 24000, priority: "batch" }), (out) => encodeWav(out.pcm, out.sampleRate))
      const preview = Effect.fn("Synthesizer.preview")(function*(voiceId: string, userId?: string | null) {
        if (voiceId.startsWith("vc_")) {
          const voice = yield* resolveVoice(voiceId, userId)
          // Resolved, so clone storage is there and the clone is the caller's.
          const row = clones._tag === "Some" && userId !== undefined && userId !== null ? yield* clones.value.get(userId, voiceId) : undefined
          // Made once per version of the clone (dropped on edit/delete).
          const cached = row !== undefined ? clonePreviews.get(row) : undefined
          if (cached !== undefined) return { wav: cached, shared: false }
          const wav = yield* render(voice, row?.previewText ?? previewSentence(voice.language))
          if (row !== undefined) clonePreviews.set(row, wav)
          return { wav, shared: false }
        }
        const voice = yield* resolveVoice(voiceId)
        const cached = presetPreviews.get(voiceId)
        if (cached !== undefined) return { wav: cached, shared: true }
        const wav = yield* render(voice, previewSentence(voice.language))
        presetPreviews.set(voiceId, wav)
        return { wav, shared: true }
      })
      const dropPreview = (voiceId: string) => Effect.sync(() => clonePreviews.drop(voiceId))
      return { voices, findVoice, resolveVoice, synthesize, synthesizeStream, synthesizeExpressive, preview, dropPreview, recycle: tts.recycle }
    })
  )

/** A whole synthesis delivered as a stream of one block (clones, expressive segments, test engines). */
export const asOneBlock = <E, R>(whole: Effect.Effect<SynthesizeOutput, E, R>, onBlock: (pcm: Int16Array) => void): Effect.Effect<SynthesizeSummary, E, R> =>
  Effect.map(whole, ({ pcm, ...rest }) => {
    onBlock(pcm)
    return { ...rest, samples: pcm.length }
  })

/** The canned preview sentence of a language (VoiceCatalogue data). */
export const previewSentence = (language: string): string => languageInfo(language)?.sample ?? "Hello!"

/**
 * A voice speaking another language (ISO 639-1, known to the catalogue). A catalogue preset takes
 * its timbre in that language from engines/tts/PresetTimbres.ts: its own variant, pitch and rate
 * on the language's espeak voice, moved just enough that no two presets sound the same there.
 * Piper models are one language each and speak theirs. A clone's plan keeps its base voice's
 * variant, pitch and rate (Flite bases: the espeak voice of their gender), and its warp and EQ.
 */
export const revoice = (voice: ResolvedVoice, language: string, gender: string | undefined): ResolvedVoice => {
  const row = languageInfo(language)!
  const ev = voice.engineVoice
  const preset = voice.clonePlan === undefined ? presetVoiceIn(voice.voiceId, language) : undefined
  let engineVoice: EngineVoice
  if (preset !== undefined) {
    engineVoice = preset
  } else if (ev.engine === "espeak") {
    const variant = ev.variant.split("+")[1]
    engineVoice = { ...ev, language, variant: variant === undefined ? row.espeak : `${row.espeak}+${variant}` }
  } else if (ev.engine === "flite") {
    engineVoice = { engine: "espeak", language, variant: `${row.espeak}+${gender === "female" ? "f3" : "m3"}`, pitch: 1, rate: 1 }
  } else {
    return voice
  }
  return voice.clonePlan !== undefined
    ? { ...voice, language, engineVoice, clonePlan: { ...voice.clonePlan, engineVoice } }
    : { ...voice, language, engineVoice }
}

/**
 * The ISO 639-1 code of a requested language (a code, a regional tag such as "en-US", or an
 * English name, case-insensitively); undefined when none was given (absent or blank). An unknown
 * value is InvalidRequest (400), the same answer on HTTP and on the WebSocket upgrade.
 */
export const requestedLanguage = (value: string | null | undefined): Effect.Effect<string | undefined, SpeechError> => {
  if (value === undefined || value === null || value.trim() === "") return Effect.succeed(undefined)
  const code = resolveLanguage(value)
  return code !== undefined ? Effect.succeed(code) : Effect.fail(
    new SpeechError({
      reason: "InvalidRequest",
      message: `unknown language "${value}"; give an ISO 639-1 code or an English name, e.g. "et" or "Estonian"`
    })
  )
}

/** `voice` speaking `language` when one is given (see `revoice`); the voice itself otherwise. */
export const speakingIn = (voice: ResolvedVoice, language: string | undefined) =>
  Effect.map(Synthesizer, (synthesizer) => {
    if (language === undefined || language === voice.language) return voice
    const genderOf = voice.clonePlan?.baseVoiceId ?? voice.voiceId
    return revoice(voice, language, synthesizer.findVoice(genderOf)?.labels.gender)
  })
