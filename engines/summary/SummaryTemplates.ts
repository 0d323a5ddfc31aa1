/**
 * The summary template catalogue, as data (SPEC endpoint 22: no create or delete). Each template
 * is a list of sections; the extractive engine fills a section by its `focus`, a chat model gets
 * the titles and descriptions as instructions. Ids are part of the API: never rename one.
 */
import type { SummaryTemplate } from "./Summarizer.ts"

export const DEFAULT_TEMPLATE_ID = "meeting_notes"

export const SUMMARY_TEMPLATES: ReadonlyArray<SummaryTemplate> = [
  {
    id: "meeting_notes",
    name: "Meeting notes",
    description: "Overview, key points, decisions and action items of a meeting or call.",
    sections: [
      { id: "overview", title: "Overview", kind: "paragraph", focus: "salient", maxItems: 3, description: "What the conversation was about, in two or three sentences." },
      { id: "key_points", title: "Key points", kind: "bullets", focus: "salient", maxItems: 6, description: "The main points raised, one per item, without repeating the overview." },
      { id: "decisions", title: "Decisions", kind: "bullets", focus: "decisions", maxItems: 6, description: "What was decided or agreed, one decision per item." },
      { id: "action_items", title: "Action items", kind: "actions", focus: "actions", maxItems: 8, description: "Tasks someone committed to or was asked to do, with the owner when the speaker is known." }
    ]
  },
  {
    id: "brief",
    name: "Brief",
    description: "The recording in three to five sentences.",
    sections: [
      { id: "summary", title: "Summary", kind: "paragraph", focus: "salient", minItems: 3, maxItems: 5, description: "Three to five sentences covering the whole recording." }
    ]
  },
  {
    id: "bullet_points",
    name: "Bullet points",
    description: "The main points as a list, in the order they came up.",
    sections: [
      { id: "points", title: "Main points", kind: "bullets", focus: "salient", maxItems: 10, description: "The main points, one per item, in the order they were made." }
    ]
  },
  {
    id: "speaker_recap",
    name: "Per-speaker recap",
    description: "What each speaker said, speaker by speaker (needs a diarized transcript to tell speakers apart).",
    sections: [
      { id: "speakers", title: "Speakers", kind: "speakers", focus: "per_speaker", maxItems: 3, description: "For each speaker, up to three of their main points." }
    ]
  }
]

export const findTemplate = (id: string): SummaryTemplate | undefined => SUMMARY_TEMPLATES.find((t) => t.id === id)
