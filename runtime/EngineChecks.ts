/**
 * The optional engines' checks, for `/readyz` and the start-up log: PocketSphinx (speech-to-text),
 * Debian's espeak-ng library, and the ffmpeg that decodes uploads. Each is optional: without it
 * only its feature fails or degrades, and the instance stays ready and says what is missing.
 * Moved out of runtime/Service.ts (the composition root) to keep that module to wiring.
 */
import { Effect } from "effect"
import { PocketSphinxAsr } from "../engines/asr/PocketSphinxAsr.ts"
import { currentFfmpeg, describeFfmpeg } from "../engines/media/FfmpegBinary.ts"
import { EspeakNative } from "../engines/tts/EspeakNative.ts"
import type { AppConfigShape } from "./Config.ts"

export const pocketsphinxOptions = (config: AppConfigShape) => ({ libraryPath: config.pocketsphinxLibrary, modelDirectory: config.pocketsphinxModelDir })

/** Fails with the engine's own message (which names the missing package) while PocketSphinx cannot load. */
export const asrReady = (config: AppConfigShape) =>
  Effect.suspend(() => {
    const missing = PocketSphinxAsr.check(pocketsphinxOptions(config))
    return missing === undefined ? Effect.void : Effect.fail(missing)
  })

/** The ffmpeg decoding uploads: missing, or npm's 2018 build, is reported (optional: the rest runs). */
export const ffmpegReady = Effect.suspend(() => {
  const choice = currentFfmpeg()
  return choice !== undefined && choice.source !== "npm-2018-fallback" ? Effect.void : Effect.fail(new Error(describeFfmpeg(choice)))
})

export const espeakNativeReady = Effect.suspend(() => {
  const missing = EspeakNative.check()
  return missing === undefined ? Effect.void : Effect.fail(new Error(missing))
})

/** At start-up: a warning for each optional engine missing, and which ffmpeg decodes uploads. */
export const logEngineChecks = (config: AppConfigShape) =>
  Effect.gen(function*() {
    const asrMissing = PocketSphinxAsr.check(pocketsphinxOptions(config))
    if (asrMissing !== undefined) yield* Effect.logWarning("speech-to-text is unavailable; everything else runs", { reason: asrMissing.message })
    const espeakNativeMissing = EspeakNative.check()
    if (espeakNativeMissing !== undefined) yield* Effect.logWarning("espeak-ng speaks with its bundled build", { reason: espeakNativeMissing })
    const ffmpeg = currentFfmpeg()
    if (ffmpeg !== undefined && ffmpeg.source !== "npm-2018-fallback") yield* Effect.logInfo("media decoder", { ffmpeg: describeFfmpeg(ffmpeg) })
    else yield* Effect.logWarning("media decoder", { ffmpeg: describeFfmpeg(ffmpeg) })
  })
