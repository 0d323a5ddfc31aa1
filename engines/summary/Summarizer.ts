/**
 * Summaries of finished transcripts as one Effect service: routes, the job runner and the MCP
 * tools call `Summarizer.summarize`; one layer per implementation provides it (the extractive
 * default in ExtractiveSummarizer.ts, an OpenAI-compatible chat model in LlmSummarizer.ts).
 *
 * The input is the transcript as this service stores it (ElevenLabs words: lower-case, no
 * punctuation, times in seconds, `speaker_id` when diarized); the output is structured sections
 * per template (SummaryTemplates.ts) that SummaryMarkdown.ts renders. Main thread only.
 */
import { Context, Data, type Effect } from "effect"

/** One recognised word; times are seconds and absent when the job ran with granularity `none`. */
export interface SummaryWord {
  readonly text: string
  readonly start?: number | undefined
  readonly end?: number | undefined
  /** The diarization id (`speaker_0`), absent when the job was not diarized. */
  readonly speaker?: string | undefined
}

export interface SummarySource {
  /** Words in spoken order (spacing entries already dropped). */
  readonly words: ReadonlyArray<SummaryWord>
  /** ISO 639 code of the transcript (`en`, `eng`). */
  readonly language: string
  /** Display names of speakers that speaker recognition matched, by speaker id. */
  readonly speakerNames?: Readonly<Record<string, string>> | undefined
}

/** How a section is filled and rendered. */
export type SectionKind =
  | "paragraph" // a few sentences read as prose
  | "bullets" // one sentence per item
  | "actions" // one task per item, with an owner when a speaker is known
  | "speakers" // one recap per speaker (`speaker` set on every item)

/** What a section collects from the transcript. */
export type SectionFocus =
  | "salient" // the most central sentences, without repeats
  | "decisions" // what was decided or agreed
  | "actions" // who is to do what
  | "per_speaker" // each speaker's main points

export interface TemplateSection {
  readonly id: string
  readonly title: string
  readonly kind: SectionKind
  readonly focus: SectionFocus
  /** What belongs in the section: shown to API users and given to a chat model as instructions. */
  readonly description: string
  /** Most items the section holds (per speaker for `per_speaker`). */
  readonly maxItems: number
  /** Fewest items when the transcript has enough sentences (a brief is 3-5 sentences). */
  readonly minItems?: number
}

export interface SummaryTemplate {
  readonly id: string
  readonly name: string
  readonly description: string
  readonly sections: ReadonlyArray<TemplateSection>
}

export interface SummaryItem {
  readonly text: string
  /** Who said it (speaker id, or the saved name when matched); null when not diarized. */
  readonly speaker?: string | null | undefined
  /** For action items: who is to do it, when a speaker is known. */
  readonly owner?: string | null | undefined
  /** Seconds into the recording, when the transcript carries times. */
  readonly start?: number | undefined
  readonly end?: number | undefined
}

export interface SummarySection {
  readonly id: string
  readonly title: string
  readonly kind: SectionKind
  readonly items: ReadonlyArray<SummaryItem>
}

export interface SummaryOutput {
  /** Which engine wrote it: `extractive`, or `llm:<model>`. */
  readonly engine: string
  /** One per template section, in the template's order (possibly with no items). */
  readonly sections: ReadonlyArray<SummarySection>
}

export class SummarizerError extends Data.TaggedError("SummarizerError")<{
  /** `EngineFailed`: the engine answered wrongly or not at all (502 `engine_failed`). */
  readonly reason: "EngineFailed" | "TimedOut" | "EmptyTranscript"
  readonly message: string
}> {}

export class Summarizer extends Context.Service<Summarizer, {
  /** The engine name stored with each summary (`extractive`, `llm:<model>`). */
  readonly engine: string
  readonly summarize: (source: SummarySource, template: SummaryTemplate) => Effect.Effect<SummaryOutput, SummarizerError>
}>()("speech/engines/Summarizer") {}
