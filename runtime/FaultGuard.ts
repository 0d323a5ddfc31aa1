/**
 * Last line of defence for the process: an exception nobody caught (a stream's 'error' with no
 * listener, a throw in a timer or a library callback) or a promise rejection nobody handled is
 * logged with its stack and counted, and the process goes on serving. Node's default would end
 * the process, and with it every other session on this instance, because of one request's fault.
 *
 * Hazard: state touched by the faulting code may be half-updated. The fault is logged at error
 * level so it gets fixed at its cause; this guard only keeps one fault from becoming an outage.
 * Installed by the process entry (runtime/main.ts) only, so in-process tests still fail loudly.
 */

let faults = 0

/** Faults caught by the guard since start (exported as a metric). */
export const uncaughtFaults = (): number => faults

const report = (kind: "uncaughtException" | "unhandledRejection", error: unknown) => {
  faults++
  const line = {
    time: new Date().toISOString(),
    level: "error",
    msg: "uncaught fault; the process keeps serving",
    kind,
    error: error instanceof Error ? error.stack ?? error.message : String(error)
  }
  process.stdout.write(JSON.stringify(line) + "\n")
}

export const installFaultGuard = (): void => {
  process.on("uncaughtException", (error) => report("uncaughtException", error))
  process.on("unhandledRejection", (reason) => report("unhandledRejection", reason))
}
