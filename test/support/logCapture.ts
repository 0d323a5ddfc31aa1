/**
 * The service's log lines (runtime/Logging.ts: one JSON object per line on stdout) written
 * while `during` runs, for tests of what a request logs. Other output passes through untouched.
 */
export type LogLine = Record<string, unknown> & { readonly level?: string; readonly msg?: string }

export const captureLog = async <A>(during: () => Promise<A>): Promise<{ readonly result: A; readonly lines: ReadonlyArray<LogLine> }> => {
  const lines: Array<LogLine> = []
  const write = process.stdout.write
  process.stdout.write = ((chunk: unknown, ...rest: Array<unknown>) => {
    const text = typeof chunk === "string" ? chunk : Buffer.from(chunk as Uint8Array).toString("utf8")
    let ours = true
    for (const line of text.split("\n").filter((l) => l !== "")) {
      try {
        lines.push(JSON.parse(line) as LogLine)
      } catch {
        ours = false
      }
    }
    return ours ? true : (write as (...a: Array<unknown>) => boolean).call(process.stdout, chunk, ...rest)
  }) as typeof process.stdout.write
  try {
    const result = await during()
    return { result, lines }
  } finally {
    process.stdout.write = write
  }
}
