/**
 * Saved speakers (SPEC 2.7, endpoints 12-15): a user enrolls a speaker of one of their finished
 * jobs that ran with `diarize` and `speaker_recognition`, by its raw label; renames, lists and
 * deletes (for real) them. Later jobs of that user with speaker recognition name the speakers
 * they recognise (actors/SpeakerRecognition.ts). Everything is the caller's own: another user's
 * ids are 404.
 *
 * The enroll call is the only thing that stores a voiceprint: jobs keep none. It computes the
 * voiceprint from the job's audio, which a job with speaker recognition keeps for
 * SPEAKER_ENROLL_WINDOW_MINUTES after it finished (actors/SpeakerEnrollment.ts); after that the
 * answer is 409 `enroll_window_closed`.
 */
import { Effect, Schema } from "effect"
import { SpeakerEnrollment } from "../../actors/SpeakerEnrollment.ts"
import { RecognitionJobs } from "../../storage/RecognitionJobs.ts"
import { type SavedSpeaker, SavedSpeakers } from "../../storage/SavedSpeakers.ts"
import { ApiError, badRequest, notFound } from "../ApiError.ts"
import { decodeJsonBody, optionalJsonObject } from "../decode.ts"
import { Reply, type RequestContext, type Route } from "../Http.ts"
import { ErrorBody } from "../schemas/ErrorBody.ts"
import { EnrollSpeakerRequest, RenameSpeakerRequest, SpeakerDeleted, SpeakerList, SpeakerResponse } from "../schemas/Speakers.ts"

export interface SpeakerRouteOptions {
  readonly apiBase: string
  readonly maxJsonBodyBytes: number
}

const errorDoc = (description: string) => ({ description, schema: ErrorBody })
const conflict = (message: string, code: string) => new ApiError({ status: 409, code, message })

const wire = (s: SavedSpeaker) => ({
  id: s.id,
  name: s.name,
  created_at: s.createdAt.toISOString(),
  source_job_id: s.sourceJobId,
  speech_seconds: s.speechSeconds
})

/** The enroll body, its snake_case spellings (`job_id`, `speaker_label`) accepted too. */
const enrollBody = (ctx: RequestContext, limit: number) =>
  Effect.map(optionalJsonObject(ctx, limit), (v) => ({ jobId: v.jobId ?? v.job_id, speakerLabel: v.speakerLabel ?? v.speaker_label, name: v.name }))

