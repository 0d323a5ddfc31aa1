/**
 * Production build: the server's TypeScript (runtime/, actors/, engines/, protocol/, storage/)
 * compiled by tsc (tsconfig.build.json) to JavaScript in dist/, same layout, plus the files the
 * server reads at run time next to the modules that read them:
 *
 * - runtime/worker.mjs: the piscina bootstrap (runtime/WorkerPool.ts names it by URL); in dist/ it
 *   is handed engines/worker.js and so never registers tsx;
 * - protocol/site/assets/: the site's CSS, scripts and playground page (protocol/routes/sitePages.ts);
 * - package.json: `{ name, version, type }` only, read by runtime/Service.ts for the version.
 *
 *   node scripts/build.mjs             # always builds
 *   node scripts/build.mjs --if-stale  # builds only when dist/ is missing or older than a source
 *
 * Plain JavaScript so that it runs without tsx. The build goes to dist.partial/ and replaces dist/
 * only when tsc succeeded (noEmitOnError), so a type error never leaves a half-built dist/.
 */
import { spawnSync } from "node:child_process"
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
export const dist = path.join(root, "dist")
const stampFile = path.join(dist, ".build-stamp")

/** Folders compiled into dist/ (tsconfig.build.json's `include`). */
const sourceFolders = ["runtime", "actors", "engines", "protocol", "storage"]
/** Files besides the sources whose change makes dist/ stale. */
const buildInputs = ["package.json", "package-lock.json", "tsconfig.json", "tsconfig.build.json", "scripts/build.mjs"]
/** Copied as they are: [source, destination], relative to the root and to dist/. */
const assets = [
  ["runtime/worker.mjs", "runtime/worker.mjs"],
  ["protocol/site/assets", "protocol/site/assets"]
]

/** Newest modification time (ms) under `entry`; directories count too, so a deleted file shows. */
const newestMtime = (entry) => {
  if (!existsSync(entry)) return 0
  const stat = statSync(entry)
  if (!stat.isDirectory()) return stat.mtimeMs
  let newest = stat.mtimeMs
  for (const name of readdirSync(entry)) newest = Math.max(newest, newestMtime(path.join(entry, name)))
  return newest
}

/** Why dist/ must be rebuilt, or undefined when it is up to date. */
export const staleReason = () => {
  if (!existsSync(stampFile)) return "dist/ is missing or incomplete"
  const built = statSync(stampFile).mtimeMs
  for (const input of [...sourceFolders, ...buildInputs]) {
    if (newestMtime(path.join(root, input)) > built) return `${input} changed since the last build`
  }
  return undefined
}

export const build = () => {
  const started = Date.now()
  const partial = path.join(root, "dist.partial")
  rmSync(partial, { recursive: true, force: true })
  let tsc
  try {
    tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc")
  } catch {
    throw new Error("typescript is not installed (npm ci installs it; npm ci --omit=dev does not)")
  }
  const result = spawnSync(process.execPath, [tsc, "-p", path.join(root, "tsconfig.build.json"), "--outDir", partial], { cwd: root, stdio: "inherit" })
  if (result.status !== 0) {
    rmSync(partial, { recursive: true, force: true })
    throw new Error(`tsc failed (exit ${result.status ?? result.signal}); dist/ is left as it was`)
  }
  for (const [from, to] of assets) {
    mkdirSync(path.dirname(path.join(partial, to)), { recursive: true })
    cpSync(path.join(root, from), path.join(partial, to), { recursive: true })
  }
  const pkg = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8"))
  writeFileSync(path.join(partial, "package.json"), JSON.stringify({ name: pkg.name, version: pkg.version, private: true, type: pkg.type }, null, 2) + "\n")
  writeFileSync(path.join(partial, ".build-stamp"), new Date().toISOString() + "\n")
  rmSync(dist, { recursive: true, force: true })
  renameSync(partial, dist)
  return Date.now() - started
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const ifStale = process.argv.includes("--if-stale")
  const reason = ifStale ? staleReason() : "requested"
  if (reason === undefined) process.exit(0)
  if (ifStale) process.stderr.write(`build: ${reason}; building dist/\n`)
  try {
    const ms = build()
    process.stderr.write(`build: dist/ ready in ${(ms / 1000).toFixed(1)} s\n`)
  } catch (e) {
    process.stderr.write(`build: ${e instanceof Error ? e.message : String(e)}\n`)
    process.exit(1)
  }
}
