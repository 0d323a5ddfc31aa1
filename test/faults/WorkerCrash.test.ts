/**
 * A worker thread that crashes mid-task inside the whole service (extends
 * test/runtime/WorkerPool.test.ts, which shows the pool itself surviving a crashing fixture
 * task): the request whose task crashed the thread is answered 502 with the SPEC error body,
 * requests running beside it on the other thread succeed, the pool replaces the thread (the
 * `worker_pool_threads` gauge is back to WORKERS) and the following requests succeed. The
 * process stays up.
 *
 * Streamed (POST …/stream, `Inference.stream`): a thread that dies before the first audio still
 * gets a normal 502 (the head goes out with the first block); one that dies after it cuts the
 * stream (the connection is closed before the chunked body's end, so the client's read fails)
 * and never leaves the request hanging. Requests beside them are whole.
 *
 * The crash is injected by test/fixtures/crashWorkerOnMarker.mjs, preloaded into the service:
 * a task carrying MARKER dies as it starts (uncaught error, the task never answers); a streaming
 * task carrying MARKER_MID_STREAM exits its thread right after posting its first piece.
 */
import t from "tap"
import { startServiceProcess } from "../support/serviceProcess.ts"

const MARKER = "zqxworkercrashzqx"
const MARKER_MID_STREAM = "zqxcrashmidstreamzqx"
const WORKERS = 2
const service = await startServiceProcess(t, {
  preload: new URL("../fixtures/crashWorkerOnMarker.mjs", import.meta.url).href,
  env: { WORKERS: String(WORKERS) }
})
const apiKey = await service.newKey(1_000_000)

const tts = async (text: string) => {
  const res = await fetch(`${service.siteUrl}/api/v1/text-to-speech/mari`, {
    method: "POST",
    headers: { "xi-api-key": apiKey, "content-type": "application/json" },
    body: JSON.stringify({ text }),
    signal: AbortSignal.timeout(60_000)
  })
  return { status: res.status, bytes: new Uint8Array(await res.arrayBuffer()) }
}
/** A streamed request read to its end; `cut` when the body broke off (connection closed mid-body). */
const ttsStream = async (text: string) => {
  const res = await fetch(`${service.siteUrl}/api/v1/text-to-speech/mari/stream`, {
    method: "POST",
    headers: { "xi-api-key": apiKey, "content-type": "application/json" },
    body: JSON.stringify({ text }),
    signal: AbortSignal.timeout(60_000)
  })
  const parts: Array<Uint8Array> = []
  let cut: string | undefined
  try {
    for await (const part of res.body!) parts.push(part)
  } catch (e) {
    cut = e instanceof Error ? `${e.name}: ${e.message}` : String(e)
  }
  return { status: res.status, bytes: new Uint8Array(Buffer.concat(parts)), cut }
}
const errorOf = (bytes: Uint8Array) => JSON.parse(Buffer.from(bytes).toString()) as { detail: { status: string; message: string } }
const threads = async () => {
  const text = await (await fetch(`${service.siteUrl}/metrics`)).text()
  return Number(/^worker_pool_threads\s+(\d+)/m.exec(text)?.[1] ?? NaN)
}

