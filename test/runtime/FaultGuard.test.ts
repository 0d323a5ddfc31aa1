/**
 * The real process entry (runtime/main.ts) survives faults that no request handler caught
 * (issue 9 item 1): a throw in a callback, an unlistened 'error' event, an unhandled rejection.
 * Each is logged with its stack, counted in /metrics, and the service keeps answering.
 */
import t from "tap"
import { startServiceProcess } from "../support/serviceProcess.ts"

const service = await startServiceProcess(t, { preload: "./test/fixtures/injectFaults.mjs" })
const { child, siteUrl, waitFor } = service
const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))

t.test("uncaught faults are logged and counted; the process keeps serving", async (t) => {
  t.equal((await fetch(`${siteUrl}/healthz`)).status, 200, "serving before")
  child.kill("SIGUSR2")
  await waitFor("three fault reports", () => (service.output().match(/uncaught fault/g) ?? []).length >= 3)
  t.equal(child.exitCode, null, "still running")
  t.equal((await fetch(`${siteUrl}/healthz`)).status, 200, "serving after")
  t.match(service.output(), /injected: a throw in a callback/)
  t.match(service.output(), /injected: an 'error' event with no listener/)
  t.match(service.output(), /injected: an unhandled rejection/)
  const metrics = await (await fetch(`${siteUrl}/metrics`)).text()
  t.match(metrics, /process_uncaught_faults(_total)? 3\b/, "counted in /metrics")
  child.kill("SIGTERM")
  t.equal(await exited, 0, "a normal shutdown afterwards")
})
