/**
 * The S3 blob store against a real S3-compatible server on loopback, @20minutes/s3rver (npm;
 * a maintained fork of s3rver that verifies SigV4 signatures, which s3rver 3 skips): every
 * operation of the BlobStore contract, presigned PUTs sent by a plain HTTP client and refused
 * by the server when the body's length differs from the signed Content-Length, when the
 * address was altered or has expired, and the whole job flow through the service with
 * BLOB_STORE=s3 on real speech.
 */
import { Effect, Exit, Scope } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { createRequire } from "node:module"
import t from "tap"
import { makeS3BlobStore } from "../../storage/S3BlobStore.ts"
import { startTestService } from "../support/service.ts"
import { SPEECH } from "../support/librivoxSpeech.ts"

const BUCKET = "speech-test"
/** The server ships no types: its constructor, run() and close() are all the test uses. */
const S3rver = createRequire(import.meta.url)("@20minutes/s3rver") as new (options: Record<string, unknown>) => { run(): Promise<unknown>; close(): Promise<void> }

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "s3-test-"))
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
const s3 = new S3rver({ port: 0, address: "127.0.0.1", directory: dir, silent: true, configureBuckets: [{ name: BUCKET }] })
const { port } = await s3.run() as { port: number }
t.teardown(() => s3.close())
const endpoint = `http://127.0.0.1:${port}`
// The server's built-in account.
const credentials = { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" }
const store = makeS3BlobStore({ bucket: BUCKET, endpoint, region: "us-east-1", forcePathStyle: true, credentials })
const run = <A, E>(e: Effect.Effect<A, E>) => Effect.runPromise(e)
const failure = <A, E>(e: Effect.Effect<A, E>) => Effect.runPromise(Effect.flip(e))

t.test("the BlobStore contract on S3", async (t) => {
  await run(store.put("clones/vc_1/sample", new Uint8Array([1, 2, 3])))
  t.same([...await run(store.get("clones/vc_1/sample"))], [1, 2, 3])
  t.equal(await run(store.exists("clones/vc_1/sample")), true)
  t.equal(await run(store.size("clones/vc_1/sample")), 3)
  t.same([...await run(store.head("clones/vc_1/sample", 2))], [1, 2], "a ranged read of the first bytes")
  await run(store.delete("clones/vc_1/sample"))
  t.equal(await run(store.exists("clones/vc_1/sample")), false)
  await run(store.put("empty", new Uint8Array()))
  t.same([...await run(store.head("empty", 64))], [], "the head of an empty object is no bytes (its range is unsatisfiable)")
  await run(store.delete("empty"))
  await run(store.delete("clones/vc_1/sample"))
  t.pass("deleting a missing key succeeds")
  t.match(await failure(store.get("nothing/here")), { _tag: "BlobStoreError", reason: "NotFound" })
  t.match(await failure(store.size("nothing/here")), { reason: "NotFound" })

  const source = path.join(dir, "source.wav")
  fs.writeFileSync(source, SPEECH)
  await run(store.moveFile("uploads/job_a", source))
  t.notOk(fs.existsSync(source), "the moved file is gone")
  const scope = await run(Scope.make())
  const local = await run(Scope.provide(store.localFile("uploads/job_a", path.join(dir, "tmp")), scope))
  t.ok(fs.readFileSync(local).equals(SPEECH), "downloaded for the decoder, byte for byte")
  await run(Scope.close(scope, Exit.void))
  t.notOk(fs.existsSync(local), "and removed with its scope")
})

t.test("presigned PUTs: a plain HTTP client uploads straight to the bucket", async (t) => {
  const expiresAt = new Date(Date.now() + 30 * 60_000)
  const bound = await run(store.presignPut("uploads/job_b", { maxBytes: 10_000_000, expiresAt, declaredBytes: SPEECH.length }))
  t.same(bound.headers, { "content-length": String(SPEECH.length) })
  const url = new URL(bound.url)
  t.equal(url.origin, endpoint)
  t.equal(url.pathname, `/${BUCKET}/uploads/job_b`)
  t.match(url.searchParams.get("X-Amz-SignedHeaders"), /content-length/, "the length is signed")
  const validS = Number(url.searchParams.get("X-Amz-Expires"))
  t.ok(validS >= 1790 && validS <= 1800, `valid until the reservation's expiry (${validS} s)`)
  t.notOk([...url.searchParams.keys()].some((k) => k.startsWith("x-amz-checksum")), "no checksum of an empty body baked in")
  t.equal((await fetch(bound.url, { method: "PUT", body: SPEECH })).status, 200)
  t.equal(await run(store.size("uploads/job_b")), SPEECH.length)
  const free = await run(store.presignPut("uploads/job_c", { maxBytes: 10_000_000, expiresAt }))
  t.same(free.headers, {}, "no declared size: nothing to send but the body")
  t.equal((await fetch(free.url, { method: "PUT", body: "abc" })).status, 200)
  t.equal(await run(store.size("uploads/job_c")), 3)
  await run(store.delete("uploads/job_b"))
  const refused = async (label: string, address: string, body: Uint8Array | string) => {
    const res = await fetch(address, { method: "PUT", body })
    t.equal(res.status, 403, label)
    t.match(await res.text(), /SignatureDoesNotMatch|AccessDenied/, `${label}: the server names why`)
  }
  await refused("a body longer than the signed length", bound.url, Buffer.concat([SPEECH, Buffer.from([0])]))
  await refused("a body shorter than the signed length", bound.url, SPEECH.subarray(1))
  const tampered = new URL(bound.url)
  const signature = tampered.searchParams.get("X-Amz-Signature")!
  tampered.searchParams.set("X-Amz-Signature", (signature[0] === "0" ? "1" : "0") + signature.slice(1))
  await refused("an altered signature", tampered.toString(), SPEECH)
  const otherKey = new URL(bound.url)
  otherKey.pathname = `/${BUCKET}/uploads/job_x`
  await refused("the signature of one key used for another", otherKey.toString(), SPEECH)
  const longer = new URL(bound.url)
  longer.searchParams.set("X-Amz-Expires", "604800")
  await refused("a validity lengthened by the client", longer.toString(), SPEECH)
  t.equal(await run(store.exists("uploads/job_b")), false, "nothing refused landed")
  t.equal(await run(store.exists("uploads/job_x")), false)
  t.equal((await fetch(bound.url, { method: "PUT", body: SPEECH })).status, 200, "the address still works with the signed length")

  const stale = await run(store.presignPut("uploads/job_d", { maxBytes: 10, expiresAt: new Date(Date.now() + 1000) }))
  await new Promise((r) => setTimeout(r, 2100))
  t.equal((await fetch(stale.url, { method: "PUT", body: "abc" })).status, 403, "an expired address is refused")
})

t.test("the job flow through the service with BLOB_STORE=s3", async (t) => {
  const service = await startTestService(t, {
    WORKERS: "1",
    BLOB_STORE: "s3",
    S3_BUCKET: BUCKET,
    S3_ENDPOINT: endpoint,
    S3_ACCESS_KEY_ID: credentials.accessKeyId,
    S3_SECRET_ACCESS_KEY: credentials.secretAccessKey,
    UPLOAD_MAX_BYTES: "1048576"
  })
  const { apiKey } = await service.newUser()
  const headers = { "xi-api-key": apiKey, "content-type": "application/json" }
  const reserve = async (body: unknown) => await (await fetch(`${service.base}/recognition/uploads`, { method: "POST", headers, body: JSON.stringify(body) })).json() as { job_id: string; upload_url: string; headers: Record<string, string> }
  const start = (id: string) => fetch(`${service.base}/recognition/jobs/${id}/start`, { method: "POST", headers, body: "{}" })
  const status = async (id: string) => await (await fetch(`${service.base}/recognition/jobs/${id}`, { headers })).json() as Record<string, any>

  const r = await reserve({ content_type: "audio/wav", size_bytes: SPEECH.length })
  t.ok(r.upload_url.startsWith(`${endpoint}/${BUCKET}/uploads/${r.job_id}?`), "the address is the bucket's")
  t.same(r.headers, { "content-length": String(SPEECH.length) })
  t.equal((await start(r.job_id)).status, 409, "start before the upload: nothing in the bucket yet")
  t.equal((await fetch(r.upload_url, { method: "PUT", body: Buffer.concat([SPEECH, SPEECH]) })).status, 403, "a body over the declared size is refused by the bucket")
  t.equal((await start(r.job_id)).status, 409, "so there is still nothing to start")
  t.equal((await fetch(r.upload_url, { method: "PUT", body: SPEECH })).status, 200)
  t.equal((await start(r.job_id)).status, 202)
  let s = await status(r.job_id)
  for (let i = 0; i < 600 && !["succeeded", "failed"].includes(s.state); i++) {
    await new Promise((r) => setTimeout(r, 100))
    s = await status(r.job_id)
  }
  t.equal(s.state, "succeeded", JSON.stringify(s.error ?? {}))
  t.equal(s.upload_bytes, SPEECH.length)
  t.ok((s.result.words as Array<{ type: string }>).filter((w) => w.type === "word").length >= 8, `transcribed: ${String(s.result.text).slice(0, 60)}`)

  const text = await reserve({})
  await fetch(text.upload_url, { method: "PUT", body: "this is not a recording at all, only words".repeat(10) })
  const refused = await start(text.job_id)
  t.equal(refused.status, 415, "sniffed on start")
  t.equal((await status(text.job_id)).error.code, "unsupported_media_type")
  t.equal(await run(store.exists(`uploads/${text.job_id}`)), false, "and removed from the bucket")

  const empty = await reserve({})
  t.equal((await fetch(empty.upload_url, { method: "PUT", body: "" })).status, 200)
  t.equal((await start(empty.job_id)).status, 415, "an empty upload is no recording either")

  const big = await reserve({})
  await fetch(big.upload_url, { method: "PUT", body: Buffer.concat([SPEECH, SPEECH, SPEECH, SPEECH, SPEECH]) })
  const tooBig = await start(big.job_id)
  t.equal(tooBig.status, 413, "an undeclared upload over UPLOAD_MAX_BYTES is refused on start")
  t.equal(await run(store.exists(`uploads/${big.job_id}`)), false)
})