t.test("a crashed worker: only its request fails, the thread is replaced", async (t) => {
  t.equal(await threads(), WORKERS, `${WORKERS} threads to begin with`)
  t.equal((await tts("Tere hommikust.")).status, 200, "TTS works before")

  const [crashed, ...beside] = await Promise.all([
    tts(`Tere ${MARKER} sõber.`),
    tts("Täna on ilus ilm."),
    tts("Lähme pargis jalutama.")
  ])
  t.equal(crashed.status, 502, "the request whose worker crashed: 502")
  const body = errorOf(crashed.bytes)
  t.equal(body.detail.status, "engine_failed", "SPEC error body")
  // SpeechError.fromEngine gives a crash a fixed sentence: the thread's error text is logged only.
  t.notMatch(body.detail.message, /injected|stack|at /, "the crash's details stay in the log")
  for (const [i, r] of beside.entries()) {
    t.equal(r.status, 200, `the request beside it #${i + 1}: 200`)
    t.ok(r.bytes.length > 1000, "with audio")
  }

  t.equal(await poolRecovered(), WORKERS, "the pool is back to its thread count")
  const after = await Promise.all(Array.from({ length: 4 }, (_, i) => tts(`Järgmine lause number ${i + 1}.`)))
  t.same(after.map((r) => r.status), [200, 200, 200, 200], "the next requests succeed")
  t.equal((await fetch(`${service.siteUrl}/readyz`)).status, 200, "ready")
  t.equal(service.child.exitCode, null, "the process is still running")
  t.match(service.output(), /injected: a worker thread crashed mid-task|WorkerCrashed|worker/i, "the crash is logged")
})

const poolRecovered = async () => {
  let count = 0
  for (let i = 0; i < 300 && count !== WORKERS; i++) {
    count = await threads()
    if (count !== WORKERS) await new Promise((r) => setTimeout(r, 100))
  }
  return count
}

const LONG = "See on pikem lause, mida loetakse mitme plokina ette, et voog jõuaks enne lõppu mitu korda kirjutada."

t.test("streamed: a worker that dies before the first audio → a normal 502; streams beside it are whole", async (t) => {
  const [crashed, ...beside] = await Promise.all([
    ttsStream(`Tere ${MARKER} sõber.`),
    ttsStream("Täna on ilus ilm."),
    ttsStream(LONG)
  ])
  t.equal(crashed.status, 502, "no audio went out: a normal error status")
  t.equal(errorOf(crashed.bytes).detail.status, "engine_failed", "SPEC error body")
  for (const [i, r] of beside.entries()) {
    t.equal(r.status, 200, `the stream beside it #${i + 1}: 200`)
    t.equal(r.cut, undefined, "read to its end")
    t.ok(r.bytes.length > 1000, "with audio")
  }
  t.equal(await poolRecovered(), WORKERS, "the pool is back to its thread count")
})

t.test("streamed: a worker that dies after the first audio cuts that stream only, and nothing hangs", async (t) => {
  const whole = await ttsStream(LONG)
  t.equal(whole.status, 200)
  t.equal(whole.cut, undefined)
  const started = Date.now()
  const [crashed, ...beside] = await Promise.all([
    ttsStream(`${LONG} ${MARKER_MID_STREAM}`),
    ttsStream("Täna on ilus ilm."),
    ttsStream(LONG)
  ])
  t.ok(Date.now() - started < 45_000, `answered in bounded time (${Date.now() - started} ms)`)
  if (crashed.status === 200) {
    t.ok(crashed.cut !== undefined, `the stream is cut, not ended cleanly (${crashed.cut})`)
    t.ok(crashed.bytes.length < whole.bytes.length, `shorter than the whole stream (${crashed.bytes.length} < ${whole.bytes.length})`)
    t.equal(Buffer.from(crashed.bytes.subarray(0, 4)).toString("latin1"), "RIFF", "the audio that went out before the crash")
  } else {
    // The thread's death overtook its first piece: no audio went out, so a normal error.
    t.equal(crashed.status, 502, "or, if no audio went out yet, a normal 502")
    t.equal(errorOf(crashed.bytes).detail.status, "engine_failed")
  }
  for (const [i, r] of beside.entries()) {
    t.equal(r.status, 200, `the stream beside it #${i + 1}: 200`)
    t.equal(r.cut, undefined, "read to its end")
  }
  t.equal(await poolRecovered(), WORKERS, "the pool is back to its thread count")
  const after = await Promise.all([ttsStream(LONG), tts("Veel üks lause.")])
  t.same(after.map((r) => r.status), [200, 200], "the next requests succeed")
  t.equal((await fetch(`${service.siteUrl}/readyz`)).status, 200, "ready")
  t.equal(service.child.exitCode, null, "the process is still running")
})
