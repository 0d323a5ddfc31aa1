/**
 * Speech-to-text URL input (`cloud_storage_url` / `source_url`) as an outsider probing the
 * server's network meets it, over HTTP against the whole service in this process.
 *
 * A real https server on loopback serves a WAV, and both services trust its certificate
 * (URL_FETCH_CA_FILE), so any loopback spelling that slipped past the address guard would come
 * back as a transcript. The strict service (the default: public addresses only) must refuse
 * every spelling before connecting; and every way a fetch can fail (refused address, closed
 * port, a port that speaks no TLS, DNS failure, non-200, redirect loop) must give the same
 * answer, byte for byte, so the errors cannot be used to map ports.
 */
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import * as https from "node:https"
import * as net from "node:net"
import t, { type Test } from "tap"
import { scratchDir } from "../engines/asr/speechFixtures.ts"
import { startTestService, type TestService } from "../support/service.ts"
import { selfSignedCert } from "../support/selfSignedCert.ts"

const dir = scratchDir(t, "speech-stt-url-")

// The certificate names every loopback spelling a client can reach, so that a spelling that
// got through would really fetch (made before the services start: they read the CA file then).
const { certFile, keyFile } = selfSignedCert(dir, ["IP:127.0.0.1", "IP:::1", "IP:::ffff:127.0.0.1", "IP:0.0.0.0", "DNS:localhost"])

/** Private addresses allowed (tests, private deployments). */
const permissive = await startTestService(t, { WORKERS: "1", URL_FETCH_ALLOW_PRIVATE: "true", URL_FETCH_CA_FILE: certFile })
/** The default: public addresses only, yet trusting the loopback server's certificate. */
const strict = await startTestService(t, { WORKERS: "1", URL_FETCH_CA_FILE: certFile })
const owner = await permissive.newUser(1_000_000)
const stranger = await strict.newUser(10_000)

/** The one answer for every fetch that was refused or failed. */
const GENERIC = JSON.stringify({ detail: { status: "url_unreachable", message: "the URL could not be fetched" } })

const stt = (target: TestService, apiKey: string, fields: Record<string, string>) => {
  const form = new FormData()
  form.append("model_id", "scribe_v1")
  for (const [name, value] of Object.entries(fields)) form.append(name, value)
  return fetch(`${target.base}/speech-to-text`, { method: "POST", headers: { "xi-api-key": apiKey }, body: form })
}
const strictStt = (url: string, field = "cloud_storage_url") => stt(strict, stranger.apiKey, { [field]: url })
const permissiveStt = (url: string, field = "cloud_storage_url") => stt(permissive, owner.apiKey, { [field]: url })

/** Status and body text of an answer. */
const answer = async (res: Response) => ({ status: res.status, body: await res.text() })

const speech = await (async () => {
  const res = await fetch(`${permissive.base}/text-to-speech/emma-en?output_format=wav_16000`, {
    method: "POST",
    headers: { "xi-api-key": owner.apiKey, "content-type": "application/json" },
    body: JSON.stringify({ text: "The weather is nice today and we are going to the park." })
  })
  if (res.status !== 200) throw new Error(`text-to-speech answered ${res.status}`)
  return new Uint8Array(await res.arrayBuffer())
})()

/** An https media server on `host`, counting TCP connections (a refused URL must make none). */
const mediaServer = async (t: Test, host: string) => {
  let connections = 0
  const server = https.createServer({ key: readFileSync(keyFile), cert: readFileSync(certFile) }, (req, res) => {
    if (req.url === "/speech.wav") {
      res.writeHead(200, { "content-type": "audio/wav", "content-length": speech.length })
      res.end(speech)
    } else if (req.url === "/moved") {
      res.writeHead(302, { location: "/speech.wav" }).end()
    } else if (req.url === "/loop") {
      res.writeHead(302, { location: "/loop" }).end()
    } else if (req.url === "/to-http") {
      res.writeHead(302, { location: `http://127.0.0.1:${port}/speech.wav` }).end()
    } else res.writeHead(404).end()
  })
  server.on("connection", () => connections++)
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(0, host, resolve)
  })
  const port = (server.address() as net.AddressInfo).port
  t.teardown(() => {
    server.closeAllConnections()
    return new Promise<void>((resolve) => server.close(() => resolve()))
  })
  return { port, connections: () => connections }
}

/** A port on loopback where nothing listens. */
const closedPort = async (): Promise<number> => {
  const s = net.createServer()
  await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve))
  const port = (s.address() as net.AddressInfo).port
  await new Promise<void>((resolve) => s.close(() => resolve()))
  return port
}

/** A TCP port that answers with plain text, not TLS. */
const plainPort = async (t: Test): Promise<number> => {
  const sockets = new Set<net.Socket>()
  const s = net.createServer((socket) => {
    sockets.add(socket)
    socket.on("error", () => {})
    socket.end("SSH-2.0-OpenSSH_9.6\r\n")
  })
  await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve))
  t.teardown(() => {
    for (const socket of sockets) socket.destroy()
    return new Promise<void>((resolve) => s.close(() => resolve()))
  })
  return (s.address() as net.AddressInfo).port
}

t.test("URL input: the bypass https://[::ffff:127.0.0.1]:PORT/ is refused before connecting", async (t) => {
  const media = await mediaServer(t, "127.0.0.1")
  const got = await answer(await strictStt(`https://[::ffff:127.0.0.1]:${media.port}/speech.wav`))
  t.same(got, { status: 400, body: GENERIC }, "the generic answer, not a transcript")
  t.equal(media.connections(), 0, "the media server never saw a connection")
})

