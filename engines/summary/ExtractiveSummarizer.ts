/**
 * `Summarizer` by extraction (Extractive.ts over the pause-bounded units of Sentences.ts): no
 * model, no network, every item a verbatim piece of the transcript. It runs on the main thread:
 * about 3 ms for a 5-minute call, and the quadratic graph is capped (Extractive.ts) so an hour of
 * talk stays well under a second; the fiber yields before it starts.
 */
import { Effect, Layer } from "effect"
import { extractSections } from "./Extractive.ts"
import { sentenceUnits } from "./Sentences.ts"
import { Summarizer, SummarizerError } from "./Summarizer.ts"

export const extractiveSummarizer = Summarizer.of({
  engine: "extractive",
  summarize: Effect.fn("Summarizer.summarize")(function*(source, template) {
    const units = sentenceUnits(source.words)
    if (units.length === 0) {
      return yield* new SummarizerError({ reason: "EmptyTranscript", message: "the transcript has no words to summarise" })
    }
    yield* Effect.yieldNow
    return { engine: "extractive", sections: extractSections(source, units, template.sections) }
  })
})

export const ExtractiveSummarizer = {
  layer: Layer.succeed(Summarizer, extractiveSummarizer)
}
