/** Wire schemas of speech-to-text (SPEC 2.5), in ElevenLabs' shape. */
import { Schema } from "effect"

export const TranscriptWord = Schema.Struct({
  text: Schema.String,
  start: Schema.optional(Schema.Finite).annotate({ description: "seconds; absent with timestamps_granularity=none" }),
  end: Schema.optional(Schema.Finite),
  type: Schema.Literals(["word", "spacing", "audio_event"]),
  speaker_id: Schema.optional(Schema.String).annotate({ description: "speaker_0, speaker_1, ... when diarize=true" }),
  logprob: Schema.Finite.annotate({ description: "natural log of the word's posterior; 0 for spacing" })
}).annotate({ identifier: "TranscriptWord" })

export const AdditionalFormatFile = Schema.Struct({
  requested_format: Schema.String,
  file_extension: Schema.String,
  content_type: Schema.String,
  is_base64_encoded: Schema.Boolean,
  content: Schema.String
}).annotate({ identifier: "AdditionalFormatFile" })

export const SpeechToTextResponse = Schema.Struct({
  language_code: Schema.String.annotate({ description: "ISO 639-1 of the recognised language; und when nothing was recognised" }),
  language_probability: Schema.Finite.annotate({ description: "1 when a language was detected, 0 when unknown (a flag)" }),
  text: Schema.String,
  words: Schema.Array(TranscriptWord),
  additional_formats: Schema.optional(Schema.Array(AdditionalFormatFile)),
  transcription_id: Schema.String
}).annotate({ identifier: "SpeechToTextResponse" })

export const SpeechToTextRequest = Schema.Struct({
  file: Schema.optional(Schema.String).annotate({ description: "the audio or video file (binary part), at most 100 MB" }),
  cloud_storage_url: Schema.optional(Schema.String).annotate({ description: "https URL of the media instead of file" }),
  source_url: Schema.optional(Schema.String).annotate({ description: "alias of cloud_storage_url" }),
  model_id: Schema.String.annotate({ description: "required; any non-empty value, the service's own engine is used" }),
  language_code: Schema.optional(Schema.String),
  diarize: Schema.optional(Schema.String).annotate({ description: "true to label speakers" }),
  num_speakers: Schema.optional(Schema.String).annotate({ description: "expected number of speakers (hint for diarization)" }),
  timestamps_granularity: Schema.optional(Schema.String).annotate({ description: "word (default), none; character falls back to word" }),
  additional_formats: Schema.optional(Schema.String).annotate({
    description: "JSON list like [{\"format\":\"srt\"}]; srt, txt, segmented_json made; docx, html, pdf skipped"
  })
}).annotate({ identifier: "SpeechToTextRequest", description: "multipart/form-data fields; others of SPEC 2.5 are accepted and ignored" })
