/**
 * Holds an Apertium pipeline's start deterministically: `lt-proc` is shadowed on PATH (this
 * process's, which the pipelines inherit) by a wrapper whose first stage of a pipeline (the
 * morphological analyser, `*.automorf.bin`) waits on a FIFO that only the test opens; every
 * other call runs the real program. `realLtProc` is "" where Apertium is not installed.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

export const realLtProc = (() => {
  try {
    return execFileSync("bash", ["-c", "command -v lt-proc"], { encoding: "utf8" }).trim()
  } catch {
    return ""
  }
})()

/** Shadows lt-proc until teardown; `openGate` lets the held stage through (it waits for the stage to open the FIFO). */
export const holdApertiumStarts = (t: { teardown: (fn: () => unknown) => void }) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "apertium-shadow-"))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const fifo = path.join(dir, "gate")
  execFileSync("mkfifo", [fifo])
  fs.writeFileSync(path.join(dir, "lt-proc"), `#!/bin/sh
case "$*" in *automorf*) cat '${fifo}' > /dev/null ;; esac
exec '${realLtProc}' "$@"
`, { mode: 0o755 })
  const savedPath = process.env.PATH
  process.env.PATH = `${dir}:${savedPath}`
  t.teardown(() => void (process.env.PATH = savedPath))
  // Opening the FIFO for writing waits for the held stage to open it; closing lets it through.
  return { openGate: () => fs.promises.writeFile(fifo, "") }
}
