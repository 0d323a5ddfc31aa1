/**
 * The admin command line: users, API keys, credits and site passwords, from a shell.
 *
 *   npm run --silent admin -- <command> [options]      (or: npx tsx runtime/admin.ts ...)
 *
 * It reads the server's settings (DATA_DIR, DATABASE_URL, INITIAL_CREDITS), applies migrations,
 * and works while the server runs: in embedded mode it goes through the server's socket instead
 * of opening the PGlite directory. Mistakes get a one-line message and exit code 1, never a stack
 * trace. With --json every command prints one JSON document on one line of stdout; scripts and
 * load tests rely on `create-user --json` printing exactly {"user_id":"...","api_key":"..."}.
 * (Plain `npm run` adds its own banner to stdout: use `--silent` when parsing the output.)
 */
import { Cause, Effect, Exit, Fiber, Layer, Logger, References } from "effect"
import { randomBytes } from "node:crypto"
import * as readline from "node:readline"
import { parseArgs } from "node:util"
import { AccountsError } from "../storage/AccountsError.ts"
import { hashPassword, passwordProblem } from "../storage/Passwords.ts"
import { WebSessions, webSessionsLayer } from "../storage/WebSessions.ts"
import { OAuthStore, oauthStoreLayer } from "../storage/OAuthStore.ts"
import { rotateSigningKey } from "../protocol/oauth/IdTokens.ts"
import { ApiKeys, apiKeysLayer } from "../storage/ApiKeys.ts"
import { Credits, CreditsLive } from "../storage/Credits.ts"
import { Users, usersLayer } from "../storage/Users.ts"
import { databaseLayer } from "../storage/Database.ts"
import { AppConfig, AppConfigFromEnv, databaseUrlText } from "./Config.ts"

/** Log lines of the admin CLI: `warning: <message>` on stderr, fields and causes left out. */
const warningsToStderr = Logger.make<unknown, void>(({ logLevel, message }) => {
  const parts = (Array.isArray(message) ? message : [message]).filter((p) => p === null || typeof p !== "object" || p instanceof Error)
  process.stderr.write(`${logLevel.toLowerCase()}: ${parts.map((p) => (p instanceof Error ? p.message : String(p))).join(" ")}\n`)
})

const usage = `Usage: npm run --silent admin -- <command> [options]

Commands:
  create-user --name NAME [--credits N]   create a user and its first API key
              [--email E]                 (credits default to INITIAL_CREDITS); with an
                                          e-mail the user can sign in to the site: a
                                          password is generated and shown once
  set-password --email E [--generate]     set or reset a user's site password: read from
                                          the terminal (asked twice) or one line of stdin;
                                          --generate makes one and shows it once
  mint-key --user USER_ID [--name NAME]   mint another API key for a user
  delete-key --key KEY_ID_OR_KEY          delete an API key (by id or by the key itself)
  grant --user USER_ID --credits N        add N credits to a user
  list-users                              users with their credits and key counts
  list-keys --user USER_ID                a user's active keys
  rotate-signing-key                      a new key signs OAuth ID tokens from now on; the
                                          old ones stay published in the JWKS for verifiers
  ledger --user USER_ID [--limit N]       a user's credit movements, newest first
                                          (grants, debits, refunds; default 50, at most 500)
  help                                    this text

Options:
  --json   print one JSON document on one line instead of text

Settings come from the environment, as for the server: DATA_DIR, DATABASE_URL, INITIAL_CREDITS.
API keys are shown once, when created; only their hash is stored.`

/** A mistake in the command line: reported with the usage hint, before touching the database. */
class UsageError {
  constructor(readonly message: string) {}
}

type Command =
  | { readonly kind: "help" }
  | { readonly kind: "create-user"; readonly name: string; readonly credits: number | undefined; readonly email: string | undefined }
  | { readonly kind: "set-password"; readonly email: string; readonly generate: boolean }
  | { readonly kind: "mint-key"; readonly user: string; readonly name: string | undefined }
  | { readonly kind: "delete-key"; readonly key: string }
  | { readonly kind: "grant"; readonly user: string; readonly credits: number }
  | { readonly kind: "list-users" }
  | { readonly kind: "rotate-signing-key" }
  | { readonly kind: "list-keys"; readonly user: string }
  | { readonly kind: "ledger"; readonly user: string; readonly limit: number | undefined }

const optionsOf: Record<Command["kind"], ReadonlyArray<string>> = {
  "help": [],
  "create-user": ["name", "credits", "email"],
  "set-password": ["email", "generate"],
  "mint-key": ["user", "name"],
  "delete-key": ["key"],
  "grant": ["user", "credits"],
  "list-users": [],
  "rotate-signing-key": [],
  "list-keys": ["user"],
  "ledger": ["user", "limit"]
}

