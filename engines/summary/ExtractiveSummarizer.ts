/**
 * `Summarizer` by extraction (Extractive.ts over the pause-bounded units of Sentences.ts): no
 * model, no network, every item a verbatim piece of the transcript. It runs on the main thread,
 * measured warm: about 6 ms for a 5-minute call, 14 ms for an hour, 26 ms for two (the quadratic
 * graph gives way to the centroid past 300 units, Extractive.ts); the fiber yields before it starts.
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
