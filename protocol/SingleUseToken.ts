/**
 * A single-use token on a WebSocket upgrade (storage/SingleUseTokens.ts): where clients put it,
 * and the one 401 every socket endpoint answers for a token it cannot use. ElevenLabs' realtime
 * client (the SDK's wrapper/realtime/scribe.js, `@elevenlabs/client`) sends `?token=`; the
 * name `single_use_token` (ElevenLabs' spelling in its dialogue WebSocket's messages) is taken
 * too. The realtime speech-to-text endpoint calls `socketTokenConsumer(tokens)` with "realtime_scribe".
 */
import { Effect } from "effect"
import type { Principal } from "../storage/ApiKeys.ts"
import type { SingleUseTokens, TokenType } from "../storage/SingleUseTokens.ts"
import { unauthorized } from "./ApiError.ts"

/** The token of an upgrade's query, if one is there. */
export const presentedSocketToken = (query: URLSearchParams): string | undefined => {
  for (const name of ["token", "single_use_token"]) {
    const v = query.get(name)?.trim()
    if (v !== undefined && v !== "") return v
  }
  return undefined
}

/** Uses a token up for a session of a type: its principal, or the 401 (an ApiError). */
export type ConsumeSocketToken = (token: string, type: TokenType) => Effect.Effect<Principal, unknown>

/**
 * `consume` of the tokens, refusing with 401 `invalid_token`. One message for every reason
 * (unknown, used, expired, other type, minter revoked): the caller's remedy is the same (mint a
 * new one), and a prober learns nothing about which tokens exist.
 */
export const socketTokenConsumer = (tokens: SingleUseTokens["Service"]): ConsumeSocketToken => (token, type) =>
  Effect.flatMap(tokens.consume(token, type), (principal) =>
    principal === undefined
      ? Effect.fail(unauthorized(
        `the single-use token is unknown, expired, already used, revoked with its key, or not for ${type}: mint a new one with POST /v1/single-use-token/${type}`,
        "invalid_token"
      ))
      : Effect.succeed(principal))
