/**
 * Shapes recognised words into the ElevenLabs transcript and its subtitle formats.
 *
 * `words[]` alternates `word` and `spacing` entries, as ElevenLabs returns them: a spacing entry
 * spans the gap between two words. Times are seconds (3 decimals). Cues for srt and
 * segmented_json are cut at pauses over 0.6 s, speaker changes, 84 characters or 6 s; srt never
 * carries speaker labels.
 *
 * segmented_json schema (the service's own): `{ "segments": [ { "text", "start", "end",
 * "speaker_id" (string or null), "words": [ { "text", "start", "end", "speaker_id", "logprob" } ] } ] }`.
 */

export interface TimedWord {
  readonly text: string
  readonly startMs: number
  readonly endMs: number
  readonly logprob: number
  readonly speaker?: string | undefined
}

export interface TranscriptWord {
  readonly text: string
  readonly start: number
  readonly end: number
  readonly type: "word" | "spacing"
  readonly speaker_id?: string
  readonly logprob: number
}

const sec = (ms: number) => Math.round(ms) / 1000

export const transcriptWords = (words: ReadonlyArray<TimedWord>): Array<TranscriptWord> => {
  const out: Array<TranscriptWord> = []
  words.forEach((w, i) => {
    if (i > 0) {
      const prev = words[i - 1]!
      out.push({ text: " ", start: sec(prev.endMs), end: sec(Math.max(prev.endMs, w.startMs)), type: "spacing", ...(w.speaker ? { speaker_id: w.speaker } : {}), logprob: 0 })
    }
    out.push({ text: w.text, start: sec(w.startMs), end: sec(w.endMs), type: "word", ...(w.speaker ? { speaker_id: w.speaker } : {}), logprob: w.logprob })
  })
  return out
}

export const transcriptText = (words: ReadonlyArray<TimedWord>): string => words.map((w) => w.text).join(" ")

export interface Cue {
  readonly words: ReadonlyArray<TimedWord>
  readonly startMs: number
  readonly endMs: number
  readonly text: string
  readonly speaker: string | null
}

const pauseMs = 600
const maxCueChars = 84
const maxCueMs = 6000

export const cues = (words: ReadonlyArray<TimedWord>): Array<Cue> => {
  const out: Array<Cue> = []
  let current: Array<TimedWord> = []
  const close = () => {
    if (current.length === 0) return
    out.push({
      words: current,
      startMs: current[0]!.startMs,
      endMs: current[current.length - 1]!.endMs,
      text: transcriptText(current),
      speaker: current[0]!.speaker ?? null
    })
    current = []
  }
  for (const w of words) {
    const last = current[current.length - 1]
    if (last !== undefined) {
      const text = transcriptText(current)
      if (
        w.startMs - last.endMs > pauseMs || w.speaker !== last.speaker || text.length + 1 + w.text.length > maxCueChars ||
        w.endMs - current[0]!.startMs > maxCueMs
      ) close()
    }
    current.push(w)
  }
  close()
  return out
}

const srtTime = (ms: number): string => {
  const t = Math.max(0, Math.round(ms))
  const h = Math.floor(t / 3_600_000)
  const m = Math.floor((t % 3_600_000) / 60_000)
  const s = Math.floor((t % 60_000) / 1000)
  const f = t % 1000
  return `${String(h).padStart(2, "0")}:${String(m).padStart(2, "0")}:${String(s).padStart(2, "0")},${String(f).padStart(3, "0")}`
}

/** Two lines of at most ~42 characters, split at the space nearest the middle. */
const srtLines = (text: string): string => {
  if (text.length <= 42) return text
  const mid = text.length / 2
  let best = -1
  for (let i = 0; i < text.length; i++) if (text[i] === " " && (best < 0 || Math.abs(i - mid) < Math.abs(best - mid))) best = i
  return best < 0 ? text : `${text.slice(0, best)}\n${text.slice(best + 1)}`
}

export const toSrt = (words: ReadonlyArray<TimedWord>): string =>
  cues(words).map((c, i) => `${i + 1}\n${srtTime(c.startMs)} --> ${srtTime(c.endMs)}\n${srtLines(c.text)}\n`).join("\n")

export const toTxt = (words: ReadonlyArray<TimedWord>): string => {
  const text = cues(words).map((c) => c.text).join("\n")
  return text.length > 0 ? text + "\n" : ""
}

export const toSegmentedJson = (words: ReadonlyArray<TimedWord>): string =>
  JSON.stringify({
    segments: cues(words).map((c) => ({
      text: c.text,
      start: sec(c.startMs),
      end: sec(c.endMs),
      speaker_id: c.speaker,
      words: c.words.map((w) => ({ text: w.text, start: sec(w.startMs), end: sec(w.endMs), speaker_id: w.speaker ?? null, logprob: w.logprob }))
    }))
  })

export interface AdditionalFormat {
  readonly requested_format: string
  readonly file_extension: string
  readonly content_type: string
  readonly is_base64_encoded: boolean
  readonly content: string
}

const renderers: Record<string, { ext: string; type: string; render: (w: ReadonlyArray<TimedWord>) => string }> = {
  srt: { ext: "srt", type: "application/x-subrip", render: toSrt },
  txt: { ext: "txt", type: "text/plain", render: toTxt },
  segmented_json: { ext: "json", type: "application/json", render: toSegmentedJson }
}

/** SPEC 2.5: srt, txt and segmented_json are made; docx, html and pdf are accepted and skipped. */
export const skippedFormats = new Set(["docx", "html", "pdf"])
export const knownFormats = new Set([...Object.keys(renderers), ...skippedFormats])

export const additionalFormats = (requested: ReadonlyArray<string>, words: ReadonlyArray<TimedWord>): Array<AdditionalFormat> =>
  requested.filter((f) => renderers[f] !== undefined).map((f) => {
    const r = renderers[f]!
    return { requested_format: f, file_extension: r.ext, content_type: r.type, is_base64_encoded: false, content: r.render(words) }
  })

/** How the caller asked for the transcript: timestamps and extra files. */
export interface TranscriptShape {
  readonly granularity: "word" | "none" | "character"
  readonly formats: ReadonlyArray<string>
}

/**
 * The body of a finished transcription (ElevenLabs' SpeechToTextChunkResponseModel): the same
 * for the synchronous endpoint, a job's `result`, its webhook delivery and the transcripts
 * endpoint. `none` granularity drops word times; speaker ids stay.
 */
export const speechToTextBody = (
  result: { readonly language: string; readonly languageDetected: boolean; readonly words: ReadonlyArray<TimedWord> },
  shape: TranscriptShape,
  transcriptionId: string
): Record<string, unknown> => {
  const words = transcriptWords(result.words).map((w) =>
    shape.granularity === "none" ? { text: w.text, type: w.type, ...(w.speaker_id ? { speaker_id: w.speaker_id } : {}), logprob: w.logprob } : w
  )
  const body: Record<string, unknown> = {
    language_code: result.language,
    language_probability: result.languageDetected ? 1 : 0,
    text: transcriptText(result.words),
    words,
    transcription_id: transcriptionId
  }
  if (shape.formats.length > 0) body.additional_formats = additionalFormats(shape.formats, result.words)
  return body
}