const isCommandName = (name: string): name is Command["kind"] => Object.hasOwn(optionsOf, name)

const credits = (text: string | undefined, min: number): number | undefined => {
  if (text === undefined) return undefined
  const value = /^\d+$/.test(text) ? Number(text) : Number.NaN
  if (!Number.isSafeInteger(value) || value < min) {
    throw new UsageError(`--credits must be a whole number of at least ${min}, got "${text}"`)
  }
  return value
}

const required = (value: string | undefined, option: string, command: string): string => {
  if (value === undefined || value.trim() === "") throw new UsageError(`${command} needs --${option}`)
  return value.trim()
}

/** Parses argv; throws UsageError. */
export const parseCommand = (argv: ReadonlyArray<string>): { readonly command: Command; readonly json: boolean } => {
  let parsed
  try {
    parsed = parseArgs({
      args: [...argv],
      allowPositionals: true,
      strict: true,
      options: {
        name: { type: "string" },
        credits: { type: "string" },
        user: { type: "string" },
        key: { type: "string" },
        limit: { type: "string" },
        email: { type: "string" },
        generate: { type: "boolean" },
        json: { type: "boolean" },
        help: { type: "boolean", short: "h" }
      }
    })
  } catch (error) {
    // Node's messages run on with advice for programmers; the first sentence is the point.
    throw new UsageError((error instanceof Error ? error.message : String(error)).split("\n")[0]!.split(". ")[0]!)
  }
  const { positionals, values } = parsed
  const json = values.json === true
  if (values.help === true) return { command: { kind: "help" }, json }
  const [name, ...extra] = positionals
  if (name === undefined) throw new UsageError("no command given")
  if (!isCommandName(name)) throw new UsageError(`unknown command "${name}"`)
  if (extra.length > 0) throw new UsageError(`unexpected argument "${extra[0]}"`)
  for (const option of ["name", "credits", "user", "key", "limit", "email", "generate"] as const) {
    if (values[option] !== undefined && !optionsOf[name].includes(option)) {
      throw new UsageError(`${name} does not take --${option}`)
    }
  }
  switch (name) {
    case "help":
      return { command: { kind: "help" }, json }
    case "create-user": {
      const email = values.email?.trim() || undefined
      if (email !== undefined && !EMAIL.test(email)) throw new UsageError(`--email must be an e-mail address, got "${email}"`)
      const userName = values.name?.trim() || email?.split("@")[0]
      return { command: { kind: name, name: required(userName, "name", name), credits: credits(values.credits, 0), email }, json }
    }
    case "set-password":
      return { command: { kind: name, email: required(values.email, "email", name), generate: values.generate === true }, json }
    case "mint-key":
      return { command: { kind: name, user: required(values.user, "user", name), name: values.name?.trim() || undefined }, json }
    case "delete-key":
      return { command: { kind: name, key: required(values.key, "key", name) }, json }
    case "grant":
      return {
        command: { kind: name, user: required(values.user, "user", name), credits: credits(required(values.credits, "credits", name), 1)! },
        json
      }
    case "list-users":
    case "rotate-signing-key":
      return { command: { kind: name }, json }
    case "list-keys":
      return { command: { kind: name, user: required(values.user, "user", name) }, json }
    case "ledger": {
      const limit = values.limit === undefined ? undefined : /^\d+$/.test(values.limit) ? Number(values.limit) : Number.NaN
      if (limit !== undefined && !(limit >= 1 && limit <= 500)) throw new UsageError(`--limit must be a whole number from 1 to 500, got "${values.limit}"`)
      return { command: { kind: name, user: required(values.user, "user", name), limit }, json }
    }
  }
}

/** Enough to catch a typo; the address is not mailed to. */
const EMAIL = /^[^\s@]+@[^\s@]+$/u

/** A generated password: 18 random bytes, 24 characters of base64url. */
const generatedPassword = () => randomBytes(18).toString("base64url")

/** A password from the terminal (asked twice, not echoed) or one line of a piped stdin. */
const readPassword = (): Promise<string> =>
  new Promise((resolve, reject) => {
    const rl = readline.createInterface({ input: process.stdin, output: process.stderr, terminal: process.stdin.isTTY === true })
    const muted = rl as unknown as { _writeToOutput: (s: string) => void }
    const ask = (prompt: string) =>
      new Promise<string>((res) => {
        process.stderr.write(prompt)
        if (process.stdin.isTTY === true) muted._writeToOutput = () => {}
        rl.question("", (answer) => {
          if (process.stdin.isTTY === true) process.stderr.write("\n")
          res(answer)
        })
      })
    rl.on("close", () => reject(new Error("no password given")))
    void (async () => {
      const first = await ask("new password: ")
      if (process.stdin.isTTY === true && (await ask("again: ")) !== first) throw new Error("the two passwords differ")
      rl.removeAllListeners("close")
      rl.close()
      resolve(first)
    })().catch((e) => (rl.removeAllListeners("close"), rl.close(), reject(e)))
  })

