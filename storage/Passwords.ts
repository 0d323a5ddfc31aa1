/**
 * Password hashing for the site's sign-in: argon2id (memory-hard) by `@node-rs/argon2`, 19 MiB,
 * 2 passes, 1 lane (OWASP's minimum for argon2id), run on libuv's thread pool so the event loop
 * never waits for it. Hashes are PHC strings that carry their own parameters, so stronger
 * settings later still verify old hashes (and `needsRehash` says which to replace). Passwords
 * are never logged or stored.
 *
 * Hazard: an unknown e-mail is verified against the decoy hash, so the decoy must cost what a
 * user's hash costs: the same parameters (`ARGON2`, written out rather than the library's
 * defaults, which could change under us), and made before the first sign-in (`prepareDecoy` at
 * start-up), not by it: a lazily made decoy made that first unknown e-mail pay a hash and a verify.
 */
import { hash, verify } from "@node-rs/argon2"
import { Effect } from "effect"
import { randomBytes } from "node:crypto"

/** argon2id (algorithm 2), 19 MiB (memoryCost is KiB), 2 passes, 1 lane, 32-byte output. */
export const ARGON2 = { algorithm: 2, memoryCost: 19_456, timeCost: 2, parallelism: 1, outputLen: 32 } as const

/** Shortest password accepted, characters (NIST SP 800-63B: at least 8). */
export const MIN_PASSWORD_CHARACTERS = 10
/** Longest, characters: bounds the hashing work one request can ask for. */
export const MAX_PASSWORD_CHARACTERS = 256

/** Why a new password is refused; undefined when it is acceptable. */
export const passwordProblem = (password: string): string | undefined => {
  const n = [...password].length
  if (n < MIN_PASSWORD_CHARACTERS) return `a password needs at least ${MIN_PASSWORD_CHARACTERS} characters`
  if (n > MAX_PASSWORD_CHARACTERS) return `a password has at most ${MAX_PASSWORD_CHARACTERS} characters`
  return undefined
}

export const hashPassword = (password: string): Effect.Effect<string> => Effect.promise(() => hash(password, ARGON2))

/** False for a wrong password or an unreadable hash (never throws). */
export const verifyPassword = (phc: string, password: string): Effect.Effect<boolean> =>
  Effect.promise(() => verify(phc, password).catch(() => false))

/** Whether `phc` was made with other parameters than `ARGON2` (an old hash, to replace on sign-in). */
export const needsRehash = (phc: string): boolean => {
  const m = /^\$argon2id\$v=19\$m=(\d+),t=(\d+),p=(\d+)\$[^$]+\$([^$]+)$/u.exec(phc)
  if (m === null) return true
  // The digest is unpadded base64: 4 characters per 3 bytes.
  const digestBytes = Math.floor((m[4]!.length * 3) / 4)
  return Number(m[1]) !== ARGON2.memoryCost || Number(m[2]) !== ARGON2.timeCost || Number(m[3]) !== ARGON2.parallelism || digestBytes !== ARGON2.outputLen
}

// Verified against when the e-mail is unknown (or its account has no password), so a sign-in
// does the same argon2 work either way and its timing does not tell which e-mails have accounts.
// The password is random: nothing typed can match it.
let decoy: Promise<string> | undefined

/** Makes the decoy hash now (once per process); call at start-up, before sign-ins arrive. */
export const prepareDecoy = (): Promise<string> => (decoy ??= hash(randomBytes(32).toString("base64url"), ARGON2))

/** Whether the decoy is made already (for the test that start-up made it). */
export const decoyPrepared = (): boolean => decoy !== undefined

/** The decoy; a sign-in in the first ~50 ms of the process waits for it to finish. */
export const decoyHash = (): Effect.Effect<string> => Effect.promise(prepareDecoy)
