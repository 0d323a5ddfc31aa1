/**
 * Multipart bodies as a fuzzer writes them, beyond test/protocol/MultipartRobustness.test.ts
 * (which covers random part lists, cuts and disconnects with one fixed boundary): random and
 * malformed boundaries, garbage part headers, random field/file mixes with random names and
 * values (NUL, labels that are not JSON), every kind of cut of a body sent whole and half-closed,
 * and sizes at the limits (256 KiB fields, 10 MB voice samples). A complete request always gets a
 * 4xx with the spec's error body, never a 5xx or no answer; the server keeps answering and keeps
 * no temporary file.
 */
import fc from "fast-check"
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import t from "tap"
import { startTestService } from "../support/service.ts"

const service = await startTestService(t)
const user = await service.newUser(1_000_000)
const port = Number(new URL(service.base).port)
const tmpDir = path.join(service.dataDir, "tmp")
const ROUTES = ["/api/v1/speech-to-text", "/api/v1/voices/add", "/api/v1/voices/vc_x/edit"] as const

interface Sent {
  readonly status: number
  readonly text: string
}

/**
 * One request on a raw socket with `contentType` as given; the client half-closes after `send`
 * bytes of the body (all by default). Resolves with the status (0: none) and what came back.
 */
const raw = (route: string, contentType: string, body: Buffer, send = body.length): Promise<Sent> =>
  new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1")
    let text = ""
    let settled = false
    const done = () => {
      if (settled) return
      settled = true
      socket.destroy()
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), text })
    }
    socket.on("data", (d) => {
      text += d.toString("latin1")
      const head = text.indexOf("\r\n\r\n")
      const length = /\r\ncontent-length: (\d+)/i.exec(text)?.[1]
      if (head >= 0 && length !== undefined && text.length >= head + 4 + Number(length)) done()
    })
    socket.on("error", done)
    socket.on("close", done)
    socket.on("connect", () => {
      socket.write(`POST ${route} HTTP/1.1\r\nhost: x\r\nxi-api-key: ${user.apiKey}\r\ncontent-type: ${contentType}\r\ncontent-length: ${body.length}\r\n\r\n`)
      socket.write(body.subarray(0, send), () => {
        if (send < body.length) socket.end()
      })
      setTimeout(done, 20_000).unref()
    })
  })

const leftovers = () => (fs.existsSync(tmpDir) ? fs.readdirSync(tmpDir) : [])

/** The server answers and holds no upload file (cleanup may trail a cut request a little). */
const checkServer = async () => {
  const res = await fetch(`${service.siteUrl}/healthz`)
  if (res.status !== 200) throw new Error(`server stopped answering (${res.status})`)
  for (let i = 0; i < 40 && leftovers().length > 0; i++) await new Promise((r) => setTimeout(r, 150))
  if (leftovers().length > 0) throw new Error(`temporary files left: ${leftovers().join(", ")}`)
}

/** A 4xx whose body is `{detail: {status, message}}`. */
const check4xx = (r: Sent, what: string) => {
  if (r.status < 400 || r.status >= 500) throw new Error(`${what}: status ${r.status}: ${r.text.slice(0, 300)}`)
  const body = r.text.slice(r.text.indexOf("\r\n\r\n") + 4)
  let json: any
  try {
    json = JSON.parse(body)
  } catch {
    throw new Error(`${what}: ${r.status} body is not JSON: ${body.slice(0, 200)}`)
  }
  if (typeof json?.detail?.status !== "string" || typeof json?.detail?.message !== "string") throw new Error(`${what}: no error body: ${body.slice(0, 200)}`)
}

// RFC 2046 boundary characters (bchars), 1 to 70 of them, not ending in a space.
const BCHARS = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'()+_,-./:=? "
const boundaryArb = fc.array(fc.constantFrom(...BCHARS), { minLength: 1, maxLength: 70 }).map((a) => a.join("")).filter((b) => !b.endsWith(" "))

interface Part {
  readonly name: string
  readonly filename: string | null
  readonly headers: ReadonlyArray<string>
  readonly body: Buffer
}

