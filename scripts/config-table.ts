/**
 * Writes the configuration table of README.md from runtime/Config.ts (between the
 * config-table markers). `npm run docs:config`; a test fails when the README is stale.
 */
import { readFileSync, writeFileSync } from "node:fs"
import { settingsTable } from "../runtime/Config.ts"

export const renderConfigTable = (): string =>
  ["| variable | default | meaning |", "|---|---|---|", ...settingsTable().map((r) => `| \`${r.env}\` | ${r.defaultText} | ${r.doc} |`)].join("\n")

export const readmeWithTable = (readme: string): string =>
  readme.replace(/(<!-- config-table:start -->\n)[\s\S]*?(<!-- config-table:end -->)/, `$1${renderConfigTable()}\n$2`)

if (process.argv[1]?.endsWith("config-table.ts")) {
  const path = new URL("../README.md", import.meta.url)
  writeFileSync(path, readmeWithTable(readFileSync(path, "utf8")))
}
