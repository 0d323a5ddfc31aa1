/**
 * A plain WebSocket client of the realtime speech-to-text endpoint for tests that need a service
 * configured for one bound (the SDK's client hides the close and the messages' order).
 */
import { connectWs, isRefused, type WsClient } from "./wsClient.ts"

/** Opens `GET {base}/speech-to-text/realtime?model_id=m{query}` with the key in the header; throws when refused. */
export const openRealtime = async (base: string, apiKey: string, query = ""): Promise<WsClient> => {
  const ws = await connectWs(`${base}/speech-to-text/realtime?model_id=m${query}`, { "xi-api-key": apiKey })
  if (isRefused(ws)) throw new Error(`refused: ${ws.status}`)
  return ws
}

/** The message types up to `type` or the close (`close N`), partial transcripts left out. */
export const messageTypesUntil = async (ws: WsClient, type: string): Promise<Array<string>> => {
  const seen: Array<string> = []
  for (;;) {
    const m = await ws.nextJson()
    if (m.message_type !== "partial_transcript") seen.push(m.message_type ?? `close ${m.close}`)
    if (m.message_type === type || "close" in m) return seen
  }
}

/**
 * Opens sessions until one starts (its `session_started` read) while the answer is
 * `resource_exhausted`: a closed session's recognizer place is given back on its worker thread
 * a moment after the socket closes, so a service with one place may still refuse the next.
 */
export const openStarted = async (base: string, apiKey: string, query = ""): Promise<WsClient> => {
  for (let attempt = 0; attempt < 200; attempt++) {
    const ws = await openRealtime(base, apiKey, query)
    const first = await ws.nextJson()
    if (first.message_type === "session_started") return ws
    if (first.message_type !== "resource_exhausted") throw new Error(`not started: ${JSON.stringify(first)}`)
    await ws.nextJson() // its close
  }
  throw new Error("no recognizer place came free in 200 attempts")
}
