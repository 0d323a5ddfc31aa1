/**
 * Password hashing for the site's sign-in: argon2id (memory-hard) by `@node-rs/argon2`, with its
 * defaults (19 MiB, 2 passes, 1 lane: OWASP's minimum for argon2id), run on libuv's thread pool
 * so the event loop never waits for it. Hashes are PHC strings that carry their own parameters,
 * so stronger settings later still verify old hashes. Passwords are never logged or stored.
 */
import { hash, verify } from "@node-rs/argon2"
import { Effect } from "effect"

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

export const hashPassword = (password: string): Effect.Effect<string> => Effect.promise(() => hash(password))

/** False for a wrong password or an unreadable hash (never throws). */
export const verifyPassword = (phc: string, password: string): Effect.Effect<boolean> =>
  Effect.promise(() => verify(phc, password).catch(() => false))

// Verified against when the e-mail is unknown, so a sign-in takes as long either way and its
// timing does not tell which e-mails have accounts.
let decoy: Promise<string> | undefined
export const decoyHash = (): Effect.Effect<string> => Effect.promise(() => (decoy ??= hash("decoy password, never matches")))