t.test("URL input: every loopback spelling is refused with the generic answer", async (t) => {
  const media = await mediaServer(t, "127.0.0.1")
  const p = media.port
  const spellings = [
    "127.0.0.1", "127.1", "127.0.1", "2130706433", "0x7f000001", "0x7f.1", "0177.0.0.1", "0177.1",
    "017700000001", "127.000.000.001", "127.0.0.1.", "0", "0.0.0.0",
    "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[::FFFF:7F00:0001]", "[0:0:0:0:0:ffff:127.0.0.1]",
    "[0000:0000:0000:0000:0000:ffff:7f00:0001]", "[::127.0.0.1]", "[64:ff9b::127.0.0.1]",
    "[64:ff9b:1::7f00:1]", "[2002:7f00:1::1]", "[2001:0:4136:e378:8000:63bf:80ff:fffe]",
    "[::ffff:0:127.0.0.1]", "[::1]", "[::]", "localhost", "LOCALHOST.", "localhost."
  ]
  for (const spelling of spellings) {
    for (const field of ["cloud_storage_url", "source_url"]) {
      const got = await answer(await strictStt(`https://${spelling}:${p}/speech.wav`, field))
      t.same(got, { status: 400, body: GENERIC }, `${field} https://${spelling}:${p}/`)
    }
  }
  t.equal(media.connections(), 0, "the media server never saw a connection")

  // The same over IPv6 loopback, where the machine has it.
  const v6 = await mediaServer(t, "::1").catch(() => undefined)
  if (v6 !== undefined) {
    for (const spelling of ["[::1]", "[0:0:0:0:0:0:0:1]", "[::0:1]", "localhost"]) {
      t.same(await answer(await strictStt(`https://${spelling}:${v6.port}/speech.wav`)), { status: 400, body: GENERIC }, `https://${spelling}:${v6.port}/`)
    }
    t.equal(v6.connections(), 0, "the IPv6 media server never saw a connection")
  }
  t.equal(await Effect.runPromise(strict.users.balance(stranger.userId)), 10_000, "refusals cost nothing")
})

t.test("URL input: refused, closed, open-but-not-TLS, DNS failure, non-200 and loops are indistinguishable", async (t) => {
  const media = await mediaServer(t, "127.0.0.1")
  const closed = await closedPort()
  const plain = await plainPort(t)
  const answers: Array<[string, { status: number; body: string }]> = []
  // What an outsider tried: the bypass spelling on a closed and on an open port.
  answers.push(["strict: bypass spelling, closed port", await answer(await strictStt(`https://[::ffff:127.0.0.1]:${closed}/x.wav`))])
  answers.push(["strict: bypass spelling, open port", await answer(await strictStt(`https://[::ffff:127.0.0.1]:${media.port}/speech.wav`))])
  answers.push(["strict: bypass spelling, plain TCP port", await answer(await strictStt(`https://[::ffff:127.0.0.1]:${plain}/x.wav`))])
  answers.push(["strict: loopback, closed port", await answer(await strictStt(`https://127.0.0.1:${closed}/x.wav`))])
  answers.push(["strict: DNS failure", await answer(await strictStt(`https://nonexistent.invalid/x.wav`))])
  // Where connections are allowed, each real failure.
  answers.push(["permissive: closed port", await answer(await permissiveStt(`https://127.0.0.1:${closed}/x.wav`))])
  answers.push(["permissive: plain TCP port (TLS fails)", await answer(await permissiveStt(`https://127.0.0.1:${plain}/x.wav`))])
  answers.push(["permissive: DNS failure", await answer(await permissiveStt(`https://nonexistent.invalid/x.wav`))])
  answers.push(["permissive: 404", await answer(await permissiveStt(`https://127.0.0.1:${media.port}/missing.wav`))])
  answers.push(["permissive: redirect loop", await answer(await permissiveStt(`https://127.0.0.1:${media.port}/loop`))])
  answers.push(["permissive: redirect to http", await answer(await permissiveStt(`https://127.0.0.1:${media.port}/to-http`))])
  for (const [label, got] of answers) t.same(got, { status: 400, body: GENERIC }, label)
  t.equal(media.connections() > 0, true, "the permissive service did connect")
})

t.test("URL input with URL_FETCH_ALLOW_PRIVATE: https fetch, one redirect, bad syntax named", async (t) => {
  const media = await mediaServer(t, "127.0.0.1")
  const origin = `https://127.0.0.1:${media.port}`
  const form = new FormData()
  form.append("model_id", "scribe_v1")
  form.append("file", new Blob([speech], { type: "audio/wav" }), "speech.wav")
  const uploaded = (await (await fetch(`${permissive.base}/speech-to-text`, { method: "POST", headers: { "xi-api-key": owner.apiKey }, body: form })).json()) as { text: string }
  t.ok(uploaded.text.length > 0, `the upload transcribes: ${uploaded.text}`)

  for (const [field, url] of [["cloud_storage_url", `${origin}/speech.wav`], ["source_url", `${origin}/moved`]] as const) {
    const res = await permissiveStt(url, field)
    t.equal(res.status, 200, `${field} ${url} answers 200`)
    t.equal(((await res.json()) as { text: string }).text, uploaded.text, `${field}: the same transcript as the upload`)
  }

  // Syntax errors reveal nothing about the network, so they keep a specific message.
  for (const target of [permissiveStt, strictStt]) {
    for (const url of [`http://127.0.0.1:${media.port}/speech.wav`, "not a url", `https://user:secret@127.0.0.1:1/x.wav`, "ftp://example.com/a.wav"]) {
      const res = await target(url)
      t.equal(res.status, 400, `${url} answers 400`)
      const body = (await res.json()) as { detail: { status: string; message: string } }
      t.equal(body.detail.status, "invalid_url", `${url}: invalid_url`)
      t.type(body.detail.message, "string")
    }
  }
})
