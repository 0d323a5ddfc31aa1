/**
 * The admin CLI as operators and scripts use it: a child process with its own environment, on
 * the database mode the environment selects, alone or next to a running owner process.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import * as readline from "node:readline"
import { fileURLToPath } from "node:url"
import t from "tap"
import { lockPathFor } from "../../storage/PgliteOwnership.ts"
import { freshEmbeddedDataDir, isolatedDatabaseUrl, testDatabaseMode } from "../support/database.ts"

const root = fileURLToPath(new URL("../../", import.meta.url))
const adminScript = path.join(root, "runtime/admin.ts")
const ownerScript = path.join(root, "test/storage/fixtures/hold-database.ts")

interface Settings {
  readonly DATA_DIR: string
  readonly DATABASE_URL?: string
}

/** The child's environment: ours, minus database settings, plus the test's. */
const envFor = (settings: Settings): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = { ...process.env, ...settings }
  if (settings.DATABASE_URL === undefined) delete env.DATABASE_URL
  delete env.INITIAL_CREDITS
  return env
}

/** Runs the CLI; `input` is written to its stdin (a pipe, not a terminal), which is then closed. */
const cliWith = (settings: Settings, args: ReadonlyArray<string>, input = "") =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", adminScript, ...args], { cwd: root, env: envFor(settings) })
    child.stdin.end(input)
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk) => (stdout += chunk))
    child.stderr.on("data", (chunk) => (stderr += chunk))
    child.once("error", reject)
    child.once("close", (code) => resolve({ code, stdout, stderr }))
  })
const cli = (settings: Settings, ...args: Array<string>) => cliWith(settings, args)

/** Settings for a fresh database of the selected mode, removed after the test. */
const freshSettings = async (t: { teardown: (fn: () => unknown) => void }): Promise<Settings> => {
  const dataDir = await freshEmbeddedDataDir()
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }))
  if (testDatabaseMode() === "embedded") return { DATA_DIR: dataDir }
  return { DATA_DIR: dataDir, DATABASE_URL: await isolatedDatabaseUrl(t, process.env.DATABASE_URL!) }
}

const noStackTrace = /\n\s+at /