const headerGarbage = fc.oneof(
  fc.constantFrom("content-type: text/plain; charset=utf-16", "content-transfer-encoding: base64", "content-type:", "x: " + "h".repeat(2000), "content-disposition: attachment", ": novalue", "nocolon", "content-type: multipart/mixed; boundary=inner", "content-disposition: form-data; name*=utf-8''%E2%82%AC"),
  fc.string({ maxLength: 40 }).map((s) => s.replace(/[\r\n]/g, ""))
)
const partArb: fc.Arbitrary<Part> = fc.record({
  name: fc.oneof(fc.constantFrom("file", "files", "audio", "model_id", "name", "labels", "description", "language_code", "num_speakers", "diarize", "additional_formats"), fc.string({ maxLength: 10 }).map((s) => s.replace(/["\r\n]/g, ""))),
  filename: fc.option(fc.constantFrom("a.wav", "", "ä.mp3", "..\\..\\x", "x".repeat(300))),
  headers: fc.array(headerGarbage, { maxLength: 3 }),
  body: fc.oneof(
    fc.string({ maxLength: 64 }).map((s) => Buffer.from(s)),
    fc.uint8Array({ maxLength: 3000 }).map((b) => Buffer.from(b)),
    fc.constantFrom("{\"accent\":", "[1,2]", "null", "\u0000", "32", "-1", "true", "RIFF....WAVEfmt ").map((s) => Buffer.from(s))
  )
})

const encode = (boundary: string, parts: ReadonlyArray<Part>, closing: boolean): Buffer =>
  Buffer.concat([
    ...parts.map((p) => Buffer.concat([
      Buffer.from(`--${boundary}\r\ncontent-disposition: form-data; name="${p.name}"${p.filename !== null ? `; filename="${p.filename}"` : ""}\r\n` +
        p.headers.map((h) => `${h}\r\n`).join("") + "\r\n"),
      p.body,
      Buffer.from("\r\n")
    ])),
    Buffer.from(closing ? `--${boundary}--\r\n` : "")
  ])

const quote = (b: string) => (/[^0-9A-Za-z'+_\-.]/.test(b) ? `"${b}"` : b)

t.test("property: random boundaries, header garbage and field/file mixes are a 4xx with the error body", async (t) => {
  await fc.assert(fc.asyncProperty(
    fc.constantFrom(...ROUTES),
    boundaryArb,
    fc.array(partArb, { maxLength: 6 }),
    fc.boolean(),
    async (route, boundary, parts, closing) => {
      const r = await raw(route, `multipart/form-data; boundary=${quote(boundary)}`, encode(boundary, parts, closing))
      check4xx(r, `${route} boundary ${JSON.stringify(boundary)} parts ${JSON.stringify(parts.map((p) => [p.name, p.filename, p.headers, p.body.length]))}`)
      await checkServer()
    }
  ), { seed: 0x3a17, numRuns: 70 })
  t.pass("70 forms")
})

t.test("property: malformed content types and boundaries that do not match the body", async (t) => {
  const contentType = fc.oneof(
    fc.constantFrom("multipart/form-data", "multipart/form-data; boundary=", "multipart/form-data; boundary=\"\"", "multipart/form-data; boundary=\"unterminated",
      `multipart/form-data; boundary=${"b".repeat(71)}`, "multipart/form-data; boundary=a; boundary=b", "multipart/form-data;;;", "multipart/form-data; boundary=a b",
      "multipart/mixed; boundary=x", "application/json", "text/plain", "multipart/form-data; charset=utf-8", "MULTIPART/FORM-DATA; BOUNDARY=X"),
    fc.string({ maxLength: 60 }).map((s) => `multipart/form-data; ${s.replace(/[\r\n]/g, "")}`)
  )
  await fc.assert(fc.asyncProperty(fc.constantFrom(...ROUTES), contentType, fc.array(partArb, { maxLength: 3 }), async (route, ct, parts) => {
    const r = await raw(route, ct, encode("realboundary", parts, true))
    check4xx(r, `${route} content-type ${JSON.stringify(ct)}`)
    await checkServer()
  }), { seed: 0x3a18, numRuns: 50 })
  t.pass("50 content types")
})

t.test("property: a body cut anywhere (the client half-closes) is answered with a 4xx or nothing, never a 5xx", async (t) => {
  await fc.assert(fc.asyncProperty(
    fc.constantFrom(...ROUTES),
    boundaryArb,
    fc.array(partArb, { minLength: 1, maxLength: 4 }),
    fc.nat(),
    async (route, boundary, parts, at) => {
      const body = encode(boundary, parts, true)
      const r = await raw(route, `multipart/form-data; boundary=${quote(boundary)}`, body, at % body.length)
      if (r.status !== 0) check4xx(r, `${route} cut at ${at % body.length} of ${body.length}`)
      await checkServer()
    }
  ), { seed: 0x3a19, numRuns: 50 })
  t.pass("50 cuts")
})

t.test("sizes at the limits: 256 KiB fields and 10 MB voice samples", async (t) => {
  const KIB = 1024
  const MB10 = 10 * 1024 * 1024
  // [route, parts, expected status]; fields at the limit pass the reader (then the handler says why not).
  const cases: Array<[string, Array<Part>, number]> = [
    ["/api/v1/voices/add", [{ name: "name", filename: null, headers: [], body: Buffer.alloc(256 * KIB, 0x61) }], 400],
    ["/api/v1/voices/add", [{ name: "name", filename: null, headers: [], body: Buffer.alloc(256 * KIB + 1, 0x61) }], 400],
    ["/api/v1/voices/vc_x/edit", [{ name: "description", filename: null, headers: [], body: Buffer.alloc(256 * KIB + 1, 0x61) }], 400],
    ["/api/v1/voices/add", [{ name: "name", filename: null, headers: [], body: Buffer.from("n") }, { name: "files", filename: "a.wav", headers: [], body: Buffer.alloc(MB10 + 1, 0x52) }], 413],
    ["/api/v1/voices/vc_x/edit", [{ name: "files", filename: "a.wav", headers: [], body: Buffer.alloc(MB10 + 1, 0x52) }], 413]
  ]
  for (const [route, parts, expected] of cases) {
    const r = await raw(route, "multipart/form-data; boundary=lim", encode("lim", parts, true))
    const label = `${route} ${parts.map((p) => `${p.name}:${p.body.length}`).join(",")}`
    t.equal(r.status, expected, label)
    if (r.status === expected) check4xx(r, label)
    await checkServer()
  }
  // A sample of exactly 10 MB is read in full; what is not audio is then refused (4xx, not 413).
  const exact = await raw("/api/v1/voices/add", "multipart/form-data; boundary=lim",
    encode("lim", [{ name: "name", filename: null, headers: [], body: Buffer.from("n") }, { name: "files", filename: "a.wav", headers: [], body: Buffer.alloc(MB10, 0x52) }], true))
  t.not(exact.status, 413, "exactly 10 MB is within the limit")
  check4xx(exact, "exactly 10 MB of non-audio")
  await checkServer()
})
