/**
 * ID tokens (OpenID Connect Core 2) signed with `jose`: ES256 keys kept in the database
 * (storage/OAuthStore.ts), made on first use, published at the JWKS endpoint. A new key can be
 * rotated in with `rotateSigningKey`; older keys stay in the JWKS so tokens they signed still verify.
 */
import { Effect } from "effect"
import { exportJWK, generateKeyPair, importJWK, SignJWT } from "jose"
import { randomBytes } from "node:crypto"
import { OAuthStore } from "../../storage/OAuthStore.ts"

const ALG = "ES256"
/** ID tokens live as long as an access token. */
const ID_TOKEN_TTL_S = 3600

export const rotateSigningKey = Effect.gen(function*() {
  const { privateKey, publicKey } = yield* Effect.promise(() => generateKeyPair(ALG, { extractable: true }))
  const kid = randomBytes(8).toString("hex")
  const privateJwk = { ...(yield* Effect.promise(() => exportJWK(privateKey))), kid, alg: ALG, use: "sig" }
  const publicJwk = { ...(yield* Effect.promise(() => exportJWK(publicKey))), kid, alg: ALG, use: "sig" }
  yield* (yield* OAuthStore).saveSigningKey(kid, privateJwk, publicJwk)
})

/** The public keys for verifiers (the JWKS document's `keys`). */
export const publishedKeys = Effect.gen(function*() {
  const store = yield* OAuthStore
  let keys = yield* store.signingKeys
  if (keys.current.kid === "") {
    yield* rotateSigningKey
    keys = yield* store.signingKeys
  }
  return keys.published
})

export interface IdTokenClaims {
  readonly issuer: string
  readonly subject: string
  readonly audience: string
  readonly nonce: string | undefined
  readonly extra: Record<string, unknown>
}

export const signIdToken = (claims: IdTokenClaims) =>
  Effect.gen(function*() {
    yield* publishedKeys
    const { current } = yield* (yield* OAuthStore).signingKeys
    const key = yield* Effect.promise(() => importJWK(current.privateJwk, ALG))
    return yield* Effect.promise(() =>
      new SignJWT({ ...claims.extra, ...(claims.nonce !== undefined ? { nonce: claims.nonce } : {}) })
        .setProtectedHeader({ alg: ALG, kid: current.kid, typ: "JWT" })
        .setIssuer(claims.issuer)
        .setSubject(claims.subject)
        .setAudience(claims.audience)
        .setIssuedAt()
        .setExpirationTime(`${ID_TOKEN_TTL_S}s`)
        .sign(key)
    )
  })