const table = (headers: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)))
  const line = (cells: ReadonlyArray<string>) => cells.map((c, i) => c.padEnd(widths[i]!)).join("  ").trimEnd()
  return [line(headers), ...rows.map(line)].join("\n")
}

/** Runs one command and returns what to print: a JSON value or lines of text. */
const run = (command: Exclude<Command, { kind: "help" }>, json: boolean) =>
  Effect.gen(function*() {
    const userStore = yield* Users
    const keyStore = yield* ApiKeys
    const creditStore = yield* Credits
    const out = (value: unknown, text: string) => (json ? JSON.stringify(value) : text)
    switch (command.kind) {
      case "create-user": {
        const password = command.email === undefined ? undefined : generatedPassword()
        const created = yield* userStore.createUserWithKey({
          name: command.name,
          credits: command.credits,
          email: command.email,
          passwordHash: password === undefined ? undefined : yield* hashPassword(password)
        })
        const balance = yield* userStore.balance(created.userId)
        if (command.email === undefined || password === undefined) {
          return out(
            { user_id: created.userId, api_key: created.apiKey },
            `created user ${created.userId} "${command.name}" with ${balance} credits\n` +
              `API key ${created.keyId} (shown once, store it now):\n${created.apiKey}`
          )
        }
        return out(
          { user_id: created.userId, api_key: created.apiKey, email: command.email, password },
          `created user ${created.userId} "${command.name}" <${command.email}> with ${balance} credits\n` +
            `API key ${created.keyId} (shown once, store it now):\n${created.apiKey}\n` +
            `site password (shown once; change it on the account page):\n${password}`
        )
      }
      case "set-password": {
        const user = yield* userStore.findByEmail(command.email)
        if (user === undefined) return yield* new AccountsError({ reason: "UserNotFound", message: `no user with the e-mail ${command.email}` })
        const password = command.generate ? generatedPassword() : yield* Effect.promise(readPassword)
        const problem = passwordProblem(password)
        if (problem !== undefined) return yield* Effect.fail(new UsageError(problem))
        yield* userStore.setPasswordHash(user.userId, yield* hashPassword(password))
        // A reset password ends the sessions that the old one opened.
        yield* (yield* WebSessions).endAll(user.userId)
        return out(
          { user_id: user.userId, email: user.email, ...(command.generate ? { password } : {}) },
          `password set for ${user.userId} <${user.email}>; every site session of the user is ended` + (command.generate ? `\nnew password (shown once):\n${password}` : "")
        )
      }
      case "mint-key": {
        const minted = yield* keyStore.mintKey(command.user, command.name)
        return out(
          { user_id: command.user, key_id: minted.keyId, api_key: minted.apiKey, prefix: minted.prefix },
          `minted key ${minted.keyId} for ${command.user} (shown once, store it now):\n${minted.apiKey}`
        )
      }
      case "delete-key": {
        const deleted = yield* keyStore.deleteKey(command.key)
        return out(
          { key_id: deleted.keyId, user_id: deleted.userId, deleted: true },
          `deleted key ${deleted.keyId} of user ${deleted.userId}`
        )
      }
      case "grant": {
        const balance = yield* creditStore.grantCredits(command.user, command.credits, { purpose: "admin" })
        return out({ user_id: command.user, credits: balance }, `user ${command.user} now has ${balance} credits`)
      }
      case "rotate-signing-key": {
        yield* rotateSigningKey
        const keys = yield* (yield* OAuthStore).signingKeys
        return out({ kid: keys.current.kid, published: keys.published.length }, `ID tokens are now signed with key ${keys.current.kid}; ${keys.published.length} key(s) published in the JWKS`)
      }
      case "list-users": {
        const users = yield* userStore.listUsers()
        return out(
          users.map((u) => ({ user_id: u.userId, name: u.name, credits: u.credits, keys: u.keyCount, created_at: u.createdAt.toISOString() })),
          users.length === 0
            ? "no users yet (create one with: create-user --name NAME)"
            : table(
              ["USER", "NAME", "CREDITS", "KEYS", "CREATED"],
              users.map((u) => [u.userId, u.name, String(u.credits), String(u.keyCount), u.createdAt.toISOString()])
            )
        )
      }
      case "list-keys": {
        const keys = yield* keyStore.listKeys(command.user)
        return out(
          keys.map((k) => ({ key_id: k.keyId, name: k.name, prefix: k.prefix, created_at: k.createdAt.toISOString() })),
          keys.length === 0
            ? `user ${command.user} has no active keys`
            : table(["KEY", "NAME", "PREFIX", "CREATED"], keys.map((k) => [k.keyId, k.name, `${k.prefix}…`, k.createdAt.toISOString()]))
        )
      }
      case "ledger": {
        const entries = yield* creditStore.ledger(command.user, { limit: command.limit })
        return out(
          entries.map((e) => ({
            id: e.id,
            time: e.createdAt.toISOString(),
            kind: e.kind,
            amount: e.amount,
            balance_after: e.balanceAfter,
            purpose: e.purpose,
            reference: e.reference
          })),
          entries.length === 0
            ? `user ${command.user} has no credit movements`
            : table(
              ["ID", "TIME", "KIND", "AMOUNT", "BALANCE", "PURPOSE", "REFERENCE"],
              entries.map((e) => [String(e.id), e.createdAt.toISOString(), e.kind, e.amount > 0 ? `+${e.amount}` : String(e.amount), String(e.balanceAfter), e.purpose ?? "", e.reference ?? ""])
            )
        )
      }
    }
  })

