/**
 * Process entry: read the configuration, start the service, and shut down gracefully on SIGTERM
 * or SIGINT (stop accepting, let in-flight requests and streams finish up to SHUTDOWN_GRACE_MS,
 * then close the worker pool and the database). A second signal exits at once. Faults nobody
 * caught are logged and counted, and the process goes on (runtime/FaultGuard.ts).
 */
import { Effect, Exit, Scope } from "effect"
import { AppConfigFromEnv, AppConfig, InvalidConfigError } from "./Config.ts"
import { installFaultGuard } from "./FaultGuard.ts"
import { runService } from "./Service.ts"

// Before anything else runs: one request's uncaught fault must never end every other session.
installFaultGuard()

const program = Effect.gen(function*() {
  const config = yield* AppConfig
  const scope = yield* Scope.make()
  const service = yield* runService(config).pipe(Scope.provide(scope))
  const signal = yield* Effect.callback<string>((resume) => {
    const on = (name: string) => () => resume(Effect.succeed(name))
    process.once("SIGTERM", on("SIGTERM"))
    process.once("SIGINT", on("SIGINT"))
  })
  process.once(signal as NodeJS.Signals, () => process.exit(130))
  process.stdout.write(JSON.stringify({ time: new Date().toISOString(), level: "info", msg: "shutting down", signal }) + "\n")
  yield* service.drain
  yield* Scope.close(scope, Exit.void)
  process.stdout.write(JSON.stringify({ time: new Date().toISOString(), level: "info", msg: "stopped" }) + "\n")
}).pipe(Effect.provide(AppConfigFromEnv))

Effect.runPromise(program).then(
  () => process.exit(0),
  (error: unknown) => {
    if (error instanceof InvalidConfigError) {
      process.stderr.write(`speech-service: ${error.message}\n`)
    } else {
      process.stderr.write(`speech-service: failed to start: ${error instanceof Error ? error.stack ?? error.message : String(error)}\n`)
    }
    process.exit(1)
  }
)
