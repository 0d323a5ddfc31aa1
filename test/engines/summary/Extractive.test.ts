/**
 * The extractive summarizer on transcripts shaped as the recogniser writes them (lower case, no
 * punctuation, word times, diarization ids): pause-bounded units, every template filled with
 * verbatim units, decisions and action items found by their cue phrases with owners, one recap
 * per speaker, no repeated point, and the Markdown rendering. Properties: any word sequence gives
 * items that are pieces of the transcript, within each section's bounds.
 */
import { Effect, Exit } from "effect"
import fc from "fast-check"
import t from "tap"
import { extractiveSummarizer } from "../../../engines/summary/ExtractiveSummarizer.ts"
import { sentenceUnits } from "../../../engines/summary/Sentences.ts"
import type { SummaryOutput, SummaryWord } from "../../../engines/summary/Summarizer.ts"
import { summaryMarkdown } from "../../../engines/summary/SummaryMarkdown.ts"
import { findTemplate, SUMMARY_TEMPLATES } from "../../../engines/summary/SummaryTemplates.ts"

/** Sentences said in turn: 0.25 s per word, 0.05 s between words, 0.8 s between sentences. */
const speak = (lines: ReadonlyArray<readonly [string | undefined, string]>): Array<SummaryWord> => {
  const words: Array<SummaryWord> = []
  let t = 0
  for (const [speaker, line] of lines) {
    for (const w of line.split(" ")) {
      words.push({ text: w, start: t, end: t + 0.25, speaker })
      t += 0.3
    }
    t += 0.8
  }
  return words
}

const MEETING: ReadonlyArray<readonly [string, string]> = [
  ["speaker_0", "good morning everyone thanks for joining the release planning meeting"],
  ["speaker_1", "the staging tests for the release passed last night without any failures"],
  ["speaker_0", "the release candidate still has one open bug in the export feature"],
  ["speaker_1", "the export bug only affects customers with very large reports"],
  ["speaker_0", "after some discussion we decided to ship the release on friday"],
  ["speaker_1", "i will send the release notes to the support team tomorrow"],
  ["speaker_0", "you need to fix the export bug before the release goes out"],
  ["speaker_1", "the export bug only affects customers with very large reports"],
  ["speaker_0", "marketing wants a short announcement on the company blog"],
  ["speaker_1", "let's go with the blue design for the announcement banner"],
  ["speaker_0", "the budget for the new servers was approved by finance"],
  ["speaker_1", "thanks everyone see you next week"]
]
const words = speak(MEETING)
const transcript = words.map((w) => w.text).join(" ")

const summarize = (template: string, input = words, speakerNames?: Record<string, string>) =>
  Effect.runPromise(extractiveSummarizer.summarize({ words: input, language: "en", speakerNames }, findTemplate(template)!))

const items = (out: SummaryOutput) => out.sections.flatMap((s) => s.items)

t.test("units follow pauses and speaker turns", async (t) => {
  const units = sentenceUnits(words)
  t.same(units.map((u) => u.text), MEETING.map(([, line]) => line))
  t.equal(units[1]!.speaker, "speaker_1")
  t.equal(units[0]!.start, 0)
  const long = speak([["a", Array.from({ length: 90 }, (_, i) => `w${i}`).join(" ")]])
  t.ok(sentenceUnits(long).every((u) => u.words.length <= 40), "a run past 40 words is cut")
  // Back-to-back words (an aligner without pauses): cut in O(n log n), no deep recursion.
  const tight = Array.from({ length: 80_000 }, (_, i) => ({ text: `w${i % 50}`, start: i * 0.3, end: (i + 1) * 0.3 }))
  const cuts = sentenceUnits(tight)
  t.ok(cuts.every((u) => u.words.length <= 40 && u.words.length >= 10), `80,000 words: ${cuts.length} units of 10-40 words`)
  t.same(cuts.flatMap((u) => u.words), tight, "in spoken order, nothing lost")
  const untimed = words.map(({ text }) => ({ text }))
  t.ok(sentenceUnits(untimed).every((u) => u.words.length <= 20), "without times: 20-word windows")
})

