/**
 * The whole service, started in this test process on a free port, with a database of its own
 * (a fresh PGlite directory, or a fresh schema when DATABASE_URL is set). Closed in teardown.
 */
import { Effect, Exit, Scope } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { AppConfig, AppConfigFrom } from "../../runtime/Config.ts"
import { runService, type RunningService } from "../../runtime/Service.ts"
import { freshEmbeddedDataDir, isolatedDatabaseUrl } from "./database.ts"

export interface TestService extends RunningService {
  readonly base: string
  /** The service's DATA_DIR (blobs, tmp, embedded database); removed on close. */
  readonly dataDir: string
  /** A new user with credits and a key. */
  readonly newUser: (credits?: number) => Promise<{ userId: string; apiKey: string; keyId: string }>
  readonly close: () => Promise<void>
}

export const startTestService = async (
  t: { teardown: (fn: () => unknown) => void },
  env: Record<string, string> = {}
): Promise<TestService> => {
  const pg = process.env.DATABASE_URL
  const databaseUrl = env.DATABASE_URL ?? (pg !== undefined && pg !== "" ? await isolatedDatabaseUrl(t, pg) : undefined)
  // The PGlite template (39 MB, ~1000 files) is copied only when the service will open it.
  const embedded = databaseUrl === undefined || databaseUrl === ""
  const dataDir = embedded ? await freshEmbeddedDataDir() : fs.mkdtempSync(path.join(os.tmpdir(), "speech-test-data-"))
  const settings: Record<string, string> = {
    PORT: "0",
    HOST: "127.0.0.1",
    DATA_DIR: dataDir,
    LOG_LEVEL: "error",
    WORKERS: "1",
    // No Apertium pipelines started in the background of every test's service (eight pairs, a
    // burst of CPU each): a test that translates warms its pairs (`translator.warm`).
    APERTIUM_WARM: "none",
    ...(databaseUrl === undefined ? {} : { DATABASE_URL: databaseUrl }),
    ...env
  }
  const scope = Effect.runSync(Scope.make())
  const service = await Effect.runPromise(
    Effect.flatMap(AppConfig, (config) => runService(config)).pipe(
      Effect.provide(AppConfigFrom(settings)),
      Scope.provide(scope)
    )
  )
  let closed = false
  const close = async () => {
    if (closed) return
    closed = true
    await Effect.runPromise(service.drain)
    await Effect.runPromise(Scope.close(scope, Exit.void))
    fs.rmSync(dataDir, { recursive: true, force: true })
  }
  t.teardown(close)
  return {
    ...service,
    base: `${service.siteUrl}/api/v1`,
    dataDir,
    newUser: (credits = 100_000) =>
      Effect.runPromise(service.users.createUserWithKey({ name: "test", credits })),
    close
  }
}
