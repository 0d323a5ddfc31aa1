import { Effect } from "effect"
import { readFileSync } from "node:fs"
import t from "tap"
import { AppConfig, AppConfigFrom } from "../../runtime/Config.ts"
import { readmeWithTable } from "../../scripts/config-table.ts"

const load = (env: Record<string, string>) =>
  Effect.runPromise(Effect.flatMap(AppConfig, Effect.succeed).pipe(Effect.provide(AppConfigFrom(env))))

t.test("defaults", async (t) => {
  const c = await load({})
  t.equal(c.port, 8080)
  t.equal(c.apiBase, "/api/v1")
  t.equal(c.siteUrlText, "http://localhost:8080")
  t.equal(c.databaseUrl._tag, "None")
  t.ok(c.workers >= 1)
})

t.test("every bad value is reported at once, by name", async (t) => {
  const error = await load({ PORT: "http", WORKERS: "0", LOG_LEVEL: "loud", SITE_URL: "not a url", MAX_JSON_BODY_BYTES: "-5" }).then(
    () => undefined,
    (e: Error) => e
  )
  t.ok(error)
  for (const name of ["PORT", "WORKERS", "LOG_LEVEL", "SITE_URL", "MAX_JSON_BODY_BYTES"]) t.match(error!.message, new RegExp(`\\b${name}: `))
})

t.test("INSTANCE_STALE_S must be at least two heartbeats", async (t) => {
  const c = await load({})
  t.same([c.instanceHeartbeatS, c.instanceStaleS, c.tmpMaxAgeS], [10, 60, 21_600], "defaults")
  const error = await load({ INSTANCE_HEARTBEAT_S: "10", INSTANCE_STALE_S: "15" }).then(() => undefined, (e: Error) => e)
  t.match(error?.message, /INSTANCE_STALE_S: must be at least twice INSTANCE_HEARTBEAT_S \(10\), got 15/)
})

t.test("SITE_URL keeps no trailing slash; DATABASE_URL is redacted", async (t) => {
  const c = await load({ SITE_URL: "https://speech.example/", DATABASE_URL: "postgres://u:secret@h/db" })
  t.equal(c.siteUrlText, "https://speech.example")
  t.notMatch(JSON.stringify(c), /secret/)
})

t.test("README configuration table matches runtime/Config.ts (npm run docs:config)", async (t) => {
  const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8")
  t.equal(readme, readmeWithTable(readme))
})

t.test("SPEAKER_EMBEDDING_DIR is checked when the configuration is read", async (t) => {
  t.equal((await load({})).speakerEmbeddingDir._tag, "None", "unset: the classical embedding")
  const error = await load({ SPEAKER_EMBEDDING_DIR: "/nonexistent/speaker-model" }).then(() => undefined, (e: Error) => e)
  t.match(error?.message, /SPEAKER_EMBEDDING_DIR: SPEAKER_EMBEDDING_DIR \/nonexistent\/speaker-model has no speaker-embedding\.json/)
})

t.test("WS_DEFAULT_LANGUAGE: the spec's et by default; preset, a code or an English name; anything else is refused", async (t) => {
  t.equal((await load({})).wsDefaultLanguage, "et")
  t.equal((await load({ WS_DEFAULT_LANGUAGE: "Preset" })).wsDefaultLanguage, "preset")
  t.equal((await load({ WS_DEFAULT_LANGUAGE: "English" })).wsDefaultLanguage, "en")
  t.equal((await load({ WS_DEFAULT_LANGUAGE: "de-AT" })).wsDefaultLanguage, "de")
  const error = await load({ WS_DEFAULT_LANGUAGE: "Klingon" }).then(() => undefined, (e: Error) => e)
  t.match(error?.message, /WS_DEFAULT_LANGUAGE: must be preset or a language of the catalogue/)
})
