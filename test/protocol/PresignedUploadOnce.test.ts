/**
 * One upload per presigned address of the local store (issue 38, item 8), on PGlite or
 * PostgreSQL: of concurrent PUTs to one address exactly one lands and the others are 409, and
 * the size recorded with the job is the size of the stored file; a PUT that arrives while the
 * first is still sending is 409 `upload_in_progress`, one after it landed 409 `upload_closed`.
 * The declared `size_bytes` is held to as S3 holds a signed Content-Length: a body shorter or
 * longer is refused, nothing is recorded, no temporary file stays in DATA_DIR/tmp, and the
 * address can be used again.
 */
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import t from "tap"
import { expectApiError, type Json, jsonApi } from "../support/jsonApi.ts"
import { startTestService } from "../support/service.ts"

const service = await startTestService(t)
const { apiKey } = await service.newUser()
const { call } = jsonApi(service.base)

/** `bytes` bytes that sniff as WAV (RIFF…WAVE), the rest filled with `fill`. */
const wavLike = (bytes: number, fill: number): Buffer => {
  const b = Buffer.alloc(bytes, fill)
  b.write("RIFF", 0, "ascii")
  b.writeUInt32LE(bytes - 8, 4)
  b.write("WAVEfmt ", 8, "ascii")
  return b
}

const reserve = async (sizeBytes: number) => {
  const r = await call("POST", "/recognition/uploads", apiKey, { size_bytes: sizeBytes, content_type: "audio/wav" })
  t.equal(r.status, 201)
  return { jobId: r.json.job_id as string, url: r.json.upload_url as string }
}

const put = async (url: string, body: Buffer | ReadableStream<Uint8Array>, init: Record<string, unknown> = {}) => {
  const res = await fetch(url, { method: "PUT", body, ...init })
  return { status: res.status, json: await res.json() as Json }
}

/** The job's stored blob, if any (the local store keeps `uploads/<job id>` under DATA_DIR/blobs). */
const storedBlob = (jobId: string): Buffer | undefined => {
  const file = path.join(service.dataDir, "blobs", "uploads", jobId)
  return fs.existsSync(file) ? fs.readFileSync(file) : undefined
}
const leftInTmp = () => {
  const dir = path.join(service.dataDir, "tmp")
  return fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.startsWith("upload-")) : []
}
const recordedBytes = async (jobId: string) => (await call("GET", `/recognition/jobs/${jobId}`, apiKey)).json.upload_bytes as number | null

t.test("six concurrent PUTs to one address: one lands, five are 409, the recorded size is the stored file's", async (t) => {
  const size = 320_000
  const { jobId, url } = await reserve(size)
  const bodies = [1, 2, 3, 4, 5, 6].map((n) => wavLike(size, n))
  const answers = await Promise.all(bodies.map((b) => put(url, b)))
  const won = answers.flatMap((a, i) => (a.status >= 200 && a.status < 300 ? [i] : []))
  t.equal(won.length, 1, `statuses ${answers.map((a) => a.status).join(", ")}`)
  for (const a of answers.filter((a) => a.status >= 300)) {
    t.equal(a.status, 409)
    t.ok(["upload_in_progress", "upload_closed"].includes(a.json.detail?.status), a.json.detail?.status)
  }
  const stored = storedBlob(jobId)
  t.equal(stored?.byteLength, size, "the stored file has the declared size")
  t.equal(await recordedBytes(jobId), stored?.byteLength, "the recorded size is the stored file's")
  t.ok(stored !== undefined && stored.equals(bodies[won[0]!]!), "the stored bytes are the winner's")
  t.same(leftInTmp(), [], "no racer left a temporary file")
})

t.test("a PUT while the first is still sending is 409 upload_in_progress; after it landed, 409 upload_closed", async (t) => {
  const size = 200_000
  const { jobId, url } = await reserve(size)
  const first = wavLike(size, 7)
  let release!: () => void
  const released = new Promise<void>((r) => (release = r))
  const stream = new ReadableStream<Uint8Array>({
    async start(controller) {
      controller.enqueue(first.subarray(0, size / 2))
      await released
      controller.enqueue(first.subarray(size / 2))
      controller.close()
    }
  })
  const sending = put(url, stream, { duplex: "half", headers: { "content-length": String(size) } })
  // The first PUT holds the address once its claim is in the database (an event of the server,
  // not a time: the loop waits for the row to change).
  for (;;) {
    const rows = await Effect.runPromise(service.sql<{ upload_claim: string | null }>`SELECT upload_claim FROM recognition_jobs WHERE id = ${jobId}`)
    if (rows[0]?.upload_claim != null) break
    await new Promise((r) => setImmediate(r))
  }
  expectApiError(t, await put(url, wavLike(size, 8)), 409, "upload_in_progress")
  release()
  const landed = await sending
  t.equal(landed.status, 200, JSON.stringify(landed.json))
  expectApiError(t, await put(url, wavLike(size, 9)), 409, "upload_closed")
  t.ok(storedBlob(jobId)?.equals(first), "the first PUT's bytes are stored")
  t.equal(await recordedBytes(jobId), size)
})

t.test("the declared size_bytes is enforced: shorter or longer is refused, nothing is kept, the address stays usable", async (t) => {
  const size = 1000
  const { jobId, url } = await reserve(size)
  const short = await put(url, wavLike(size - 1, 1))
  expectApiError(t, short, 400, "upload_size_mismatch")
  const long = await put(url, wavLike(size + 1, 1))
  t.ok(long.status === 400 || long.status === 413, `longer: ${long.status}`)
  t.equal(long.json.detail?.status, "upload_size_mismatch")
  const muchLonger = await put(url, wavLike(size * 50, 1))
  t.equal(muchLonger.json.detail?.status, "upload_size_mismatch", `much longer: ${muchLonger.status}`)
  t.equal(await recordedBytes(jobId), null, "nothing recorded")
  t.equal(storedBlob(jobId), undefined, "nothing stored")
  t.same(leftInTmp(), [], "no temporary file left in DATA_DIR/tmp")
  const exact = await put(url, wavLike(size, 2))
  t.equal(exact.status, 200, `the exact size lands afterwards: ${JSON.stringify(exact.json)}`)
  t.equal(await recordedBytes(jobId), size)
  t.equal(storedBlob(jobId)?.byteLength, size)
})
