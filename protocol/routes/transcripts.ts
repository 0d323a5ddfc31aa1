import { Effect } from "effect"
import { BlobStore } from "../../storage/BlobStore.ts"
import { RecognitionJobs } from "../../storage/RecognitionJobs.ts"
import { notFound } from "../ApiError.ts"
import { Reply, type RequestContext, type Route } from "../Http.ts"
import { ErrorBody } from "../schemas/ErrorBody.ts"
import { SpeechToTextResponse } from "../schemas/Stt.ts"

const errorDoc = (description: string) => ({ description, schema: ErrorBody })

/**
 * Beyond the spec, for the ElevenLabs SDKs (`speechToText.transcripts.get` / `.delete`): the
 * transcript of a finished job by its transcription id. Synchronous transcriptions are not
 * stored, so their ids are not found here.
 */
export const transcriptRoutes = (apiBase: string): ReadonlyArray<Route<RecognitionJobs | BlobStore>> => {
  const byTranscription = (ctx: RequestContext) =>
    Effect.gen(function*() {
      const jobs = yield* RecognitionJobs
      const id = ctx.params.transcription_id!
      const job = yield* jobs.byTranscription(id)
      if (job === undefined || (job.user_id !== null && job.user_id !== ctx.principal?.userId) || job.state !== "succeeded") {
        return yield* notFound(`no finished transcript ${id}`, "transcript_not_found")
      }
      return { jobs, job }
    })
  return [
    {
      method: "GET",
      path: `${apiBase}/speech-to-text/transcripts/{transcription_id}`,
      auth: "optional",
      operationId: "getTranscript",
      summary: "The transcript of a finished recognition job (webhook or job flow), by transcription id",
      tags: ["speech-to-text"],
      responses: { 200: { description: "the transcript", schema: SpeechToTextResponse }, 404: errorDoc("unknown, unfinished, or another user's") },
      handler: (ctx) => Effect.map(byTranscription(ctx), ({ job }) => Reply.json(200, job.result))
    },
    {
      method: "DELETE",
      path: `${apiBase}/speech-to-text/transcripts/{transcription_id}`,
      auth: "optional",
      operationId: "deleteTranscript",
      summary: "Delete a finished job and its transcript",
      tags: ["speech-to-text"],
      responses: { 200: { description: "deleted" }, 404: errorDoc("unknown, unfinished, or another user's") },
      handler: (ctx) =>
        Effect.gen(function*() {
          const { jobs, job } = yield* byTranscription(ctx)
          const keptAudio = yield* jobs.remove(job.id)
          // Audio kept for enrolling its speakers goes with the job.
          if (typeof keptAudio === "string") yield* (yield* BlobStore).delete(keptAudio).pipe(Effect.ignore)
          return Reply.json(200, { transcription_id: job.transcription_id, deleted: true })
        })
    }
  ]
}
