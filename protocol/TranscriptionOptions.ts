/**
 * The transcription options of speech-to-text, read the same way from a multipart form (all
 * strings, as the SDKs send them) and from a JSON job start body (booleans, numbers, arrays):
 * `language_code`, `diarize`, `num_speakers`, `timestamps_granularity`, `additional_formats`,
 * and `speaker_recognition` (beyond ElevenLabs: keep the job's voiceprints and match them with
 * the caller's saved speakers; needs `diarize`). Each bad value is a 400 naming the field.
 */
import { Effect } from "effect"
import { knownFormats } from "../actors/Transcript.ts"
import type { JobOptions } from "../storage/RecognitionJobs.ts"
import { type ApiError, badRequest } from "./ApiError.ts"

/** ISO 639-3 codes the SDKs document for the recognizers here, mapped to the 639-1 the engines use. */
const iso6393: Record<string, string> = { eng: "en", est: "et" }

export const toIso6391 = (code: string | undefined): string | undefined => {
  const c = code?.trim().toLowerCase()
  return c === undefined || c === "" ? undefined : iso6393[c] ?? c
}

/** true / 1 / yes / on (any case) as a string, or a JSON boolean. */
export const truthy = (v: unknown): boolean =>
  v === true || (typeof v === "string" && /^(true|1|yes|on)$/i.test(v.trim()))

/** `additional_formats` as the SDK sends it (a JSON string of objects), a plain comma list, or a JSON array. */
export const parseFormats = (raw: unknown): Array<string> => {
  if (raw === undefined || raw === null) return []
  let items: Array<unknown>
  if (Array.isArray(raw)) items = raw
  else {
    const text = String(raw)
    if (text.trim() === "") return []
    try {
      const parsed = JSON.parse(text) as unknown
      items = Array.isArray(parsed) ? parsed : [parsed]
    } catch {
      items = text.split(",")
    }
  }
  // An object or array in place of a name is named as such: String() of a deeply nested array
  // overflows the stack (a 500 for a JSON job start body).
  return items.map((i) => (typeof i === "string" ? i : (i as { format?: unknown })?.format))
    .map((f) => (typeof f === "object" && f !== null ? "(object)" : String(f ?? "")).trim().toLowerCase())
}

const optionalText = (fields: Readonly<Record<string, unknown>>, name: string): string | undefined => {
  const v = fields[name]
  return v === undefined || v === null ? undefined : String(v)
}

const scalarFields = ["language_code", "timestamps_granularity", "num_speakers", "diarize", "speaker_recognition"] as const

export const parseTranscriptionOptions = (fields: Readonly<Record<string, unknown>>): Effect.Effect<JobOptions, ApiError> =>
  Effect.gen(function*() {
    // JSON bodies may put objects or arrays here; String() of those is no option value.
    for (const name of scalarFields) {
      const v = fields[name]
      if (typeof v === "object" && v !== null) return yield* badRequest(`${name} must be a string, number or boolean`)
    }
    const granularity = (optionalText(fields, "timestamps_granularity") ?? "word").trim().toLowerCase()
    if (granularity !== "word" && granularity !== "none" && granularity !== "character") {
      return yield* badRequest(`timestamps_granularity must be word, none or character, got ${granularity}`)
    }
    const formats = parseFormats(fields.additional_formats)
    const unknown = formats.filter((x) => !knownFormats.has(x))
    if (unknown.length > 0) {
      return yield* badRequest(`unknown additional_formats: ${unknown.join(", ")}; supported: srt, txt, segmented_json (docx, html, pdf are skipped)`)
    }
    const speakersText = optionalText(fields, "num_speakers")
    const numSpeakers = speakersText !== undefined && speakersText.trim() !== "" ? Number(speakersText) : undefined
    if (numSpeakers !== undefined && !(Number.isInteger(numSpeakers) && numSpeakers >= 1 && numSpeakers <= 32)) {
      return yield* badRequest("num_speakers must be an integer from 1 to 32")
    }
    const diarize = truthy(fields.diarize)
    const speakerRecognition = truthy(fields.speaker_recognition)
    if (speakerRecognition && !diarize) return yield* badRequest("speaker_recognition needs diarize=true: voiceprints are taken per diarized speaker")
    return {
      languageCode: toIso6391(optionalText(fields, "language_code")),
      diarize,
      ...(speakerRecognition ? { speakerRecognition } : {}),
      numSpeakers,
      timestampsGranularity: granularity,
      additionalFormats: formats
    } satisfies JobOptions
  })
