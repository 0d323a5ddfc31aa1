/** Wire schemas of saved speakers (SPEC 2.7, endpoints 12-15). */
import { Schema } from "effect"

/**
 * 1 to 200 characters, at least one of them not white space: a name of only spaces (or tabs,
 * line breaks, no-break or ideographic spaces: JavaScript's `\s`, what `trim` removes) names
 * nobody and would show as an empty label in results.
 */
const Name = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(200), Schema.isPattern(/\S/)).annotate({
  description: "1 to 200 characters, not all white space"
})

export const EnrollSpeakerRequest = Schema.Struct({
  jobId: Schema.String.annotate({ description: "a succeeded job of the caller's, run with diarize and speaker_recognition" }),
  speakerLabel: Schema.String.check(Schema.isPattern(/^SPEAKER_\d{2}$/)).annotate({ description: "the raw diarization label, SPEAKER_<nn>" }),
  name: Name
}).annotate({ identifier: "EnrollSpeakerRequest" })

export const RenameSpeakerRequest = Schema.Struct({ name: Name }).annotate({ identifier: "RenameSpeakerRequest" })

export const SpeakerProfile = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  created_at: Schema.String,
  source_job_id: Schema.String,
  speech_seconds: Schema.Number.annotate({ description: "seconds of speech the voiceprint came from" })
}).annotate({ identifier: "SpeakerProfile" })

export const SpeakerResponse = Schema.Struct({ speaker: SpeakerProfile }).annotate({ identifier: "SpeakerResponse" })
export const SpeakerList = Schema.Struct({ speakers: Schema.Array(SpeakerProfile) }).annotate({ identifier: "SpeakerList" })
export const SpeakerDeleted = Schema.Struct({ ok: Schema.Literal(true) }).annotate({ identifier: "SpeakerDeleted" })
