/**
 * Embedded PGlite behind its unix socket (always embedded, whatever DATABASE_URL says):
 * many connections sharing one backend without mixing their requests, clients that vanish
 * mid-transaction, and who may own the directory (stale locks, a second server, tools).
 */
import { Effect, Exit, ManagedRuntime } from "effect"
import { SqlClient } from "effect/sql/SqlClient"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import * as readline from "node:readline"
import { fileURLToPath } from "node:url"
import t from "tap"
import { Database, databaseLayer, type DatabaseOptions } from "../../storage/Database.ts"
import { lockPathFor, socketPathFor } from "../../storage/PgliteOwnership.ts"
import { freshEmbeddedDataDir } from "../support/database.ts"

const root = fileURLToPath(new URL("../../", import.meta.url))

const open = (t: { teardown: (fn: () => unknown) => void }, options: Omit<DatabaseOptions, "databaseUrl">) => {
  const runtime = ManagedRuntime.make(databaseLayer({ databaseUrl: undefined, ...options }))
  t.teardown(() => runtime.dispose())
  return runtime
}

const query = <A>(text: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient
    return (yield* sql.unsafe(text)) as ReadonlyArray<A>
  })

/** A raw wire-protocol client: to do what no well-behaved driver does (hang up mid-request). */
const rawClient = async (socketPath: string) => {
  const socket = net.connect({ path: socketPath })
  await new Promise((resolve, reject) => socket.once("connect", resolve).once("error", reject))
  let received = Buffer.alloc(0)
  socket.on("data", (chunk) => (received = Buffer.concat([received, chunk])))
  /** Waits for ReadyForQuery and returns its transaction status byte (I, T or E). */
  const readyForQuery = async (): Promise<string> => {
    for (let waited = 0; waited < 5_000; waited += 10) {
      for (let offset = 0; offset + 5 <= received.length;) {
        const length = received.readInt32BE(offset + 1)
        if (received[offset] === 0x5a && offset + 1 + length <= received.length) {
          const status = String.fromCharCode(received[offset + 5]!)
          received = received.subarray(offset + 1 + length)
          return status
        }
        offset += 1 + length
      }
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    throw new Error("no ReadyForQuery")
  }
  const message = (type: string, body: Buffer) => {
    const head = Buffer.alloc(5)
    head.write(type, 0, "latin1")
    head.writeInt32BE(4 + body.length, 1)
    return Buffer.concat([head, body])
  }
  const params = Buffer.from("user\0postgres\0database\0postgres\0\0", "latin1")
  const startup = Buffer.alloc(8)
  startup.writeInt32BE(8 + params.length, 0)
  startup.writeInt32BE(196608, 4)
  socket.write(Buffer.concat([startup, params]))
  await readyForQuery()
  return {
    /** Simple query protocol; resolves with the transaction status after it. */
    simple: (text: string) => {
      socket.write(message("Q", Buffer.from(`${text}\0`, "utf8")))
      return readyForQuery()
    },
    /** An extended-protocol Parse with no Sync after it. */
    parseOnly: (text: string) => socket.write(message("P", Buffer.from(`\0${text}\0\0\0`, "utf8"))),
    hangUp: () => socket.destroy()
  }
}

t.test("many connections share the one backend without mixing requests", async (t) => {
  const dataDir = await freshEmbeddedDataDir()
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }))
  const runtime = open(t, { dataDir, maxConnections: 8, migrate: false })
  await runtime.runPromise(query("CREATE TABLE counter (id int PRIMARY KEY, v int NOT NULL)"))
  await runtime.runPromise(query("INSERT INTO counter VALUES (0, 0)"))

  const work = (i: number) =>
    Effect.gen(function*() {
      const sql = yield* SqlClient
      switch (i % 4) {
        case 0: {
          // A statement that fails: its error must reach this caller and nobody else.
          const exit = yield* Effect.exit(sql`INSERT INTO counter VALUES (0, 1)`)
          return Exit.isFailure(exit) ? "duplicate refused" : "WRONG"
        }
        case 1: {
          // Transactions, half of which roll back after their update.
          const exit = yield* Effect.exit(sql.withTransaction(Effect.gen(function*() {
            yield* sql`UPDATE counter SET v = v + 1 WHERE id = 0`
            if (i % 8 === 1) yield* sql`SELECT 1 / 0`
          })))
          return Exit.isSuccess(exit) ? "committed" : "rolled back"
        }
        case 2: {
          const rows = yield* sql<{ v: number }>`SELECT ${i}::int AS v`
          return rows[0]?.v === i ? "own row" : "WRONG"
        }
        default: {
          const rows = yield* sql<{ s: string; n: number }>`SELECT ${`text ${i}`} AS s, ${i}::int * 2 AS n`
          return rows[0]?.s === `text ${i}` && rows[0]?.n === i * 2 ? "own row" : "WRONG"
        }
      }
    })
  const outcomes = await runtime.runPromise(
    Effect.forEach(Array.from({ length: 400 }, (_, i) => i), work, { concurrency: "unbounded" })
  )
  const counts: Record<string, number> = {}
  for (const outcome of outcomes) counts[outcome] = (counts[outcome] ?? 0) + 1
  t.same(counts, { "duplicate refused": 100, "committed": 50, "rolled back": 50, "own row": 200 })
  t.same(await runtime.runPromise(query("SELECT v FROM counter")), [{ v: 50 }], "only committed updates count")
})