t.test("meeting notes: salient overview and key points, decisions, action items with owners", async (t) => {
  const out = await summarize("meeting_notes", words, { speaker_1: "Ana" })
  t.equal(out.engine, "extractive")
  t.same(out.sections.map((s) => s.id), ["overview", "key_points", "decisions", "action_items"])
  for (const item of items(out)) t.ok(transcript.includes(item.text), `verbatim: ${item.text}`)
  const [overview, keyPoints, decisions, actions] = out.sections
  const salient = [...overview!.items, ...keyPoints!.items].map((i) => i.text)
  t.equal(new Set(salient).size, salient.length, "key points do not repeat the overview")
  t.ok(salient.length >= 2)
  t.ok(salient.filter((s) => s.includes("export bug only affects")).length <= 1, "a repeated sentence is picked once at most")
  const decided = decisions!.items.map((i) => i.text)
  t.ok(decided.includes("after some discussion we decided to ship the release on friday"), decided.join(" | "))
  t.ok(decided.includes("let's go with the blue design for the announcement banner"))
  t.ok(decided.includes("the budget for the new servers was approved by finance"))
  const notes = actions!.items.find((i) => i.text.startsWith("i will send"))
  t.equal(notes?.owner, "Ana", "a first-person commitment belongs to its speaker (by saved name)")
  t.equal(notes?.speaker, "Ana")
  const fix = actions!.items.find((i) => i.text.startsWith("you need to fix"))
  t.equal(fix?.owner, "Ana", "'you' in a two-person call is the other speaker")
  t.ok(typeof fix?.start === "number" && typeof fix?.end === "number" && fix.end > fix.start)
})

t.test("brief is 3-5 sentences; bullet points in spoken order; per-speaker recap", async (t) => {
  const brief = await summarize("brief")
  t.ok(brief.sections[0]!.items.length >= 3 && brief.sections[0]!.items.length <= 5)
  const bullets = (await summarize("bullet_points")).sections[0]!.items
  t.same(bullets.map((b) => b.start), [...bullets.map((b) => b.start)].sort((a, b) => a! - b!), "in the order said")
  const recap = (await summarize("speaker_recap")).sections[0]!
  t.equal(recap.kind, "speakers")
  t.same([...new Set(recap.items.map((i) => i.speaker))], ["speaker_0", "speaker_1"], "both speakers, in order of first words")
  t.ok(recap.items.every((i) => MEETING.some(([s, line]) => s === i.speaker && line === i.text)), "each item is that speaker's own")
  const mono = (await summarize("speaker_recap", words.map((w) => ({ ...w, speaker: undefined })))).sections[0]!
  t.ok(mono.items.length > 0 && mono.items.every((i) => i.speaker === null), "no diarization: one group without a speaker")
})

t.test("an empty transcript is an EmptyTranscript error", async (t) => {
  const exit = await Effect.runPromise(Effect.exit(extractiveSummarizer.summarize({ words: [], language: "en" }, SUMMARY_TEMPLATES[0]!)))
  t.ok(Exit.isFailure(exit))
  t.match(JSON.stringify(exit), /EmptyTranscript/)
})

t.test("Markdown: headings, sentences, owners, escaping, empty sections", async (t) => {
  const template = findTemplate("meeting_notes")!
  const md = summaryMarkdown(template, await summarize("meeting_notes", words, { speaker_1: "Ana" }))
  t.match(md, /^# Meeting notes\n\n## Overview\n[A-Z]/u)
  t.match(md, /## Action items\n- \[ \] I will send the release notes to the support team tomorrow\. — owner: \*\*Ana\*\*/u)
  const injected = summaryMarkdown(template, {
    engine: "x",
    sections: [{ id: "overview", title: "Overview", kind: "paragraph", items: [{ text: "click [here](http://evil) <script>" }] }, { id: "key_points", title: "Key points", kind: "bullets", items: [] }]
  })
  t.match(injected, /Click \\\[here\\\]\\\(http:\/\/evil\\\) \\<script\\>\./u, "markup characters are escaped")
  t.match(injected, /## Key points\n_None found\._/u)
  const named = summaryMarkdown(template, {
    engine: "x",
    sections: [{ id: "key_points", title: "Key points", kind: "bullets", items: [{ text: "a point", speaker: "Eve\n# Heading" }] }]
  })
  t.match(named, /- A point\. _\(Eve \\# Heading\)_/u, "a speaker name stays on its line")
})

t.test("property: any transcript gives verbatim items within the sections' bounds", async (t) => {
  const word = fc.constantFrom("we", "the", "release", "i", "will", "send", "decided", "budget", "bug", "export", "you", "need", "to", "fix", "friday", "agreed", "please", "team")
  const line = fc.tuple(fc.constantFrom("speaker_0", "speaker_1", "speaker_2", undefined), fc.array(word, { minLength: 1, maxLength: 50 }).map((ws) => ws.join(" ")))
  await fc.assert(
    fc.asyncProperty(fc.array(line, { minLength: 1, maxLength: 40 }), fc.constantFrom(...SUMMARY_TEMPLATES.map((x) => x.id)), async (lines, id) => {
      const ws = speak(lines)
      const text = ws.map((w) => w.text).join(" ")
      const out = await summarize(id, ws)
      const template = findTemplate(id)!
      return out.sections.every((s, i) => {
        const spec = template.sections[i]!
        const bound = spec.focus === "per_speaker" ? spec.maxItems * 4 : spec.maxItems
        return s.id === spec.id && s.items.length <= bound && s.items.every((item) => item.text !== "" && text.includes(item.text))
      })
    }),
    { numRuns: 150 }
  )
  t.pass()
})
