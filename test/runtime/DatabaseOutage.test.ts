/**
 * The database goes away under a running service (issue 9 item 9): requests that need it answer
 * 503 `database_unavailable` (not 500), requests that do not need it keep working, and the
 * service recovers by itself when the database is back.
 *
 * PostgreSQL only: the service reaches it through a TCP relay in this test that can be cut
 * (every connection reset, nothing listening) and restored. The embedded database lives inside
 * the process and cannot be cut from outside.
 */
import * as net from "node:net"
import t from "tap"
import { startTestService } from "../support/service.ts"
import { isolatedDatabaseUrl } from "../support/database.ts"
import { captureLog } from "../support/logCapture.ts"

const pg = process.env.DATABASE_URL
if (pg === undefined || pg === "") {
  t.test("database outage", { skip: "needs DATABASE_URL (PostgreSQL): the embedded database cannot be cut from outside" }, () => {})
} else {
  const target = new URL(pg)

  /** A TCP relay to PostgreSQL that can be cut and restored on the same port. */
  const relay = () => {
    const sockets = new Set<net.Socket>()
    let server: net.Server | undefined
    let port = 0
    const listen = () =>
      new Promise<void>((resolve) => {
        server = net.createServer((client) => {
          const upstream = net.connect(Number(target.port || 5432), target.hostname)
          sockets.add(client).add(upstream)
          client.pipe(upstream).pipe(client)
          const drop = () => {
            client.destroy()
            upstream.destroy()
            sockets.delete(client)
            sockets.delete(upstream)
          }
          client.on("error", drop).on("close", drop)
          upstream.on("error", drop).on("close", drop)
        })
        server.listen(port, "127.0.0.1", () => {
          port = (server!.address() as net.AddressInfo).port
          resolve()
        })
      })
    return {
      listen,
      get port() {
        return port
      },
      cut: () =>
        new Promise<void>((resolve) => {
          for (const s of sockets) s.resetAndDestroy()
          sockets.clear()
          server!.close(() => resolve())
        })
    }
  }

  const link = relay()
  await link.listen()
  const url = new URL(await isolatedDatabaseUrl(t, pg))
  url.hostname = "127.0.0.1"
  url.port = String(link.port)
  // warn: the outage's one line is seen, and a stack written at error would be too.
  const service = await startTestService(t, { DATABASE_URL: url.toString(), LOG_LEVEL: "warn" })
  const user = await service.newUser(1_000)
  t.teardown(() => link.cut().catch(() => {}))

  const get = (path: string, key?: string) =>
    fetch(`${service.base}${path}`, { headers: key !== undefined ? { "xi-api-key": key } : {} })

  t.test("with the database cut: 503 database_unavailable, and the rest keeps serving", async (t) => {
    t.equal((await get("/user/subscription", user.apiKey)).status, 200, "works while the database is there")
    await link.cut()
    // The balance is never cached: this reads the database.
    const requestId = "outage-1"
    const { result: res, lines } = await captureLog(() =>
      fetch(`${service.base}/user/subscription`, { headers: { "xi-api-key": user.apiKey, "x-request-id": requestId } }))
    t.equal(res.status, 503, "503 while the database is unreachable")
    // An outage is expected in operation: one warning per request, no stack (issue 38 item 5).
    const logged = lines.filter((l) => l.requestId === requestId)
    t.match(logged, [{ level: "warn", status: 503, code: "database_unavailable", reason: String }], "one warning naming the outage")
    t.equal(logged.length, 1)
    t.notOk(logged.some((l) => l.cause !== undefined || /\n\s+at /.test(JSON.stringify(l))), "no stack")
    const body = await res.json() as { detail: { status: string; message: string } }
    t.equal(body.detail.status, "database_unavailable")
    t.notMatch(body.detail.message, /ECONNREFUSED|127\.0\.0\.1|postgres/i, "no connection details leak")
    t.equal((await get("/models")).status, 200, "routes without the database still answer")
    t.equal((await fetch(`${service.siteUrl}/healthz`)).status, 200, "liveness holds")
    t.equal((await fetch(`${service.siteUrl}/readyz`)).status, 503, "readiness reports the database")
  })

  t.test("the service recovers when the database is back", async (t) => {
    await link.listen()
    let status = 0
    for (let i = 0; i < 50 && status !== 200; i++) {
      status = (await get("/user/subscription", user.apiKey)).status
      if (status !== 200) await new Promise((r) => setTimeout(r, 200))
    }
    t.equal(status, 200, "answers again once PostgreSQL is reachable")
  })
}
