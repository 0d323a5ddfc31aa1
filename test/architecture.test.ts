/**
 * The folder map as rules the compiler cannot see: which way imports point, what the worker
 * threads load, and how large a module may grow. It reads the import lines of every source file
 * (static `import … from`, `export … from` and `import("…")`), so a forbidden edge fails here
 * with the file and line that made it.
 *
 * Layers, bottom up: `engines/` (computation, some of it on worker threads) and `storage/`
 * (where bytes live: database, blobs, remote URLs); `actors/` (sessions and jobs over engines and
 * storage); `protocol/` (routes, schemas, wire frames, errors as answers); `runtime/` (the
 * composition root and the uWS bridge), which may import anything. `bench/` may import the
 * service, never the tests.
 */
import { readdirSync, readFileSync, statSync } from "node:fs"
import * as path from "node:path"
import t from "tap"

const root = path.resolve(import.meta.dirname, "..")
const folders = ["engines", "storage", "actors", "protocol", "runtime", "bench"] as const
type Folder = typeof folders[number]

/** Folders each folder must never import from. */
const forbidden: Record<Folder, ReadonlyArray<string>> = {
  engines: ["storage", "actors", "protocol", "runtime", "bench", "test"],
  storage: ["actors", "protocol", "runtime", "bench", "test"],
  actors: ["protocol", "runtime", "bench", "test"],
  protocol: ["runtime", "bench", "test"],
  runtime: ["bench", "test"],
  bench: ["test"]
}

/** STYLE: a module past this many lines does more than one job. */
const MAX_LINES = 450

const sourceFiles = (dir: string): Array<string> =>
  readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name)
    if (statSync(full).isDirectory()) return sourceFiles(full)
    return /\.(ts|mts|mjs|js)$/.test(name) && !name.endsWith(".d.ts") ? [full] : []
  })

interface ImportLine {
  readonly specifier: string
  readonly line: number
  /** `import type …` / `export type …`: erased at run time. */
  readonly typeOnly: boolean
}

const importPattern = /^\s*(import|export)\s+(type\s+)?(?:[^'";]*?\s+from\s+)?["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)/gm

const importsOf = (file: string): Array<ImportLine> => {
  const text = readFileSync(file, "utf8")
  const found: Array<ImportLine> = []
  for (const m of text.matchAll(importPattern)) {
    const specifier = m[3] ?? m[4]
    if (specifier === undefined) continue
    found.push({ specifier, line: text.slice(0, m.index).split("\n").length, typeOnly: m[2] !== undefined })
  }
  return found
}

/** The project folder a relative import lands in, or undefined for packages and node: modules. */
const targetOf = (file: string, specifier: string): string | undefined => {
  if (!specifier.startsWith(".")) return undefined
  const target = path.relative(root, path.resolve(path.dirname(file), specifier))
  return target.split(path.sep)[0]
}

const files = folders.flatMap((folder) => sourceFiles(path.join(root, folder)).map((file) => ({ folder, file })))

t.test("imports point down the layers", (t) => {
  const violations: Array<string> = []
  for (const { folder, file } of files) {
    for (const i of importsOf(file)) {
      const target = targetOf(file, i.specifier)
      if (target !== undefined && forbidden[folder].includes(target)) {
        violations.push(`${path.relative(root, file)}:${i.line} imports ${i.specifier} (${folder} → ${target})`)
      }
    }
  }
  t.same(violations, [], "no forbidden edge")
  t.ok(files.length > 100, `read ${files.length} source files`)
  t.end()
})

t.test("nothing a worker thread loads imports effect", (t) => {
  // The worker's whole static import graph, from its entry module (type-only imports are erased).
  const seen = new Set<string>()
  const pending = [path.join(root, "engines/worker.ts"), path.join(root, "runtime/worker.mjs")]
  const offending: Array<string> = []
  while (pending.length > 0) {
    const file = pending.pop()!
    if (seen.has(file)) continue
    seen.add(file)
    for (const i of importsOf(file)) {
      if (i.typeOnly) continue
      if (i.specifier === "effect" || i.specifier.startsWith("effect/") || i.specifier.startsWith("@effect/")) {
        offending.push(`${path.relative(root, file)}:${i.line} imports ${i.specifier}`)
      } else if (i.specifier.startsWith(".")) {
        const resolved = path.resolve(path.dirname(file), i.specifier)
        if (resolved.startsWith(root) && /\.(ts|mjs|js)$/.test(resolved)) pending.push(resolved)
      }
    }
  }
  t.same(offending, [], "worker modules stay free of effect")
  t.ok(seen.size > 20, `followed ${seen.size} worker modules`)
  t.end()
})

t.test(`no source module is longer than ${MAX_LINES} lines`, (t) => {
  const long = files
    .map(({ file }) => ({ file: path.relative(root, file), lines: readFileSync(file, "utf8").split("\n").length }))
    .filter((f) => f.lines > MAX_LINES)
    .map((f) => `${f.file}: ${f.lines} lines`)
  t.same(long, [], "split modules that grew past the limit")
  t.end()
})

t.test("the rules see a forbidden edge when one is written", (t) => {
  // The checker itself: a line an actor must not have is found, with its folder.
  const fake = path.join(root, "actors/Example.ts")
  t.equal(targetOf(fake, "../runtime/WorkerPool.ts"), "runtime")
  t.equal(targetOf(fake, "./Other.ts"), "actors")
  t.equal(targetOf(fake, "effect"), undefined)
  t.ok(forbidden.actors.includes(targetOf(fake, "../protocol/ApiError.ts")!))
  const sample = 'import { X } from "../runtime/A.ts"\nimport type { Y } from "effect"\nexport { Z } from "./z.ts"\nconst m = await import("../protocol/B.ts")\n'
  const lines = [...sample.matchAll(importPattern)].map((m) => [m[3] ?? m[4], m[2] !== undefined])
  t.same(lines, [["../runtime/A.ts", false], ["effect", true], ["./z.ts", false], ["../protocol/B.ts", false]])
  t.end()
})
