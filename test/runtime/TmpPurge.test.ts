/**
 * Temporary upload files left in DATA_DIR/tmp by a process that died: purged when the service
 * starts. Embedded PGlite owns its DATA_DIR, so everything there is a leftover; with PostgreSQL
 * another instance may share the directory, so only files older than TMP_MAX_AGE_S go.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import t from "tap"
import { purgeTmpFiles } from "../../runtime/TmpPurge.ts"
import { freshEmbeddedDataDir, testDatabaseMode } from "../support/database.ts"
import { startTestService } from "../support/service.ts"

const DAY_MS = 86_400_000

/** A file whose modification time is `ageMs` ago. */
const fileAged = (file: string, ageMs: number) => {
  fs.writeFileSync(file, "leftover upload")
  const when = new Date(Date.now() - ageMs)
  fs.utimesSync(file, when, when)
}

t.test("purgeTmpFiles deletes files older than the bound and keeps the rest", async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "speech-tmp-purge-"))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  fileAged(path.join(dir, "upload-old"), 2 * DAY_MS)
  fileAged(path.join(dir, "upload-fresh"), 1000)
  fs.mkdirSync(path.join(dir, "subdir"))
  t.equal(purgeTmpFiles(dir, Date.now() - DAY_MS), 1)
  t.same(fs.readdirSync(dir).sort(), ["subdir", "upload-fresh"], "the fresh file and directories stay")
  t.equal(purgeTmpFiles(path.join(dir, "missing"), Date.now()), 0, "a missing directory is nothing to purge")
})

t.test("the service purges DATA_DIR/tmp at start-up", async (t) => {
  const dataDir = await freshEmbeddedDataDir()
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }))
  const tmp = path.join(dataDir, "tmp")
  fs.mkdirSync(tmp)
  fileAged(path.join(tmp, "upload-stale"), 2 * DAY_MS)
  fileAged(path.join(tmp, "upload-live"), 1000)
  await startTestService(t, { DATA_DIR: dataDir, TMP_MAX_AGE_S: "3600" })
  const left = fs.readdirSync(tmp).sort()
  if (testDatabaseMode() === "embedded") {
    t.same(left, [], "embedded: this server owns DATA_DIR, every file there is a leftover")
  } else {
    t.same(left, ["upload-live"], "PostgreSQL: a file younger than TMP_MAX_AGE_S may be another instance's live upload")
  }
})