// Each of these has a database of its own: they run side by side. The owner-process test below
// runs alone, so its wait for a deleted key is not measured under their load.
t.test("commands on databases of their own", { jobs: 4 }, (t) => {
  t.test("create-user --json prints exactly one line {user_id, api_key}", async (t) => {
    const settings = await freshSettings(t)
    const result = await cli(settings, "create-user", "--name", "load test", "--json")
    t.equal(result.code, 0, result.stderr)
    const lines = result.stdout.split("\n")
    t.equal(lines.length, 2, "one line, newline-terminated")
    t.equal(lines[1], "")
    const parsed = JSON.parse(lines[0]!)
    t.same(Object.keys(parsed), ["user_id", "api_key"])
    t.match(parsed.user_id, /^usr_[0-9a-f]{20}$/)
    t.match(parsed.api_key, /^sk_svc_[A-Za-z0-9_-]{43}$/)

    await t.test("the other commands, as text and as JSON", async (t) => {
      const users = await cli(settings, "list-users", "--json")
      t.equal(users.code, 0, users.stderr)
      t.match(JSON.parse(users.stdout), [{ user_id: parsed.user_id, name: "load test", credits: 10000, keys: 1 }], "INITIAL_CREDITS default")

      const granted = await cli(settings, "grant", "--user", parsed.user_id, "--credits", "5")
      t.equal(granted.code, 0, granted.stderr)
      t.equal(granted.stdout, `user ${parsed.user_id} now has 10005 credits\n`)

      const ledger = await cli(settings, "ledger", "--user", parsed.user_id, "--json")
      t.equal(ledger.code, 0, ledger.stderr)
      t.match(JSON.parse(ledger.stdout), [
        { kind: "grant", amount: 5, balance_after: 10005, purpose: "admin" },
        { kind: "grant", amount: 10000, balance_after: 10000, purpose: "new user" }
      ], "the ledger lists both grants, newest first")
      const ledgerText = await cli(settings, "ledger", "--user", parsed.user_id, "--limit", "1")
      t.equal(ledgerText.code, 0, ledgerText.stderr)
      t.match(ledgerText.stdout, /^ID\s+TIME\s+KIND\s+AMOUNT\s+BALANCE\s+PURPOSE\s+REFERENCE\n\d+\s+\S+\s+grant\s+\+5\s+10005\s+admin\n$/)

      const minted = await cli(settings, "mint-key", "--user", parsed.user_id, "--name", "ci", "--json")
      t.equal(minted.code, 0, minted.stderr)
      const key = JSON.parse(minted.stdout)
      t.match(key, { user_id: parsed.user_id, key_id: /^key_/, api_key: /^sk_svc_/, prefix: /^sk_svc_/ })

      const keys = await cli(settings, "list-keys", "--user", parsed.user_id)
      t.equal(keys.code, 0, keys.stderr)
      t.match(keys.stdout, /^KEY\s+NAME\s+PREFIX\s+CREATED\n/)
      t.match(keys.stdout, key.key_id)
      t.notMatch(keys.stdout, key.api_key, "a listing never shows a whole key")

      const deleted = await cli(settings, "delete-key", "--key", key.api_key)
      t.equal(deleted.code, 0, deleted.stderr)
      t.equal(deleted.stdout, `deleted key ${key.key_id} of user ${parsed.user_id}\n`)

      const created = await cli(settings, "create-user", "--name", "rich", "--credits", "7")
      t.equal(created.code, 0, created.stderr)
      t.match(created.stdout, /^created user usr_[0-9a-f]{20} "rich" with 7 credits\n/)
    })
  })

  t.test("mistakes get one line on stderr and exit code 1, never a stack trace", async (t) => {
    const settings = await freshSettings(t)
    // Usage errors are refused before the database is opened: those processes run side by side.
    const usage: Array<[Array<string>, RegExp]> = [
      [[], /no command given/],
      [["frobnicate"], /unknown command "frobnicate"/],
      [["create-user"], /create-user needs --name/],
      [["create-user", "--name", "x", "--credits", "-5"], /--credits|argument/],
      [["grant", "--user", "usr_x", "--credits", "abc"], /--credits must be a whole number/],
      [["list-users", "--user", "usr_x"], /list-users does not take --user/],
      [["list-users", "--bogus"], /Unknown option '--bogus'/],
      [["ledger", "--user", "usr_x", "--limit", "0"], /--limit must be a whole number from 1 to 500/]
    ]
    // These open it: one after the other (an embedded directory has one owner at a time).
    const database: Array<[Array<string>, RegExp]> = [
      [["grant", "--user", "usr_missing", "--credits", "5"], /no user usr_missing/],
      [["delete-key", "--key", "key_missing"], /no active key key_missing/],
      [["ledger", "--user", "usr_missing"], /no user usr_missing/]
    ]
    const check = async ([args, message]: [Array<string>, RegExp]) => {
      const result = await cli(settings, ...args)
      t.equal(result.code, 1, `exit 1: ${args.join(" ")}`)
      t.match(result.stderr, /^error: /, `says error: ${args.join(" ")}`)
      t.match(result.stderr, message)
      t.notMatch(result.stderr, noStackTrace, `no stack trace: ${args.join(" ")}`)
      t.equal(result.stdout, "", "nothing on stdout")
    }
    const usageLanes = [0, 1].map(async (lane) => {
      for (const c of usage.filter((_, i) => i % 2 === lane)) await check(c)
    })
    const databaseLane = (async () => {
      for (const c of database) await check(c)
    })()
    const help = cli(settings, "help").then((help) => {
      t.equal(help.code, 0)
      t.match(help.stdout, /create-user --name NAME/)
    })
    await Promise.all([...usageLanes, databaseLane, help])
  })

  t.test("site accounts: create-user --email shows a password once; set-password from stdin or generated", async (t) => {
    const settings = await freshSettings(t)
    const created = await cli(settings, "create-user", "--email", "Dana@Example.com", "--json")
    t.equal(created.code, 0, created.stderr)
    const parsed = JSON.parse(created.stdout)
    t.same(Object.keys(parsed), ["user_id", "api_key", "email", "password"])
    t.equal(parsed.password.length, 24)
    const taken = await cli(settings, "create-user", "--email", "dana@example.COM")
    t.equal(taken.code, 1)
    t.match(taken.stderr, /belongs to another account/)
    t.notMatch(taken.stderr, noStackTrace)
    t.equal(JSON.parse((await cli(settings, "list-users", "--json")).stdout).length, 1, "the refused user was not created")

    const piped = await cliWith(settings, ["set-password", "--email", "dana@example.com", "--json"], "a new password for dana\n")
    t.equal(piped.code, 0, piped.stderr)
    t.same(JSON.parse(piped.stdout), { user_id: parsed.user_id, email: "Dana@Example.com" }, "a typed password is never echoed")
    const short = await cliWith(settings, ["set-password", "--email", "dana@example.com"], "short\n")
    t.equal(short.code, 1)
    t.match(short.stderr, /at least 10 characters/)
    const generated = await cli(settings, "set-password", "--email", "dana@example.com", "--generate", "--json")
    t.equal(JSON.parse(generated.stdout).password.length, 24)
    const unknown = await cli(settings, "set-password", "--email", "nobody@example.com", "--generate")
    t.equal(unknown.code, 1)
    t.match(unknown.stderr, /no user with the e-mail/)
    t.match((await cli(settings, "create-user", "--email", "not-an-address")).stderr, /must be an e-mail address/)
  })

  t.test("rotate-signing-key: a new ID-token key, the old one still published", async (t) => {
    const settings = await freshSettings(t)
    const first = await cli(settings, "rotate-signing-key", "--json")
    t.equal(first.code, 0, first.stderr)
    const a = JSON.parse(first.stdout) as { kid: string; published: number }
    const b = JSON.parse((await cli(settings, "rotate-signing-key", "--json")).stdout) as { kid: string; published: number }
    t.not(a.kid, b.kid)
    t.equal(b.published, a.published + 1)
  })
  t.end()
})

