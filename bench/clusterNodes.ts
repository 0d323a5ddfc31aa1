/**
 * The processes of bench/cluster.ts: a fresh PostgreSQL database (`cluster_<pid>`, dropped at
 * the end), N service instances on it sharing one DATA_DIR, nginx in front configured from
 * deploy/nginx.conf (its upstream policies, with the instances' local ports) and
 * deploy/nginx-locations.conf (included as is), and an https webhook receiver on loopback.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { existsSync } from "node:fs"
import * as fs from "node:fs"
import * as https from "node:https"
import * as net from "node:net"
import { tmpdir } from "node:os"
import * as path from "node:path"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Effect, ManagedRuntime, Redacted } from "effect"
import { SqlClient } from "effect/sql/SqlClient"
import { adminStatement } from "../storage/Database.ts"
import { freePort, root, serviceArgs, startProcess } from "./support.ts"

export const nginxBinary = (): string | undefined =>
  ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx"].find((p) => existsSync(p))

export interface Instance {
  readonly index: number
  readonly port: number
  readonly child: ChildProcess
  readonly log: () => string
}

export interface Query {
  <A extends object>(text: string, params?: ReadonlyArray<unknown>): Promise<ReadonlyArray<A>>
}

/** A database of its own on the server at `url`; `query` runs SQL in it. */
export const freshDatabase = async (url: string) => {
  const name = `cluster_${process.pid}`
  await Effect.runPromise(adminStatement(url, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
  await Effect.runPromise(adminStatement(url, `CREATE DATABASE ${name}`))
  const own = new URL(url)
  own.pathname = `/${name}`
  const runtime = ManagedRuntime.make(PgClient.layer({ url: Redacted.make(own.toString()), maxConnections: 2 }))
  const query: Query = (text, params = []) =>
    runtime.runPromise(Effect.gen(function*() {
      const sql = yield* SqlClient
      return yield* sql.unsafe(text, params)
    })) as never
  const drop = async () => {
    await runtime.dispose()
    await Effect.runPromise(adminStatement(url, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).pipe(Effect.ignore))
  }
  return { url: own.toString(), name, query, drop }
}

/** Starts one instance; its stdout (JSON log lines) is kept for the job-claim counts. */
export const startInstance = async (index: number, port: number, env: Record<string, string>): Promise<Instance> => {
  // The production build, as deployed (built once when stale): three tsx instances took 47 s to
  // start on a loaded 2-core machine, each compiling every module in every thread.
  const child = await startProcess(process.execPath, serviceArgs(), { ...env, PORT: String(port), HOST: "127.0.0.1" }, /"msg":"listening"/)
  let text = ""
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (text += d))
  return { index, port, child, log: () => text }
}

/** `admin.ts` with --json; its last stdout line parsed. */
export const admin = (env: Record<string, string>, args: ReadonlyArray<string>) =>
  new Promise<Record<string, string>>((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", "runtime/admin.ts", ...args, "--json"], { cwd: root, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "inherit"] })
    let text = ""
    child.stdout!.setEncoding("utf8").on("data", (s: string) => (text += s))
    child.once("exit", (code) => (code === 0 ? resolve(JSON.parse(text.trim().split("\n").at(-1)!)) : reject(new Error(`admin ${args[0]} exited ${code}`))))
  })

/**
 * The deployed nginx.conf with local names: the instances' ports for `speechN:8080`, files in
 * `dir`, the locations file from the repository, and an `x-upstream` response header so the
 * bench knows which instance answered (for excusing requests that were on a killed instance).
 */
export const nginxConfig = (dir: string, listenPort: number, ports: ReadonlyArray<number>): string => {
  let conf = fs.readFileSync(path.join(root, "deploy/nginx.conf"), "utf8")
  const servers = /^(\s*)server speech1:8080(.*)$/gmu
  conf = conf.replace(/^\s*server speech[2-9]:8080.*\n/gmu, "")
  conf = conf.replace(servers, (_, indent: string, rest: string) => ports.map((p) => `${indent}server 127.0.0.1:${p}${rest}`).join("\n"))
  const swaps: Array<[RegExp, string]> = [
    [/^worker_processes .*$/mu, "worker_processes 2;"],
    [/^error_log .*$/mu, `error_log ${dir}/error.log warn;`],
    [/^pid .*$/mu, `pid ${dir}/nginx.pid;`],
    [/worker_connections \d+;/u, "worker_connections 1024;"],
    [/access_log \/dev\/stdout;/u, `access_log off;\n    client_body_temp_path ${dir}/body;\n    proxy_temp_path ${dir}/proxy;`],
    [/listen 8080;/u, `listen 127.0.0.1:${listenPort};\n        add_header x-upstream $upstream_addr always;`],
    [/include \/etc\/nginx\/nginx-locations\.conf;/u, `include ${path.join(root, "deploy/nginx-locations.conf")};`]
  ]
  for (const [from, to] of swaps) {
    if (!from.test(conf)) throw new Error(`deploy/nginx.conf changed: no ${from}`)
    conf = conf.replace(from, to)
  }
  return conf
}

export const startNginx = async (listenPort: number, ports: ReadonlyArray<number>) => {
  const binary = nginxBinary()
  if (binary === undefined) throw new Error("nginx is not installed")
  const dir = fs.mkdtempSync(path.join(tmpdir(), "speech-cluster-nginx-"))
  for (const sub of ["body", "proxy"]) fs.mkdirSync(path.join(dir, sub))
  // nginx started as root runs its workers as nobody; they write the temp directories.
  for (const d of [dir, path.join(dir, "body"), path.join(dir, "proxy")]) fs.chmodSync(d, 0o777)
  fs.writeFileSync(path.join(dir, "nginx.conf"), nginxConfig(dir, listenPort, ports))
  const child = spawn(binary, ["-p", dir, "-c", path.join(dir, "nginx.conf"), "-g", "daemon off;"], { stdio: ["ignore", "ignore", "pipe"] })
  let stderr = ""
  child.stderr!.on("data", (d) => (stderr += d))
  for (let i = 0; i < 200; i++) {
    if (child.exitCode !== null) throw new Error(`nginx exited: ${stderr}`)
    if (await canConnect(listenPort)) {
      return {
        url: `http://127.0.0.1:${listenPort}`,
        stop: async () => {
          if (child.exitCode === null) await new Promise<void>((r) => (child.once("exit", () => r()), child.kill("SIGTERM")))
          fs.rmSync(dir, { recursive: true, force: true })
        }
      }
    }
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error(`nginx did not start: ${stderr}`)
}

const canConnect = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = net.connect(port, "127.0.0.1", () => (s.destroy(), resolve(true)))
    s.on("error", () => resolve(false))
  })

