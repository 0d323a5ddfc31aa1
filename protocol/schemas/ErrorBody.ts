/** SPEC 2.1: the body of every JSON error. */
import { Schema } from "effect"

export const ErrorBody = Schema.Struct({
  detail: Schema.Struct({
    status: Schema.String.annotate({ description: "machine-readable short code, e.g. invalid_api_key, text_too_long" }),
    message: Schema.String.annotate({ description: "human-readable message" })
  })
}).annotate({ identifier: "ErrorBody", description: "Error body of every JSON error (SPEC 2.1)" })
