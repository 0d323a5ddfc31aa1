/**
 * A summary's sections as Markdown (the record's `text`): `# template name`, then `## section`
 * per section. Items are written as sentences (first letter capitalised, a full stop when they
 * have no closing punctuation) with the speaker and time when known; characters Markdown would
 * read as markup are escaped, so a transcript or a model cannot inject links or HTML.
 */
import type { SummaryItem, SummaryOutput, SummaryTemplate } from "./Summarizer.ts"

/** Text for one line of Markdown: whitespace runs (line breaks too) become one space, markup is escaped. */
const escape = (text: string) => text.replace(/\s+/gu, " ").trim().replace(/[\\`*_{}[\]()<>#+|!~]/gu, (c) => `\\${c}`)

const sentence = (text: string) => {
  const t = text.trim().replace(/\s+/gu, " ")
  if (t === "") return t
  const capital = t[0]!.toUpperCase() + t.slice(1)
  return escape(/[.!?…]["'”’)]*$/u.test(capital) ? capital : `${capital}.`)
}

/** Seconds as m:ss (h:mm:ss past an hour). */
export const clock = (s: number) => {
  const total = Math.max(0, Math.floor(s))
  const h = Math.floor(total / 3600)
  const m = Math.floor((total % 3600) / 60)
  const ss = String(total % 60).padStart(2, "0")
  return h > 0 ? `${h}:${String(m).padStart(2, "0")}:${ss}` : `${m}:${ss}`
}

const attribution = (item: SummaryItem, withSpeaker: boolean) => {
  const parts = [
    ...(withSpeaker && item.speaker != null ? [escape(item.speaker)] : []),
    ...(item.start !== undefined ? [clock(item.start)] : [])
  ]
  return parts.length === 0 ? "" : ` _(${parts.join(", ")})_`
}

const NONE = "_None found._"

export const summaryMarkdown = (template: SummaryTemplate, output: SummaryOutput): string => {
  const blocks = [`# ${escape(template.name)}`]
  for (const section of output.sections) {
    const lines = [`## ${escape(section.title)}`]
    const items = section.items.filter((i) => i.text.trim() !== "")
    if (items.length === 0) lines.push(NONE)
    else if (section.kind === "paragraph") lines.push(items.map((i) => sentence(i.text)).join(" "))
    else if (section.kind === "actions") {
      for (const i of items) lines.push(`- [ ] ${sentence(i.text)}${i.owner != null ? ` — owner: **${escape(i.owner)}**` : ""}${attribution(i, false)}`)
    } else if (section.kind === "speakers") {
      const bySpeaker = new Map<string, Array<SummaryItem>>()
      for (const i of items) {
        const key = i.speaker ?? "Speaker"
        bySpeaker.set(key, [...(bySpeaker.get(key) ?? []), i])
      }
      for (const [speaker, said] of bySpeaker) {
        lines.push("", `### ${escape(speaker)}`, ...said.map((i) => `- ${sentence(i.text)}${attribution(i, false)}`))
      }
    } else for (const i of items) lines.push(`- ${sentence(i.text)}${attribution(i, true)}`)
    blocks.push(lines.join("\n"))
  }
  return `${blocks.join("\n\n")}\n`
}