export interface Delivery {
  readonly eventId: string
  readonly jobId: string
  readonly state: string
}

/** An https receiver with a throwaway certificate (the instances trust it via URL_FETCH_CA_FILE). */
export const startWebhookReceiver = async () => {
  const dir = fs.mkdtempSync(path.join(tmpdir(), "speech-cluster-hooks-"))
  const certFile = path.join(dir, "cert.pem")
  const keyFile = path.join(dir, "key.pem")
  execFileSync("openssl", [
    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", keyFile, "-out", certFile,
    "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"
  ], { stdio: ["ignore", "ignore", "pipe"] })
  const received: Array<Delivery> = []
  const server = https.createServer({ cert: fs.readFileSync(certFile), key: fs.readFileSync(keyFile) }, (req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { event_id: string; data: { job_id: string; state: string } }
        received.push({ eventId: body.event_id, jobId: body.data.job_id, state: body.data.state })
      } catch {
        received.push({ eventId: "(unparsable)", jobId: "", state: "" })
      }
      res.writeHead(200).end("ok")
    })
  })
  const port = await freePort()
  await new Promise<void>((r) => server.listen(port, "127.0.0.1", () => r()))
  return {
    url: `https://127.0.0.1:${port}/hooks`,
    certFile,
    received,
    stop: async () => {
      await new Promise<void>((r) => (server.close(() => r()), server.closeAllConnections()))
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
}
