/**
 * Structured logs: one JSON object per line on stdout, `{time, level, msg, ...fields}`.
 * `Effect.logInfo("message", { field: value })` puts the fields at the top level, and log
 * annotations (the request id, session id) are merged in, so every line can be grepped by id.
 */
import { Cause, Layer, Logger, References } from "effect"
import type { LogLevelName } from "./Config.ts"

const effectLevel: Record<LogLevelName, "Trace" | "Debug" | "Info" | "Warn" | "Error" | "Fatal" | "None"> = {
  trace: "Trace", debug: "Debug", info: "Info", warn: "Warn", error: "Error", fatal: "Fatal", none: "None"
}

export const jsonLogger = Logger.make<unknown, void>(({ cause, date, fiber, logLevel, message }) => {
  const line: Record<string, unknown> = { time: date.toISOString(), level: logLevel.toLowerCase() }
  const parts = Array.isArray(message) ? message : [message]
  const text: Array<string> = []
  for (const part of parts) {
    if (part !== null && typeof part === "object" && !(part instanceof Error)) Object.assign(line, part)
    else text.push(part instanceof Error ? part.message : String(part))
  }
  line.msg = text.join(" ")
  Object.assign(line, fiber.getRef(References.CurrentLogAnnotations))
  if (cause.reasons.length > 0) line.cause = Cause.pretty(cause)
  process.stdout.write(JSON.stringify(line) + "\n")
})

export const loggingLayer = (level: LogLevelName) =>
  Layer.mergeAll(
    Logger.layer([jsonLogger]),
    Layer.succeed(References.MinimumLogLevel, effectLevel[level])
  )
