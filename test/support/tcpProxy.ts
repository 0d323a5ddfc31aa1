/**
 * A TCP proxy (node:net) that a test puts between the service and a server (PostgreSQL) and
 * can drop and restore on the same port:
 * - "refuse": every connection is destroyed (RST) and nothing listens: new connects get
 *   ECONNREFUSED at once (the database host is up, the database is down);
 * - "blackhole": every connection is destroyed and new connects are accepted but never answered
 *   (a network partition: only the client's own timeouts end the wait);
 * - "stall": like "blackhole", but open connections stay open and silent too (a partition
 *   seen from a pooled connection in the middle of a query).
 * Closed in the test's teardown.
 */
import * as net from "node:net"

export interface TcpProxy {
  readonly port: number
  /** Destroys every relayed connection and stops relaying (see the modes above). */
  readonly drop: (mode?: "refuse" | "blackhole" | "stall") => Promise<void>
  /** Relays again on the same port. */
  readonly restore: () => Promise<void>
  /** Connections opened through the proxy so far (for assertions that the client reconnected). */
  readonly connections: () => number
  readonly close: () => Promise<void>
}

export const startTcpProxy = async (
  t: { teardown: (fn: () => unknown) => void },
  target: { host: string; port: number }
): Promise<TcpProxy> => {
  const sockets = new Set<net.Socket>()
  let state: "up" | "refuse" | "blackhole" | "stall" = "up"
  const relayed: Array<[net.Socket, net.Socket]> = []
  let opened = 0
  let server: net.Server | undefined
  let port = 0

  const track = (s: net.Socket) => {
    sockets.add(s)
    s.on("close", () => sockets.delete(s))
    s.on("error", () => s.destroy())
  }
  const onConnection = (client: net.Socket) => {
    track(client)
    if (state !== "up") return // held open, never answered
    opened++
    const upstream = net.connect(target.port, target.host)
    track(upstream)
    client.pipe(upstream).pipe(client)
    relayed.push([client, upstream])
    client.on("close", () => upstream.destroy())
    upstream.on("close", () => client.destroy())
  }
  const listen = () =>
    new Promise<void>((resolve, reject) => {
      server = net.createServer(onConnection)
      server.once("error", reject)
      server.listen(port, "127.0.0.1", () => {
        port = (server!.address() as net.AddressInfo).port
        resolve()
      })
    })
  const stopListening = () =>
    new Promise<void>((resolve) => {
      const s = server
      server = undefined
      if (s === undefined) return resolve()
      s.close(() => resolve())
    })
  const destroyAll = () => {
    for (const s of sockets) s.resetAndDestroy()
    sockets.clear()
  }

  await listen()
  const proxy: TcpProxy = {
    get port() {
      return port
    },
    drop: async (mode = "refuse") => {
      state = mode
      if (mode === "stall") {
        // Nothing more is relayed either way; the sockets stay open.
        for (const [client, upstream] of relayed.splice(0)) {
          client.unpipe(upstream)
          upstream.unpipe(client)
          client.pause()
          upstream.pause()
        }
        return
      }
      destroyAll()
      if (mode === "refuse") await stopListening()
      else if (server === undefined) await listen()
    },
    restore: async () => {
      relayed.length = 0
      destroyAll() // held connections: the client sees them end and reconnects
      state = "up"
      if (server === undefined) await listen()
    },
    connections: () => opened,
    close: async () => {
      destroyAll()
      await stopListening()
    }
  }
  t.teardown(() => proxy.close())
  return proxy
}