export const speakerRoutes = (options: SpeakerRouteOptions): ReadonlyArray<Route<SavedSpeakers | RecognitionJobs | SpeakerEnrollment>> => {
  const base = `${options.apiBase}/recognition/speakers`
  return [
    {
      method: "GET",
      path: base,
      auth: "key",
      operationId: "listSpeakers",
      summary: "The caller's saved speakers, oldest first",
      tags: ["speakers"],
      responses: { 200: { description: "saved speakers", schema: SpeakerList }, 401: errorDoc("no valid credential") },
      handler: (ctx) =>
        Effect.gen(function*() {
          const list = yield* (yield* SavedSpeakers).list(ctx.principal!.userId)
          return Reply.json(200, { speakers: list.map(wire) })
        })
    },
    {
      method: "POST",
      path: base,
      auth: "key",
      operationId: "enrollSpeaker",
      summary: "Save one diarized speaker of a finished job (run with speaker_recognition) under a name",
      tags: ["speakers"],
      requestBody: { contentType: "application/json", schema: EnrollSpeakerRequest, required: true },
      responses: {
        201: { description: "saved", schema: SpeakerResponse },
        400: errorDoc("malformed body, a name over 200 characters, or a label not of the form SPEAKER_<nn>"),
        401: errorDoc("no valid credential"),
        404: errorDoc("no such job of the caller's, or no such label in it"),
        409: errorDoc("the job has not succeeded, ran without diarization or speaker recognition, the label is already enrolled from it, or the job's audio is no longer kept (enroll_window_closed)")
      },
      handler: (ctx) =>
        Effect.gen(function*() {
          const raw = yield* enrollBody(ctx, options.maxJsonBodyBytes)
          const body = yield* Schema.decodeUnknownEffect(EnrollSpeakerRequest)(raw, { errors: "all" }).pipe(
            Effect.mapError((e) => badRequest(`invalid request body: ${String(e.message).split("\n").slice(0, 4).join("; ")}`))
          )
          const userId = ctx.principal!.userId
          const job = yield* (yield* RecognitionJobs).get(body.jobId)
          if (job === undefined || job.user_id !== userId) return yield* notFound(`no recognition job ${body.jobId}`, "job_not_found")
          if (job.state !== "succeeded") return yield* conflict(`job ${job.id} has not succeeded (state ${job.state})`, "job_not_succeeded")
          if (job.options?.diarize !== true || job.options.speakerRecognition !== true) {
            return yield* conflict(`job ${job.id} ran without diarize and speaker_recognition: its speakers cannot be enrolled`, "no_voiceprints")
          }
          const speakers = (job.result as { speakers?: ReadonlyArray<{ speaker_label?: unknown }> } | null)?.speakers ?? []
          if (!speakers.some((s) => s.speaker_label === body.speakerLabel)) {
            return yield* notFound(`job ${job.id} has no speaker ${body.speakerLabel}`, "speaker_label_not_found")
          }
          const saved = yield* SavedSpeakers
          const already = conflict(`${body.speakerLabel} of job ${job.id} is already enrolled`, "speaker_already_enrolled")
          if (yield* saved.isEnrolled(userId, job.id, body.speakerLabel)) return yield* already
          const closed = conflict(
            `the audio of job ${job.id} is no longer kept, so no voiceprint can be taken from it (speakers are enrolled within SPEAKER_ENROLL_WINDOW_MINUTES of the job's end); run the recording again with speaker_recognition`,
            "enroll_window_closed"
          )
          if (job.audio_kept_until === null || new Date(job.audio_kept_until).getTime() <= Date.now()) return yield* closed
          // Computed now, for this call only (the job kept none): see actors/SpeakerEnrollment.ts.
          const prints = yield* (yield* SpeakerEnrollment).voiceprints(job.upload_key, job.options.numSpeakers).pipe(
            // Swept since the check above.
            Effect.mapError((e) => (e._tag === "BlobStoreError" && e.reason === "NotFound" ? closed : e))
          )
          const print = prints.find((p) => p.label === body.speakerLabel)
          if (print === undefined) return yield* notFound(`job ${job.id} has no voiceprint for ${body.speakerLabel}`, "speaker_label_not_found")
          const result = yield* saved.enroll(userId, job.id, body.name, print)
          if (result._tag === "NoSuchJob") return yield* notFound(`no recognition job ${body.jobId}`, "job_not_found")
          if (result._tag === "AlreadyEnrolled") return yield* already
          return Reply.json(201, { speaker: wire(result.speaker) })
        })
    },
    {
      method: "PATCH",
      path: `${base}/{id}`,
      auth: "key",
      operationId: "renameSpeaker",
      summary: "Rename a saved speaker",
      tags: ["speakers"],
      requestBody: { contentType: "application/json", schema: RenameSpeakerRequest, required: true },
      responses: {
        200: { description: "renamed", schema: SpeakerResponse },
        400: errorDoc("malformed body or a name over 200 characters"),
        401: errorDoc("no valid credential"),
        404: errorDoc("not the caller's saved speaker")
      },
      handler: (ctx) =>
        Effect.gen(function*() {
          const body = yield* decodeJsonBody(RenameSpeakerRequest, ctx, options.maxJsonBodyBytes)
          const renamed = yield* (yield* SavedSpeakers).rename(ctx.principal!.userId, ctx.params.id!, body.name)
          if (renamed === undefined) return yield* notFound(`no saved speaker ${ctx.params.id}`, "speaker_not_found")
          return Reply.json(200, { speaker: wire(renamed) })
        })
    },
    {
      method: "DELETE",
      path: `${base}/{id}`,
      auth: "key",
      operationId: "deleteSpeaker",
      summary: "Delete a saved speaker and its voiceprint (a hard delete)",
      tags: ["speakers"],
      responses: { 200: { description: "deleted", schema: SpeakerDeleted }, 401: errorDoc("no valid credential"), 404: errorDoc("not the caller's saved speaker") },
      handler: (ctx) =>
        Effect.gen(function*() {
          const removed = yield* (yield* SavedSpeakers).remove(ctx.principal!.userId, ctx.params.id!)
          if (!removed) return yield* notFound(`no saved speaker ${ctx.params.id}`, "speaker_not_found")
          return Reply.json(200, { ok: true })
        })
    }
  ]
}
