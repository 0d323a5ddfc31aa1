/** Wire schemas of the text-to-speech and voice endpoints (SPEC 2.2, 2.4). */
import { Schema } from "effect"

const unit = Schema.Finite.check(Schema.isBetween({ minimum: 0, maximum: 1 }))

export const VoiceSettings = Schema.Struct({
  speed: Schema.optional(Schema.NullOr(Schema.Finite.check(Schema.isBetween({ minimum: 0.5, maximum: 2 })))).annotate({
    description: "0.5 to 2; the only setting applied"
  }),
  stability: Schema.optional(Schema.NullOr(unit)),
  similarity_boost: Schema.optional(Schema.NullOr(unit)),
  style: Schema.optional(Schema.NullOr(unit)),
  use_speaker_boost: Schema.optional(Schema.NullOr(Schema.Boolean))
}).annotate({ identifier: "VoiceSettings", description: "Only speed is applied; the others are accepted and ignored" })

export const TextToSpeechRequest = Schema.Struct({
  text: Schema.String.annotate({ description: "1 to 8000 characters; longer gives 400 text_too_long" }),
  model_id: Schema.optional(Schema.NullOr(Schema.String)).annotate({ description: "any value is treated as svc_v1" }),
  voice_settings: Schema.optional(Schema.NullOr(VoiceSettings)),
  previous_text: Schema.optional(Schema.NullOr(Schema.String)).annotate({ description: "accepted and ignored" }),
  next_text: Schema.optional(Schema.NullOr(Schema.String)).annotate({ description: "accepted and ignored" }),
  seed: Schema.optional(Schema.NullOr(Schema.Int)).annotate({
    description: "accepted and ignored: output is deterministic per voice, text and speed"
  }),
  language_code: Schema.optional(Schema.NullOr(Schema.String)).annotate({
    description: "language to speak: ISO 639-1 code or English name (\"en\", \"English\"); the voice keeps its timbre. Default: the voice's own language. ?language= wins over this; this wins over X-Speak-Language. Unknown: 400"
  }),
  sentence_chunking: Schema.optional(Schema.NullOr(Schema.Boolean)).annotate({
    description: "streaming endpoints only; default true"
  })
}).annotate({ identifier: "TextToSpeechRequest" })

export const TtsQuery = Schema.Struct({
  output_format: Schema.optional(Schema.String).annotate({
    description: "wav (24 kHz), wav_<rate>, pcm_<rate>, ulaw_8000; rate in 8000, 16000, 22050, 24000, 32000, 44100, 48000. MP3 and Opus give 415"
  }),
  language: Schema.optional(Schema.String).annotate({
    description: "language to speak (ISO 639-1 code or English name); wins over the body's language_code and the X-Speak-Language header"
  }),
  language_code: Schema.optional(Schema.String).annotate({ description: "ElevenLabs' spelling of language (language wins when both are given)" }),
  optimize_streaming_latency: Schema.optional(Schema.String).annotate({ description: "accepted and ignored" }),
  enable_logging: Schema.optional(Schema.String).annotate({ description: "accepted and ignored" })
}).annotate({ identifier: "TtsQuery" })

export const Voice = Schema.Struct({
  voice_id: Schema.String,
  name: Schema.String,
  category: Schema.Literals(["premade", "cloned"]),
  description: Schema.NullOr(Schema.String),
  preview_url: Schema.NullOr(Schema.String),
  labels: Schema.Record(Schema.String, Schema.String)
}).annotate({ identifier: "Voice" })

export const VoicesList = Schema.Struct({ voices: Schema.Array(Voice) }).annotate({ identifier: "VoicesList" })

/** `GET /v2/voices` (protocol/VoiceSearch.ts). */
export const VoicesPage = Schema.Struct({
  voices: Schema.Array(Voice),
  has_more: Schema.Boolean,
  total_count: Schema.Finite,
  next_page_token: Schema.NullOr(Schema.String)
}).annotate({ identifier: "VoicesPage" })

export const Alignment = Schema.Struct({
  characters: Schema.Array(Schema.String),
  character_start_times_seconds: Schema.Array(Schema.Finite),
  character_end_times_seconds: Schema.Array(Schema.Finite)
}).annotate({ identifier: "CharacterAlignment" })

export const AudioWithTimestamps = Schema.Struct({
  audio_base64: Schema.String,
  alignment: Schema.NullOr(Alignment),
  normalized_alignment: Schema.NullOr(Alignment)
}).annotate({ identifier: "AudioWithTimestamps" })
