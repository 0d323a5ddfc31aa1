/**
 * API key format, hashing and record ids.
 *
 * A key is `sk_svc_` followed by 32 random bytes in base64url (43 characters, no padding). Only
 * its sha256 is stored; the key is shown once, when minted. `key_prefix` keeps the first
 * characters so that a list of keys can show which is which without revealing them.
 */
import { createHash, randomBytes } from "node:crypto"

export const apiKeyPrefix = "sk_svc_"

/** Random part, bytes. 256 bits: guessing is hopeless, so a plain hash (no salt, no KDF) is enough. */
const keyBytes = 32

const wellFormed = /^sk_svc_[A-Za-z0-9_-]{43}$/

/** Characters of the key kept for display: the prefix and 4 of the random part. */
const displayLength = apiKeyPrefix.length + 4

export const generateApiKey = (): string => apiKeyPrefix + randomBytes(keyBytes).toString("base64url")

/** Cheap shape check done before any lookup, so garbage never costs a query. */
export const isWellFormedApiKey = (candidate: string): boolean => wellFormed.test(candidate)

/** sha256 of the full key, 32 bytes: the value stored in `api_keys.key_hash`. */
export const hashApiKey = (apiKey: string): Buffer => createHash("sha256").update(apiKey, "utf8").digest()

export const displayPrefix = (apiKey: string): string => apiKey.slice(0, displayLength)

/** `usr_…` / `key_…` followed by 80 random bits in hex. */
export const randomId = (kind: "usr" | "key"): string => `${kind}_${randomBytes(10).toString("hex")}`
