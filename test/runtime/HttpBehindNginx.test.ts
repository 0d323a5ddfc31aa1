/**
 * The service behind a real nginx reverse proxy, configured as README says. uWebSockets.js
 * 20.51 only parses HTTP/1.1 request lines (HTTP/1.0 gets its fixed 505), and nginx's
 * `proxy_pass` speaks HTTP/1.0 unless told otherwise: `proxy_http_version 1.1` is required.
 * Both are checked here: the default gives 505, the documented setting serves JSON, HEAD,
 * streamed audio, uploads and an early refusal of an upload.
 *
 * Skipped, saying so, only when no nginx binary exists (scripts/setup.sh installs nginx-light).
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process"
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import * as net from "node:net"
import { tmpdir } from "node:os"
import * as path from "node:path"
import t, { type Test } from "tap"
import { startTestService } from "../support/service.ts"

const nginxBinary = ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx"].find((p) => existsSync(p))
  ?? (() => {
    try {
      return execFileSync("sh", ["-c", "command -v nginx"]).toString().trim() || undefined
    } catch {
      return undefined
    }
  })()

if (nginxBinary === undefined) {
  t.test("nginx behind-proxy test", { skip: "nginx is not installed (apt-get install nginx-light, or scripts/setup.sh as root)" }, () => {})
} else {
  const service = await startTestService(t)
  const { apiKey } = await service.newUser(1_000_000)
  const upstream = new URL(service.siteUrl)
  const upstreamAddr = `127.0.0.1:${upstream.port}`

  const freePort = () =>
    new Promise<number>((resolve) => {
      const s = net.createServer().listen(0, "127.0.0.1", () => {
        const { port } = s.address() as net.AddressInfo
        s.close(() => resolve(port))
      })
    })

  /** Starts nginx in the foreground with `proxyLines` inside `location /`; returns its URL. */
  const startNginx = async (t: Test, proxyLines: string): Promise<string> => {
    const dir = mkdtempSync(path.join(tmpdir(), "speech-nginx-"))
    for (const sub of ["body", "proxy", "logs"]) mkdirSync(path.join(dir, sub))
    // nginx started as root runs its workers as nobody; they write the temp directories.
    chmodSync(dir, 0o777)
    for (const sub of ["body", "proxy", "logs"]) chmodSync(path.join(dir, sub), 0o777)
    const port = await freePort()
    writeFileSync(path.join(dir, "nginx.conf"), `
      worker_processes 1;
      pid ${dir}/nginx.pid;
      error_log ${dir}/logs/error.log warn;
      events { worker_connections 64; }
      http {
        access_log off;
        client_body_temp_path ${dir}/body;
        proxy_temp_path ${dir}/proxy;
        client_max_body_size 200m;
        server {
          listen 127.0.0.1:${port};
          location / {
            proxy_pass http://${upstreamAddr};
            ${proxyLines}
          }
        }
      }
    `)
    const child: ChildProcess = spawn(nginxBinary, ["-p", dir, "-c", path.join(dir, "nginx.conf"), "-g", "daemon off;"], { stdio: ["ignore", "ignore", "pipe"] })
    let stderr = ""
    child.stderr!.on("data", (d) => (stderr += d))
    t.teardown(async () => {
      if (child.exitCode === null) {
        await new Promise<void>((resolve) => {
          child.once("exit", () => resolve())
          child.kill("SIGTERM")
        })
      }
      rmSync(dir, { recursive: true, force: true })
    })
    // Ready once it accepts connections.
    for (let i = 0; i < 100; i++) {
      if (child.exitCode !== null) throw new Error(`nginx exited: ${stderr}`)
      const up = await new Promise<boolean>((resolve) => {
        const s = net.connect(port, "127.0.0.1", () => {
          s.destroy()
          resolve(true)
        })
        s.on("error", () => resolve(false))
      })
      if (up) return `http://127.0.0.1:${port}`
      await new Promise((r) => setTimeout(r, 50))
    }
    throw new Error(`nginx did not start: ${stderr}`)
  }

  t.test("nginx's default proxy_pass (HTTP/1.0 upstream) gets uWS's 505", async (t) => {
    const site = await startNginx(t, "")
    const res = await fetch(`${site}/api/v1/models`)
    t.equal(res.status, 505, "uWS refuses HTTP/1.0; README tells to set proxy_http_version 1.1")
    await res.arrayBuffer()
  })

  t.test("with proxy_http_version 1.1 as README says: JSON, HEAD, streamed audio, uploads, early refusals", async (t) => {
    const site = await startNginx(t, `
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_buffering off;
            proxy_request_buffering off;`)
    const models = await fetch(`${site}/api/v1/models`, { headers: { "xi-api-key": apiKey } })
    t.equal(models.status, 200)
    t.ok(Array.isArray(await models.json()))

    const head = await fetch(`${site}/api/v1/models`, { method: "HEAD", headers: { "xi-api-key": apiKey } })
    t.equal(head.status, 200)
    t.equal((await head.arrayBuffer()).byteLength, 0, "HEAD has no body")
    // The keep-alive connection nginx holds to the service still works after the HEAD.
    t.equal((await fetch(`${site}/api/v1/models`, { headers: { "xi-api-key": apiKey } })).status, 200)

    const tts = await fetch(`${site}/api/v1/text-to-speech/emma-en/stream?output_format=pcm_16000`, {
      method: "POST",
      headers: { "xi-api-key": apiKey, "content-type": "application/json" },
      body: JSON.stringify({ text: "Hello there." })
    })
    t.equal(tts.status, 200)
    t.ok((await tts.arrayBuffer()).byteLength > 1000, "streamed audio through the proxy")

    const refused = new FormData()
    refused.append("model_id", "scribe_v1")
    refused.append("file", new Blob([Buffer.alloc(3 * 1024 * 1024, 1)], { type: "audio/wav" }), "a.wav")
    const res = await fetch(`${site}/api/v1/speech-to-text`, { method: "POST", headers: { "xi-api-key": "sk_wrong" }, body: refused })
    t.equal(res.status, 401, "an early refusal of an upload passes the proxy")
    t.match(await res.json(), { detail: { status: "invalid_api_key" } })
  })
}
