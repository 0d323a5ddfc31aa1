/** Server-sent events in tests: a whole `text/event-stream` body as its events. */

/** Parses a whole SSE body into its events, checking the framing on the way. */
export const sseEvents = (text: string): Array<{ event: string; data: Record<string, any> }> =>
  text.split("\n\n").filter((b) => b !== "").map((block) => {
    const lines = block.split("\n")
    const event = lines.find((l) => l.startsWith("event: "))?.slice(7)
    const data = lines.find((l) => l.startsWith("data: "))?.slice(6)
    if (event === undefined || data === undefined) throw new Error(`not an SSE event: ${JSON.stringify(block)}`)
    return { event, data: JSON.parse(data) as Record<string, any> }
  })
