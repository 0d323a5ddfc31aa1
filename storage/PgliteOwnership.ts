/**
 * Who may open the embedded PGlite directory.
 *
 * PGlite is a single process's database: two processes opening the same directory corrupt it.
 * One process owns it (a lock file `pglite.lock` holding its pid) and serves it on a unix socket;
 * every other process (the admin CLI while the server runs) connects through that socket.
 *
 * A lock is stale when its pid is dead on this host (or is our own pid without our own token,
 * as after a container restart where the new process got the same pid). Breaking a stale lock
 * goes through a second file, `pglite.lock.break`, so that two processes finding the same stale
 * lock cannot both break it and both become owners.
 */
import { createHash, randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { DatabaseError } from "./DatabaseError.ts"
import { processAlive } from "./ProcessAlive.ts"

export type EmbeddedRole = "server" | "tool"

export interface LockInfo {
  readonly pid: number
  readonly role: EmbeddedRole
  readonly host: string
  readonly token: string
  readonly startedAt: string
}

export type Claim =
  | { readonly kind: "owner"; readonly lock: LockInfo }
  | { readonly kind: "guest"; readonly holder: LockInfo | undefined }

/** Tokens of the locks this process holds, so a lock with our pid but another token is stale. */
const heldHere = new Set<string>()

/** Linux allows 107 bytes in a unix socket path; stay under it with some margin. */
const maxSocketPath = 100

/** Where the owner listens: inside the directory, or under the temp dir when that path is too long. */
export const socketPathFor = (dataDir: string): string => {
  const inside = path.join(dataDir, "pglite.sock")
  if (Buffer.byteLength(inside) <= maxSocketPath) return inside
  const digest = createHash("sha256").update(path.resolve(dataDir)).digest("hex").slice(0, 24)
  return path.join(os.tmpdir(), `speech-pglite-${digest}.sock`)
}

export const lockPathFor = (dataDir: string): string => path.join(dataDir, "pglite.lock")

/** True when something accepts a connection on the socket within `timeoutMs`. */
export const probeSocket = (socketPath: string, timeoutMs = 1000): Promise<boolean> =>
  new Promise((resolve) => {
    const socket = net.connect({ path: socketPath })
    const done = (answered: boolean) => {
      clearTimeout(timer)
      socket.destroy()
      resolve(answered)
    }
    const timer = setTimeout(() => done(false), timeoutMs)
    socket.once("connect", () => done(true))
    socket.once("error", () => done(false))
  })

export const readLock = (lockPath: string): LockInfo | undefined => {
  try {
    const parsed = JSON.parse(fs.readFileSync(lockPath, "utf8")) as LockInfo
    return typeof parsed.pid === "number" && typeof parsed.token === "string" ? parsed : undefined
  } catch {
    return undefined
  }
}

const isStale = (lock: LockInfo): boolean => {
  // A lock written on another host (shared volume) cannot be checked from here.
  if (lock.host !== os.hostname()) return false
  if (lock.pid === process.pid) return !heldHere.has(lock.token)
  return !processAlive(lock.pid)
}

/** Creates the lock with its content in one step (link is atomic and fails if it exists). */
const tryCreateLock = (lockPath: string, lock: LockInfo): boolean => {
  const temporary = `${lockPath}.${process.pid}.${lock.token}`
  fs.writeFileSync(temporary, JSON.stringify(lock))
  try {
    fs.linkSync(temporary, lockPath)
    return true
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === "EEXIST") return false
    if (code !== "EPERM" && code !== "ENOTSUP" && code !== "EOPNOTSUPP") throw error
    // File systems without hard links: exclusive create, content a moment later.
    try {
      fs.writeFileSync(lockPath, JSON.stringify(lock), { flag: "wx" })
      return true
    } catch (inner) {
      if ((inner as NodeJS.ErrnoException).code === "EEXIST") return false
      throw inner
    }
  } finally {
    fs.rmSync(temporary, { force: true })
  }
}

/** A breaker left behind by a process that crashed while breaking, ms. */
const breakerStaleMs = 10_000
/** An unreadable lock (crash between create and write on link-less file systems), ms. */
const unreadableStaleMs = 10_000

