/**
 * The `Vendor-Signature` header of webhook deliveries (SPEC 5), in the Stripe / ElevenLabs form
 * `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`, keyed by the subscription's whole
 * signing secret string (`whsec_…`, as shown once when the subscription was made).
 *
 * The timestamp is inside the signed text, so a captured delivery cannot be replayed later than
 * the receiver's tolerance; `verifySignature` is what a receiver does (the README spells the
 * same steps out for receivers in other languages).
 */
import { createHmac, timingSafeEqual } from "node:crypto"

/** Clock difference a receiver accepts between `t` and its own clock, s. */
export const SIGNATURE_TOLERANCE_S = 300

const hmacHex = (secret: string, timestamp: number, body: string): string =>
  createHmac("sha256", secret).update(`${timestamp}.${body}`, "utf8").digest("hex")

export const signatureHeader = (secret: string, body: string, nowSeconds: number): string => {
  const t = Math.floor(nowSeconds)
  return `t=${t},v1=${hmacHex(secret, t, body)}`
}

export type Verification = { readonly ok: true } | { readonly ok: false; readonly reason: "malformed" | "stale" | "mismatch" }

/**
 * Checks a header against the raw body as received (not a re-serialised parse of it). Several
 * `v1` values are allowed (a secret being rotated); one must match.
 */
export const verifySignature = (
  secret: string,
  rawBody: string,
  header: string | undefined,
  nowSeconds: number,
  toleranceS: number = SIGNATURE_TOLERANCE_S
): Verification => {
  if (header === undefined) return { ok: false, reason: "malformed" }
  let t: number | undefined
  const signatures: Array<string> = []
  for (const part of header.split(",")) {
    const [key, value] = part.trim().split("=", 2)
    if (key === "t" && value !== undefined && /^\d{1,12}$/.test(value)) t = Number(value)
    else if (key === "v1" && value !== undefined && /^[0-9a-f]{64}$/.test(value)) signatures.push(value)
  }
  if (t === undefined || signatures.length === 0) return { ok: false, reason: "malformed" }
  if (Math.abs(nowSeconds - t) > toleranceS) return { ok: false, reason: "stale" }
  const expected = Buffer.from(hmacHex(secret, t, rawBody), "hex")
  const match = signatures.some((s) => timingSafeEqual(Buffer.from(s, "hex"), expected))
  return match ? { ok: true } : { ok: false, reason: "mismatch" }
}
