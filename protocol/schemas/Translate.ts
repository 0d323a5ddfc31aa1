/** Wire schemas of chunk translation (SPEC endpoint 23, 4.3) and the pair listing. */
import { Schema } from "effect"

export const TranslateChunkRequest = Schema.Struct({
  new_source: Schema.String.annotate({ description: "the new source text to translate (at most 5000 characters)" }),
  source: Schema.String.annotate({ description: "source language: ISO 639-1 (en) or ISO 639-3 (eng)" }),
  target: Schema.String.annotate({ description: "target language, same spellings" }),
  previous: Schema.optional(Schema.String).annotate({ description: "the tail of the translation rendered so far; never rewritten, it decides the joining space and gives context" })
}).annotate({ identifier: "TranslateChunkRequest" })

export const TranslateChunkResponse = Schema.Struct({
  appended: Schema.String.annotate({ description: "text to add after previous" })
}).annotate({ identifier: "TranslateChunkResponse" })

export const TranslationPairs = Schema.Struct({
  pairs: Schema.Array(Schema.Struct({
    source: Schema.String.annotate({ description: "ISO 639-1 code where one exists, else ISO 639-3" }),
    target: Schema.String,
    source_code: Schema.String.annotate({ description: "ISO 639-3" }),
    target_code: Schema.String,
    engine: Schema.String.annotate({ description: "apertium or llm" }),
    mode: Schema.String.annotate({ description: "the engine's own name of the pair (Apertium mode) or the model" })
  }))
}).annotate({ identifier: "TranslationPairs" })
