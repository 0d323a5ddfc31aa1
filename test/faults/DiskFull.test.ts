/**
 * DATA_DIR's disk fills up while an upload is being stored. DATA_DIR is a 2 MB tmpfs (we run as
 * root; without the right to mount, the test is skipped and says why); the embedded database, when
 * there is one, lives on the big disk (bind-mounted at `DATA_DIR/pglite`), so only uploads and
 * blobs compete for the small one. An upload larger than the free space, to the speech-to-text
 * route (multipart, streamed to DATA_DIR/tmp) and to a job's presigned address (the local blob
 * store's PUT route), is answered 507 `insufficient_storage` with the SPEC error body; no partial
 * file stays in DATA_DIR; and the service goes on: a small transcription and a small upload
 * succeed right after (they would not fit if the partial files were left behind).
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import t, { type Test } from "tap"
import { SPEECH } from "../support/librivoxSpeech.ts"
import { startServiceProcess } from "../support/serviceProcess.ts"

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "disk-full-"))
const mounted = (() => {
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=2m", "tmpfs", dataDir], { stdio: "pipe" })
    return undefined
  } catch (e) {
    return `cannot mount a small tmpfs as DATA_DIR (needs root or CAP_SYS_ADMIN): ${String((e as { stderr?: unknown }).stderr ?? e).trim()}`
  }
})()
if (mounted !== undefined) {
  fs.rmSync(dataDir, { recursive: true, force: true })
  t.plan(0, mounted)
} else await run()

async function run() {
  // The embedded database's directory is bound in from the big disk (PGlite does not follow a
  // symlink there): the database must not be what fills up.
  const pgliteDir = fs.mkdtempSync(path.join(os.tmpdir(), "disk-full-pglite-"))
  const pgliteMount = path.join(dataDir, "pglite")
  fs.mkdirSync(pgliteMount)
  execFileSync("mount", ["--bind", pgliteDir, pgliteMount])
  let unmounted = false
  const unmount = () => {
    if (unmounted) return
    unmounted = true
    // Lazy: the child may still hold files open while it is being killed.
    for (const dir of [pgliteMount, dataDir]) {
      try {
        execFileSync("umount", ["-l", dir], { stdio: "pipe" })
      } catch {
        // already gone
      }
    }
    fs.rmSync(dataDir, { recursive: true, force: true })
    fs.rmSync(pgliteDir, { recursive: true, force: true })
  }
  t.teardown(unmount)
  // Also when start-up throws out of the file (tap's teardown would not run then).
  process.once("exit", unmount)

  const service = await startServiceProcess(t, { dataDir, env: { WORKERS: "1" } })
  const apiKey = await service.newKey(1_000_000)
  const api = `${service.siteUrl}/api/v1`

  const freeBytes = () => {
    const s = fs.statfsSync(dataDir)
    return s.bavail * s.bsize
  }
  /** Every file under DATA_DIR on the small disk (not the bound-in database). */
  const filesOnDisk = (dir = dataDir): Array<string> =>
    fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
      const p = path.join(dir, e.name)
      if (e.isSymbolicLink()) return []
      return e.isDirectory() ? filesOnDisk(p) : [path.relative(dataDir, p)]
    })
  /** Uploads and blobs: what a failed upload could leave behind. */
  const leftovers = () => filesOnDisk().filter((f) => /^(tmp|blobs)\//.test(f))

  type Json = { detail?: { status?: string; message?: string }; [k: string]: unknown }
  const answer = async (res: Response) => ({ status: res.status, json: await res.json().catch(() => ({})) as Json })

  const stt = (bytes: Uint8Array) => {
    const form = new FormData()
    form.set("model_id", "scribe_v1")
    form.set("file", new Blob([bytes], { type: "audio/wav" }), "talk.wav")
    return fetch(`${api}/speech-to-text`, { method: "POST", headers: { "xi-api-key": apiKey }, body: form, signal: AbortSignal.timeout(60_000) }).then(answer)
  }
  const reserve = async (size: number) => {
    const r = await fetch(`${api}/recognition/uploads`, {
      method: "POST",
      headers: { "xi-api-key": apiKey, "content-type": "application/json" },
      body: JSON.stringify({ filename: "talk.wav", content_type: "audio/wav", size_bytes: size })
    }).then(answer)
    if (r.status !== 201) throw new Error(`reserve: ${r.status} ${JSON.stringify(r.json)}`)
    return r.json as { job_id: string; upload_url: string }
  }
  const put = (url: string, bytes: Uint8Array) => fetch(url, { method: "PUT", body: bytes, signal: AbortSignal.timeout(60_000) }).then(answer)

  /** A WAV header and then more bytes than the disk has room for. */
  const tooBig = () => {
    const bytes = new Uint8Array(freeBytes() + 1024 * 1024)
    bytes.set(SPEECH.subarray(0, 44))
    return bytes
  }

  const expect507 = (t: Test, r: { status: number; json: Json }) => {
    t.equal(r.status, 507, `507: ${JSON.stringify(r.json).slice(0, 200)}`)
    t.equal(r.json.detail?.status, "insufficient_storage", "SPEC error body")
    t.type(r.json.detail?.message, "string")
    t.notMatch(r.json.detail?.message ?? "", /ENOSPC|\/tmp|upload-/, "no file names or errno in the answer")
  }

  t.test("speech-to-text: a multipart upload past the free space", async (t) => {
    const before = freeBytes()
    t.ok(before <= 2 * 1024 * 1024 && before > SPEECH.length * 3, `free on DATA_DIR: ${before} bytes`)
    expect507(t, await stt(tooBig()))
    t.same(leftovers(), [], "no partial upload left in DATA_DIR")
    t.ok(freeBytes() >= before - 64 * 1024, `the space is back (${freeBytes()} of ${before})`)
    const ok = await stt(SPEECH)
    t.equal(ok.status, 200, `a small transcription right after: ${JSON.stringify(ok.json).slice(0, 200)}`)
    t.match(String(ok.json.text), /\w+/, "with words")
    t.same(leftovers(), [], "and it leaves nothing behind either")
  })

  t.test("presigned upload (local blob store): a PUT past the free space", async (t) => {
    const before = freeBytes()
    const big = tooBig()
    const job = await reserve(big.length)
    expect507(t, await put(job.upload_url, big))
    t.same(leftovers(), [], "no partial upload or blob left in DATA_DIR")
    t.ok(freeBytes() >= before - 64 * 1024, `the space is back (${freeBytes()} of ${before})`)
    const small = await reserve(SPEECH.length)
    const landed = await put(small.upload_url, SPEECH)
    t.equal(landed.status, 200, `a small upload right after: ${JSON.stringify(landed.json)}`)
    t.same(leftovers(), [`blobs/uploads/${small.job_id}`], "only the small upload's blob")
    t.equal((await fetch(`${service.siteUrl}/readyz`)).status, 200, "ready")
    t.equal(service.child.exitCode, null, "the process is still running")
  })
}
