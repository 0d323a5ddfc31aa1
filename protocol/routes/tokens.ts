/**
 * `POST /v1/single-use-token/{token_type}` (ElevenLabs' `client.tokens.singleUse.create`): mints
 * a token a browser opens one WebSocket session with (`?token=`), so the page never holds the
 * key. Types `tts_websocket` (stream-input, multi-stream-input) and `realtime_scribe` (realtime
 * speech-to-text); anything else is 422, as the SDK expects of a bad path value. The minter needs
 * the scope its session will have (`tts` for both: storage/SingleUseTokens.ts TOKEN_SCOPE).
 */
import { Effect, Schema } from "effect"
import { isTokenType, type SingleUseTokens, SingleUseTokens as Tokens, TOKEN_TTL_S, TOKEN_TYPES } from "../../storage/SingleUseTokens.ts"
import { ApiError } from "../ApiError.ts"
import { Reply, type Route } from "../Http.ts"
import { ErrorBody } from "../schemas/ErrorBody.ts"

export const SingleUseTokenResponse = Schema.Struct({
  token: Schema.String.annotate({ description: `the token: pass it once as the token query parameter of the WebSocket it was minted for, within ${TOKEN_TTL_S / 60} minutes` })
}).annotate({ identifier: "SingleUseTokenResponseModel" })

export const tokenRoutes = (apiBase: string): ReadonlyArray<Route<SingleUseTokens>> => [
  {
    method: "POST",
    path: `${apiBase}/single-use-token/{token_type}`,
    auth: "key",
    scope: "tts",
    operationId: "createSingleUseToken",
    summary: `A token for one WebSocket session (token_type: ${TOKEN_TYPES.join(" or ")}), usable once within ${TOKEN_TTL_S / 60} minutes, spending the caller's credits`,
    tags: ["tokens"],
    responses: {
      200: { description: "the token", schema: SingleUseTokenResponse },
      422: { description: "unknown token_type", schema: ErrorBody }
    },
    handler: (ctx) =>
      Effect.gen(function*() {
        const type = ctx.params.token_type ?? ""
        if (!isTokenType(type)) {
          return yield* new ApiError({
            status: 422,
            code: "invalid_token_type",
            message: `token_type must be one of ${TOKEN_TYPES.join(", ")}`
          })
        }
        const minted = yield* (yield* Tokens).mint(ctx.principal!, type)
        return Reply.json(200, { token: minted.token } satisfies typeof SingleUseTokenResponse.Type)
      })
  }
]