t.test("next to a running owner process", async (t) => {
  const settings = await freshSettings(t)
  const owner = spawn(process.execPath, ["--import", "tsx", ownerScript], {
    cwd: root,
    env: envFor(settings),
    stdio: ["pipe", "pipe", "inherit"]
  })
  t.teardown(() => owner.kill())
  const lines = readline.createInterface({ input: owner.stdout! })[Symbol.asyncIterator]()
  const ask = async (line: string) => {
    owner.stdin!.write(`${line}\n`)
    return (await lines.next()).value as string
  }
  t.match((await lines.next()).value, /^ready \d+$/)

  const created = await cli(settings, "create-user", "--name", "while serving", "--json")
  t.equal(created.code, 0, created.stderr)
  const { user_id, api_key } = JSON.parse(created.stdout)
  if (settings.DATABASE_URL === undefined) {
    const lock = JSON.parse(fs.readFileSync(lockPathFor(fs.realpathSync(settings.DATA_DIR)), "utf8"))
    t.equal(lock.pid, owner.pid, "the CLI went through the owner's socket; the owner kept the directory")
  }
  t.equal(await ask(`auth ${api_key}`), `ok ${user_id}`, "the owner accepts the key the CLI minted")

  const deleted = await cli(settings, "delete-key", "--key", api_key)
  t.equal(deleted.code, 0, deleted.stderr)
  // Embedded: the owner's cache may keep the key for its 2 s TTL. PostgreSQL: NOTIFY, at once.
  const bound = settings.DATABASE_URL === undefined ? 2_500 : 500
  const started = Date.now()
  let answer = await ask(`auth ${api_key}`)
  while (answer !== "invalid" && Date.now() - started < bound + 1_000) {
    await new Promise((resolve) => setTimeout(resolve, 50))
    answer = await ask(`auth ${api_key}`)
  }
  const elapsed = Date.now() - started
  t.equal(answer, "invalid", "the owner rejects the key deleted by the CLI")
  t.ok(elapsed <= bound, `within ${bound} ms (took ${elapsed} ms)`)

  t.equal(await ask("quit"), "closed")
  await new Promise((resolve) => owner.once("exit", resolve))
})
