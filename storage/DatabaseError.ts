/**
 * Failures of opening the database itself (as opposed to `SqlError`, a failed statement).
 *
 * They happen at start-up, so they carry an operator-facing message that says what to do.
 */
import { Data } from "effect"

export class DatabaseError extends Data.TaggedError("DatabaseError")<{
  readonly reason:
    /** Another server process already serves this DATA_DIR from its embedded database. */
    | "DirectoryInUse"
    /** The embedded database's lock is held by a process that never answered on its socket. */
    | "DirectoryLocked"
    /** PGlite or its socket could not be started. */
    | "StartFailed"
  readonly message: string
  readonly cause?: unknown
}> {}
