/**
 * The Apertium pairs installed on this machine: one `<src>-<dst>.mode` file per pair in the modes
 * directory (Debian: /usr/share/apertium/modes, filled by the `apertium-<pair>` packages).
 *
 * Variants (`eng-cat_valencia`, `spa-eng_US`, `es-pt_BR`, `*_iec2017`) are skipped: callers name
 * a language, not an orthography. Older pairs use two-letter names (`es-pt`); both spellings are
 * mapped to ISO 639-3, and where a pair exists under both the three-letter mode wins.
 */
import { execFile } from "node:child_process"
import { readdirSync } from "node:fs"
import { join } from "node:path"
import { normalizeLanguage } from "./LanguageCodes.ts"

export interface ApertiumMode {
  /** ISO 639-3 codes. */
  readonly source: string
  readonly target: string
  /** Apertium's name for the pair (`eng-spa`, `es-pt`). */
  readonly name: string
  /** The `.mode` file. */
  readonly path: string
}

const MODE_FILE = /^([a-z]{2,3})-([a-z]{2,3})\.mode$/u

/** The pairs in `dir`, sorted by source then target; an absent directory has none. */
export const listApertiumModes = (dir: string): ReadonlyArray<ApertiumMode> => {
  let files: Array<string>
  try {
    files = readdirSync(dir)
  } catch {
    return []
  }
  const byPair = new Map<string, ApertiumMode>()
  for (const file of files.sort()) {
    const m = MODE_FILE.exec(file)
    if (m === null) continue
    const source = normalizeLanguage(m[1]!)
    const target = normalizeLanguage(m[2]!)
    if (source === undefined || target === undefined || source === target) continue
    const key = `${source}-${target}`
    const name = `${m[1]}-${m[2]}`
    const existing = byPair.get(key)
    // Prefer the current three-letter packaging over a legacy two-letter one.
    if (existing !== undefined && existing.name.length >= name.length) continue
    byPair.set(key, { source, target, name, path: join(dir, file) })
  }
  return [...byPair.values()].sort((a, b) => a.source.localeCompare(b.source) || a.target.localeCompare(b.target))
}

/**
 * The shell pipeline of a mode in null-flush form: every program reads until `\0`, answers and
 * flushes, so one long-lived pipeline serves request after request. `apertium -z` cannot be used
 * in Apertium 3.8: its deformatter rejects the flag and drops the `\0`; the mode's own programs
 * with `-z` (what `apertium-wblank-mode -z` prints) work. The pipeline takes `$1` (generation
 * flag, `-n`: unknown words unmarked) and `$2` (an extra tagger flag, empty).
 */
export const nullFlushPipeline = (mode: ApertiumMode): Promise<string> =>
  new Promise((resolve, reject) => {
    execFile("apertium-wblank-mode", ["-z", mode.path], { encoding: "utf8", timeout: 10_000 }, (error, stdout) => {
      if (error !== null) reject(error)
      else if (stdout.trim() === "") reject(new Error(`apertium-wblank-mode printed no pipeline for ${mode.path}`))
      else resolve(stdout.trim())
    })
  })