t.test("a client that hangs up mid-transaction or mid-request does not wedge the backend", async (t) => {
  const dataDir = await freshEmbeddedDataDir()
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }))
  const runtime = open(t, { dataDir, migrate: false })
  await runtime.runPromise(query("CREATE TABLE notes (body text)"))

  const quitter = await rawClient(socketPathFor(fs.realpathSync(dataDir)))
  t.equal(await quitter.simple("BEGIN; INSERT INTO notes VALUES ('uncommitted')"), "T", "raw client is inside a transaction")
  quitter.hangUp()
  t.same(await runtime.runPromise(query("SELECT count(*)::int AS n FROM notes")), [{ n: 0 }], "its transaction was rolled back")

  const broken = await rawClient(socketPathFor(fs.realpathSync(dataDir)))
  broken.parseOnly("SELEC 1") // an error, and no Sync to end it
  await new Promise((resolve) => setTimeout(resolve, 100))
  broken.hangUp()
  t.same(await runtime.runPromise(query("SELECT 1 AS one")), [{ one: 1 }], "the next request is answered")
})

t.test("ownership of the directory", async (t) => {
  const dataDir = await freshEmbeddedDataDir()
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }))
  const real = fs.realpathSync(dataDir)
  const lockPath = lockPathFor(real)
  const socketPath = socketPathFor(real)

  await t.test("a stale lock (dead pid) and a stale socket file are taken over", async (t) => {
    const dead = spawn(process.execPath, ["-e", ""])
    const deadPid = dead.pid!
    await new Promise((resolve) => dead.once("exit", resolve))
    fs.writeFileSync(lockPath, JSON.stringify({ pid: deadPid, role: "server", host: (await import("node:os")).hostname(), token: "old", startedAt: "then" }))
    fs.writeFileSync(socketPath, "not a socket")
    const runtime = ManagedRuntime.make(databaseLayer({ databaseUrl: undefined, dataDir }))
    const info = await runtime.runPromise(Effect.service(Database))
    t.match(info.description, /owned by this process/)
    t.equal(JSON.parse(fs.readFileSync(lockPath, "utf8")).pid, process.pid, "the lock is ours now")
    await runtime.dispose()
    t.notOk(fs.existsSync(lockPath), "closing removes the lock")
    t.notOk(fs.existsSync(socketPath), "closing removes the socket")
  })

  await t.test("a live process holding the lock without serving is reported, not ignored", async (t) => {
    fs.writeFileSync(lockPath, JSON.stringify({ pid: process.ppid, role: "server", host: (await import("node:os")).hostname(), token: "alive", startedAt: "now" }))
    t.teardown(() => fs.rmSync(lockPath, { force: true }))
    const runtime = ManagedRuntime.make(databaseLayer({ databaseUrl: undefined, dataDir, ownerWaitMs: 500 }))
    const exit = await runtime.runPromiseExit(Effect.void)
    await runtime.dispose()
    const error = Exit.isFailure(exit) ? exit.cause.reasons.find((r) => r._tag === "Fail") : undefined
    t.match((error as { error?: unknown } | undefined)?.error, { _tag: "DatabaseError", reason: "DirectoryLocked" })
    t.match(String((error as { error?: { message?: string } } | undefined)?.error?.message), lockPath, "the message names the lock file")
  })

  /** The stand-in server (or admin tool) in a child process, owning the directory. */
  const startOwner = async (t: { teardown: (fn: () => unknown) => void }, role: "server" | "tool") => {
    const owner = spawn(process.execPath, ["--import", "tsx", path.join(root, "test/storage/fixtures/hold-database.ts")], {
      cwd: root,
      env: { ...process.env, DATA_DIR: dataDir, DATABASE_URL: "", HOLD_ROLE: role },
      stdio: ["pipe", "pipe", "inherit"]
    })
    t.teardown(() => owner.kill())
    const lines = readline.createInterface({ input: owner.stdout! })[Symbol.asyncIterator]()
    const first = await lines.next()
    if (!/^ready \d+$/.test(String(first.value))) throw new Error(`owner did not start: ${first.value}`)
    const quit = async () => {
      owner.stdin!.write("quit\n")
      const closed = (await lines.next()).value
      await new Promise((resolve) => owner.once("exit", resolve))
      return closed as string
    }
    return { owner, quit }
  }

  await t.test("a server waits for an admin tool that owns the directory for a moment, then takes it", async (t) => {
    const { owner, quit } = await startOwner(t, "tool")
    const runtime = ManagedRuntime.make(databaseLayer({ databaseUrl: undefined, dataDir, embeddedRole: "server", ownerWaitMs: 20_000 }))
    t.teardown(() => runtime.dispose())
    let opened = false
    const opening = runtime.runPromise(Effect.service(Database)).then((info) => {
      opened = true
      return info
    })
    await new Promise((resolve) => setTimeout(resolve, 700))
    t.notOk(opened, "the server does not become the tool's guest")
    t.equal(JSON.parse(fs.readFileSync(lockPath, "utf8")).pid, owner.pid)
    t.equal(await quit(), "closed")
    t.match((await opening).description, /owned by this process/, "once the tool is done, the server owns it")
    t.equal(JSON.parse(fs.readFileSync(lockPath, "utf8")).pid, process.pid)
    await runtime.dispose()
  })

  await t.test("while another process serves it: tools connect through its socket, servers are refused", async (t) => {
    const { owner, quit } = await startOwner(t, "server")

    const tool = ManagedRuntime.make(databaseLayer({ databaseUrl: undefined, dataDir, embeddedRole: "tool" }))
    const info = await tool.runPromise(Effect.service(Database))
    t.match(info.description, new RegExp(`served by pid ${owner.pid}`))
    t.same(await tool.runPromise(query("SELECT count(*)::int AS n FROM users")), [{ n: 0 }], "the tool's queries run in the owner")
    await tool.dispose()

    const server = ManagedRuntime.make(databaseLayer({ databaseUrl: undefined, dataDir, embeddedRole: "server" }))
    const exit = await server.runPromiseExit(Effect.void)
    await server.dispose()
    const failure = Exit.isFailure(exit) ? exit.cause.reasons.find((r) => r._tag === "Fail") : undefined
    t.match((failure as { error?: unknown } | undefined)?.error, { _tag: "DatabaseError", reason: "DirectoryInUse" })
    t.equal(JSON.parse(fs.readFileSync(lockPath, "utf8")).pid, owner.pid, "the owner still holds the lock")

    t.equal(await quit(), "closed")
    t.notOk(fs.existsSync(lockPath), "the owner removed its lock on the way out")
  })
})

