/**
 * The model list of `GET /models`: a bare array, as ElevenLabs answers, with the fields its SDKs
 * parse. The service has one TTS model, `svc_v1`; every `model_id` a client sends maps to it.
 */
import { Schema } from "effect"

export const ModelLanguage = Schema.Struct({
  language_id: Schema.String,
  name: Schema.String
}).annotate({ identifier: "ModelLanguage" })

export const Model = Schema.Struct({
  model_id: Schema.String,
  name: Schema.String,
  description: Schema.String,
  can_be_finetuned: Schema.Boolean,
  can_do_text_to_speech: Schema.Boolean,
  can_do_voice_conversion: Schema.Boolean,
  can_use_style: Schema.Boolean,
  can_use_speaker_boost: Schema.Boolean,
  serves_pro_voices: Schema.Boolean,
  requires_alpha_access: Schema.Boolean,
  token_cost_factor: Schema.Finite,
  max_characters_request_free_user: Schema.Int,
  max_characters_request_subscribed_user: Schema.Int,
  maximum_text_length_per_request: Schema.Int,
  languages: Schema.Array(ModelLanguage)
}).annotate({ identifier: "Model" })

export const ModelList = Schema.Array(Model).annotate({ identifier: "ModelList" })

export const ttsModelId = "svc_v1"
/** SPEC 8: text length limit of every TTS endpoint, characters. */
export const maxTextLength = 8000

export const makeModelList = (languages: ReadonlyArray<{ language_id: string; name: string }>): typeof ModelList.Type => [
  {
    model_id: ttsModelId,
    name: "Speech Service v1",
    description:
      "The service's single TTS model: espeak-ng for every language, Flite for English, Piper ONNX voices where installed.",
    can_be_finetuned: false,
    can_do_text_to_speech: true,
    can_do_voice_conversion: false,
    can_use_style: false,
    can_use_speaker_boost: false,
    serves_pro_voices: false,
    requires_alpha_access: false,
    token_cost_factor: 1,
    max_characters_request_free_user: maxTextLength,
    max_characters_request_subscribed_user: maxTextLength,
    maximum_text_length_per_request: maxTextLength,
    languages: [...languages]
  }
]
