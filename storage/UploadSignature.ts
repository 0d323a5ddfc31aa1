/**
 * Presigned upload addresses of the embedded blob store: the service itself accepts the PUT, so
 * the address carries its own authority. `sig` is HMAC-SHA256, keyed by a secret every instance
 * shares (storage/ServiceSecrets.ts), over the method, the blob key, the expiry (unix seconds)
 * and the size bound; changing any of them, or using the address after `expires`, is refused.
 * Compared in constant time.
 */
import { createHmac, timingSafeEqual } from "node:crypto"

export interface UploadGrant {
  readonly key: string
  /** Unix seconds. */
  readonly expires: number
  readonly maxBytes: number
}

export const signUpload = (secret: string, grant: UploadGrant): string =>
  createHmac("sha256", secret).update(`PUT\n${grant.key}\n${grant.expires}\n${grant.maxBytes}`).digest("hex")

/** The query string of a presigned address (`expires`, `max`, `sig`). */
export const uploadQuery = (secret: string, grant: UploadGrant): string =>
  `expires=${grant.expires}&max=${grant.maxBytes}&sig=${signUpload(secret, grant)}`

export type UploadCheck =
  | { readonly ok: true; readonly grant: UploadGrant }
  | { readonly ok: false; readonly reason: "expired" | "tampered" }

/** Checks the query of a PUT to `key` at `nowMs`. */
export const verifyUpload = (secret: string, key: string, query: URLSearchParams, nowMs: number): UploadCheck => {
  const expires = Number(query.get("expires"))
  const maxBytes = Number(query.get("max"))
  const sig = query.get("sig") ?? ""
  if (!Number.isSafeInteger(expires) || !Number.isSafeInteger(maxBytes) || maxBytes < 0 || !/^[0-9a-f]{64}$/.test(sig)) {
    return { ok: false, reason: "tampered" }
  }
  const grant = { key, expires, maxBytes }
  const expected = Buffer.from(signUpload(secret, grant), "hex")
  if (!timingSafeEqual(expected, Buffer.from(sig, "hex"))) return { ok: false, reason: "tampered" }
  if (nowMs > expires * 1000) return { ok: false, reason: "expired" }
  return { ok: true, grant }
}
