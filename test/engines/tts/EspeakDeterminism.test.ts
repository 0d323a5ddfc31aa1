/**
 * espeak-ng's breathy variants seed a noise generator from the clock at start-up; the runtime
 * freezes the clock then, so separate processes (and worker threads started at other times)
 * produce the same bytes for the same request.
 */
import { execFileSync } from "node:child_process"
import t from "tap"

const run = () =>
  execFileSync(process.execPath, ["--import", "tsx", "test/fixtures/espeakHash.ts"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim()

t.test("the same text and voice give the same bytes in separate processes", async (t) => {
  const first = run()
  await new Promise((r) => setTimeout(r, 1100)) // a different wall-clock second
  const second = run()
  t.match(first, /^[0-9a-f]{40}$/)
  t.equal(second, first)
})
