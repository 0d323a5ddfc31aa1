/** Wire schemas of summaries and the template catalogue (SPEC 2.9, endpoints 19-22). */
import { Schema } from "effect"

export const SummaryGenerateRequest = Schema.Struct({
  templateId: Schema.optional(Schema.String).annotate({ description: "a template id of GET /summary-templates; omitted: the caller's default (template_id is accepted too)" })
}).annotate({ identifier: "SummaryGenerateRequest" })

export const SetDefaultTemplateRequest = Schema.Struct({
  default_template_id: Schema.String.annotate({ description: "a template id of the catalogue (templateId is accepted too)" })
}).annotate({ identifier: "SetDefaultTemplateRequest" })

const SummaryItem = Schema.Struct({
  text: Schema.String.annotate({ description: "extractive engine: words of the transcript, verbatim" }),
  speaker: Schema.optional(Schema.NullOr(Schema.String)),
  owner: Schema.optional(Schema.NullOr(Schema.String).annotate({ description: "action items: who is to do it, when a speaker is known" })),
  start: Schema.optional(Schema.Number.annotate({ description: "seconds into the recording" })),
  end: Schema.optional(Schema.Number)
}).annotate({ identifier: "SummaryItem" })

const SectionKind = Schema.Literals(["paragraph", "bullets", "actions", "speakers"])

export const SummarySection = Schema.Struct({
  id: Schema.String,
  title: Schema.String,
  kind: SectionKind,
  items: Schema.Array(SummaryItem)
}).annotate({ identifier: "SummarySection" })

export const Summary = Schema.Struct({
  summary_id: Schema.String,
  job_id: Schema.String,
  template_id: Schema.String,
  engine: Schema.String.annotate({ description: "extractive, or llm:<model>" }),
  created_at: Schema.String,
  sections: Schema.Array(SummarySection),
  text: Schema.String.annotate({ description: "the sections as Markdown" })
}).annotate({ identifier: "Summary" })

export const SummaryList = Schema.Struct({ summaries: Schema.Array(Summary) }).annotate({ identifier: "SummaryList" })

const TemplateSectionDoc = Schema.Struct({
  id: Schema.String,
  title: Schema.String,
  kind: SectionKind,
  description: Schema.String,
  max_items: Schema.Number
})

export const TemplateCatalogue = Schema.Struct({
  templates: Schema.Array(Schema.Struct({
    id: Schema.String,
    name: Schema.String,
    description: Schema.String,
    sections: Schema.Array(TemplateSectionDoc)
  })),
  default_template_id: Schema.String.annotate({ description: "the caller's default, or the service default" })
}).annotate({ identifier: "TemplateCatalogue" })