const breakStaleLock = (lockPath: string, staleToken: string | undefined): void => {
  const breaker = `${lockPath}.break`
  try {
    fs.writeFileSync(breaker, String(process.pid), { flag: "wx" })
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error
    const age = Date.now() - (fs.statSync(breaker, { throwIfNoEntry: false })?.mtimeMs ?? Date.now())
    if (age > breakerStaleMs) fs.rmSync(breaker, { force: true })
    return
  }
  try {
    // Only remove the lock we judged stale, never one a faster process created meanwhile.
    if (readLock(lockPath)?.token === staleToken) fs.rmSync(lockPath, { force: true })
  } finally {
    fs.rmSync(breaker, { force: true })
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Becomes the owner of `dataDir`, or finds the owner that answers on its socket.
 *
 * A "server" never becomes the guest of an admin tool that happens to own the directory for a
 * moment (its connections would die when the tool exits): it waits for the tool to finish. It
 * refuses to share with another server. A "tool" connects to whatever owner answers.
 */
export const claim = async (options: {
  readonly dataDir: string
  readonly role: EmbeddedRole
  /** How long to wait for an owner that is starting (PGlite takes seconds) or finishing, ms. */
  readonly waitMs: number
}): Promise<Claim> => {
  const { dataDir, role } = options
  const lockPath = lockPathFor(dataDir)
  const socketPath = socketPathFor(dataDir)
  const deadline = Date.now() + options.waitMs
  const mine: LockInfo = {
    pid: process.pid,
    role,
    host: os.hostname(),
    token: randomBytes(12).toString("hex"),
    startedAt: new Date().toISOString()
  }
  let unreadableSince: number | undefined
  for (;;) {
    const holder = readLock(lockPath)
    const answers = await probeSocket(socketPath)
    if (answers) {
      const sameProcess = holder?.pid === process.pid && heldHere.has(holder.token)
      if (role === "tool" || sameProcess || holder === undefined || holder.role === "server") {
        if (role === "server" && holder?.role === "server" && !sameProcess) {
          throw new DatabaseError({
            reason: "DirectoryInUse",
            message: `another server (pid ${holder.pid} on ${holder.host}) already uses the embedded database in ${dataDir}; ` +
              "give each server its own DATA_DIR, or set DATABASE_URL to share one PostgreSQL"
          })
        }
        return { kind: "guest", holder }
      }
      // A server waiting for an admin tool that owns the directory for a moment.
    } else if (tryCreateLock(lockPath, mine)) {
      heldHere.add(mine.token)
      return { kind: "owner", lock: mine }
    } else if (holder === undefined) {
      unreadableSince ??= Date.now()
      if (Date.now() - unreadableSince > unreadableStaleMs) breakStaleLock(lockPath, undefined)
    } else if (isStale(holder)) {
      breakStaleLock(lockPath, holder.token)
      continue
    }
    if (holder !== undefined) unreadableSince = undefined
    if (Date.now() > deadline) {
      throw new DatabaseError({
        reason: "DirectoryLocked",
        message: holder === undefined
          ? `the embedded database in ${dataDir} is locked (${lockPath}) but nobody answers on ${socketPath}`
          : answers
          ? `the embedded database in ${dataDir} is still held by ${holder.role} pid ${holder.pid} after ${options.waitMs} ms`
          : `the embedded database in ${dataDir} is locked by ${holder.role} pid ${holder.pid} on ${holder.host} ` +
            `(since ${holder.startedAt}), which does not answer on ${socketPath} after ${options.waitMs} ms; ` +
            `if no such process runs, delete ${lockPath}`
      })
    }
    await sleep(100)
  }
}

/** Gives the directory up: removes our lock (never someone else's) and the socket file. */
export const release = (dataDir: string, lock: LockInfo): void => {
  heldHere.delete(lock.token)
  fs.rmSync(socketPathFor(dataDir), { force: true })
  const lockPath = lockPathFor(dataDir)
  if (readLock(lockPath)?.token === lock.token) fs.rmSync(lockPath, { force: true })
}