/** Layers of a command run: settings from the environment, the database as a "tool", accounts. */
const layers = Layer.unwrap(Effect.gen(function*() {
  const config = yield* AppConfig
  // CreditsLive: a command takes no reservations, so its instance id is never used.
  return Layer.mergeAll(
    // A deleted key waits for every server of the deployment to drop it (storage/ApiKeys.ts).
    usersLayer({ initialCredits: config.initialCredits }).pipe(
      Layer.provideMerge(apiKeysLayer({ liveWithinMs: config.instanceStaleS * 1000 }))
    ),
    CreditsLive,
    webSessionsLayer({ lifetimeMs: config.sessionTtlH * 3_600_000 }),
    oauthStoreLayer({ accessTtlS: config.oauthAccessTtlS })
  ).pipe(
    Layer.provideMerge(databaseLayer({ databaseUrl: databaseUrlText(config), dataDir: config.dataDir, embeddedRole: "tool" }))
  )
})).pipe(Layer.provide(AppConfigFromEnv))

/** One line an operator can act on, for every failure we expect. */
const describeFailure = (error: unknown): string => {
  const tagged = error as { _tag?: string; message?: string; reason?: unknown }
  switch (tagged._tag) {
    case "AccountsError":
      return (error as AccountsError).message
    case "SqlError": {
      const reason = tagged.reason as { cause?: { message?: string; detail?: string }; message?: string } | undefined
      const detail = reason?.cause?.message ?? reason?.message ?? tagged.message
      return `database error: ${detail}`
    }
    case "MigrationError":
      return `database migration failed: ${tagged.message}`
    default:
      return tagged.message ?? String(error)
  }
}

const main = async (argv: ReadonlyArray<string>): Promise<number> => {
  let parsed
  try {
    parsed = parseCommand(argv)
  } catch (error) {
    if (!(error instanceof UsageError)) throw error
    process.stderr.write(`error: ${error.message}\nRun "npm run admin -- help" for the commands.\n`)
    return 1
  }
  const { command, json } = parsed
  if (command.kind === "help") {
    process.stdout.write(`${usage}\n`)
    return 0
  }
  const program = run(command, json).pipe(
    Effect.provide(layers),
    // Only warnings, as plain lines on stderr (stdout is the output scripts parse; failures are
    // reported below): e.g. a key deletion that waited for a server that never answered.
    Effect.provide(Logger.layer([warningsToStderr])),
    Effect.provideService(References.MinimumLogLevel, "Warn")
  )
  const fiber = Effect.runFork(program)
  // Ctrl-C while this process owns PGlite must still close it and remove the lock.
  const interrupt = () => Effect.runFork(Fiber.interrupt(fiber))
  process.once("SIGINT", interrupt)
  process.once("SIGTERM", interrupt)
  const exit = await Effect.runPromise(Fiber.await(fiber))
  if (Exit.isSuccess(exit)) {
    process.stdout.write(`${exit.value}\n`)
    return 0
  }
  if (Cause.hasInterruptsOnly(exit.cause)) {
    process.stderr.write("interrupted\n")
    return 130
  }
  const failure = Cause.squash(exit.cause)
  process.stderr.write(`error: ${describeFailure(failure)}\n`)
  return 1
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error) => {
    process.stderr.write(`error: ${error instanceof Error ? error.message : String(error)}\n`)
    process.exit(1)
  }
)
