/**
 * `npm start`: runs the production build, dist/runtime/main.js, building it first when dist/ is
 * missing or older than the sources (scripts/build.mjs). The server runs in this same process
 * (no child to forward signals to), so SIGTERM/SIGINT reach runtime/main.ts's graceful shutdown.
 * Nothing here loads tsx.
 */
import { pathToFileURL } from "node:url"
import * as path from "node:path"
import { build, dist, staleReason } from "./build.mjs"

const reason = staleReason()
if (reason !== undefined) {
  process.stderr.write(`start: ${reason}; building dist/\n`)
  try {
    const ms = build()
    process.stderr.write(`start: dist/ ready in ${(ms / 1000).toFixed(1)} s\n`)
  } catch (e) {
    process.stderr.write(`start: ${e instanceof Error ? e.message : String(e)}\n`)
    process.exit(1)
  }
}
await import(pathToFileURL(path.join(dist, "runtime", "main.js")).href)
