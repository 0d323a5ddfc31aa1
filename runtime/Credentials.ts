/**
 * The one `Authenticate` of HTTP and WebSocket requests: an API key (`sk_svc_…`, every scope) or
 * an OAuth access token (`oat_…`, the scopes of its grant), each looked up where it lives. Access
 * tokens are looked up on every request, never cached, so a revoked grant or token stops at once.
 */
import { Effect } from "effect"
import type { Authenticate } from "../protocol/Authorization.ts"
import { AccountsError } from "../storage/AccountsError.ts"
import type { ApiKeys } from "../storage/ApiKeys.ts"
import { ACCESS_PREFIX, type OAuthStore } from "../storage/OAuthStore.ts"

export const credentialAuthenticator = (keys: ApiKeys["Service"], oauth: OAuthStore["Service"]): Authenticate => (credential) =>
  credential.startsWith(ACCESS_PREFIX)
    ? Effect.flatMap(oauth.accessToken(credential), (info) =>
      info === undefined
        ? Effect.fail(new AccountsError({ reason: "InvalidKey", message: "the access token is unknown, expired or revoked: refresh it or authorize again" }))
        : Effect.succeed({ userId: info.userId, keyId: null, scopes: info.scopes, clientId: info.clientId, grantId: info.grantId }))
    : keys.authenticate(credential)
