/**
 * bench/memory: resident memory of the service at rest, with 1, 2 and 3 worker threads, after
 * one request of each kind (espeak and Flite TTS, a stream, a WebSocket session, speech-to-text
 * with diarization, a voice clone and speech in it, a translated chunk), and what each kind
 * added when it first ran. VmRSS of the process (worker threads included), read 5 s after the
 * last answer, and again once the speech-to-text models have been given back (the service runs
 * with STT_MODEL_IDLE_RELEASE_S=20 here so the bench does not wait the default 60 s). The cost of
 * a worker is the slope from 1 to 3 workers.
 *
 *   npx tsx bench/memory.ts [--smoke]      (also run at the end of bench/tts)
 *
 * Runs the production build (bench/support.ts `serviceArgs`) on the database of DATABASE_URL,
 * else embedded PGlite (which lives in the service process and is counted).
 */
import { execFileSync } from "node:child_process"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import WebSocket from "ws"
import { databaseLabel, root, smoke, startService, stop } from "./support.ts"

const SPEECH = "/usr/share/pocketsphinx/test/data/librivox/sense_and_sensibility_01_austen_64kb-0870.wav"
/** STT models are given back this long after their last use, s (the service's default is 60). */
const STT_IDLE_RELEASE_S = 20
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const rssMb = (pid: number) => Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024

interface Kind {
  readonly name: string
  readonly run: (site: string, key: string) => Promise<number>
}

const post = async (url: string, key: string, body: string | FormData, json = true) => {
  const res = await fetch(url, { method: "POST", headers: { "xi-api-key": key, ...(json ? { "content-type": "application/json" } : {}) }, body })
  await res.arrayBuffer()
  return res.status
}

const wsFlush = (site: string, key: string) =>
  new Promise<number>((resolve, reject) => {
    const ws = new WebSocket(`${site.replace("http", "ws")}/api/v1/text-to-speech/mari/stream-input`, { headers: { "xi-api-key": key } })
    ws.on("open", () => {
      ws.send(JSON.stringify({ text: " " }))
      ws.send(JSON.stringify({ text: "Tere, kuidas läheb? ", flush: true }))
    })
    ws.on("message", (data: Buffer) => {
      if ((JSON.parse(data.toString()) as { flushDone?: boolean }).flushDone === true) {
        ws.close()
        resolve(200)
      }
    })
    ws.on("error", reject)
  })

const speechForm = (extra: Record<string, string> = {}) => {
  const form = new FormData()
  form.set("model_id", "scribe_v1")
  for (const [k, v] of Object.entries(extra)) form.set(k, v)
  form.set("file", new Blob([readFileSync(SPEECH)], { type: "audio/wav" }), "speech.wav")
  return form
}

const kinds: ReadonlyArray<Kind> = [
  { name: "TTS espeak (sync)", run: (site, key) => post(`${site}/api/v1/text-to-speech/mari`, key, JSON.stringify({ text: "Tere hommikust, kallis sõber." })) },
  { name: "TTS stream", run: (site, key) => post(`${site}/api/v1/text-to-speech/mari/stream`, key, JSON.stringify({ text: "Täna on ilus ilm. Lähme jalutama." })) },
  { name: "WebSocket session", run: wsFlush },
  { name: "TTS Flite", run: (site, key) => post(`${site}/api/v1/text-to-speech/emma-en`, key, JSON.stringify({ text: "The quick brown fox." })) },
  { name: "STT + diarization", run: (site, key) => post(`${site}/api/v1/speech-to-text`, key, speechForm({ diarize: "true" }), false) },
  {
    name: "voice clone + speech",
    run: async (site, key) => {
      const form = new FormData()
      form.set("name", "memory bench")
      form.set("files", new Blob([readFileSync(SPEECH)], { type: "audio/wav" }), "sample.wav")
      const res = await fetch(`${site}/api/v1/voices/add`, { method: "POST", headers: { "xi-api-key": key }, body: form })
      const { voice_id: voiceId } = (await res.json()) as { voice_id: string }
      return post(`${site}/api/v1/text-to-speech/${voiceId}`, key, JSON.stringify({ text: "This is my voice." }))
    }
  },
  {
    name: "translation chunk",
    run: (site, key) => post(`${site}/api/v1/translate/chunk`, key, JSON.stringify({ source: "en", target: "es", new_source: "Good morning, my friend." }))
  }
]

export async function memoryBench() {
  const levels = smoke ? [1] : [1, 2, 3]
  console.log("")
  console.log(`memory at rest (VmRSS, worker threads included, 5 s after the last answer; ${databaseLabel()})`)
  const atRest = new Map<number, number>()
  for (const workers of levels) {
    const service = await startService({ WORKERS: String(workers), STT_MODEL_IDLE_RELEASE_S: String(STT_IDLE_RELEASE_S) })
    try {
      const created = execFileSync(process.execPath, ["--import", "tsx", "runtime/admin.ts", "create-user", "--name", "memory", "--credits", "100000000", "--json"], {
        cwd: root,
        env: { ...process.env, DATA_DIR: service.dataDir },
        encoding: "utf8"
      })
      const { api_key: key } = JSON.parse(created.trim().split("\n").at(-1)!) as { api_key: string }
      const pid = service.child.pid!
      await sleep(smoke ? 500 : 5000)
      const ready = rssMb(pid)
      const steps: Array<string> = []
      let last = ready
      let answeredAt = Date.now()
      for (const kind of kinds) {
        const status = await kind.run(service.site, key)
        answeredAt = Date.now()
        await sleep(smoke ? 200 : 2000)
        const now = rssMb(pid)
        steps.push(`${kind.name} ${status === 200 ? "" : `(status ${status}) `}${now - last >= 0 ? "+" : ""}${(now - last).toFixed(0)}`)
        last = now
      }
      await sleep(smoke ? 500 : 5000)
      const loaded = rssMb(pid)
      let sttAt: number | undefined
      if (!smoke) {
        // Cloning recognises its sample too: the last release comes STT_IDLE_RELEASE_S after the
        // last answer at the latest.
        await sleep(Math.max(0, answeredAt + (STT_IDLE_RELEASE_S + 5) * 1000 - Date.now()))
        sttAt = rssMb(pid)
      }
      const rest = sttAt ?? loaded
      atRest.set(workers, rest)
      console.log(
        `  ${workers} worker(s): ready ${ready.toFixed(0)} MB; then MB added by the first of each kind: ${steps.join(", ")}; 5 s after the last ${loaded.toFixed(0)} MB` +
          (sttAt === undefined ? "" : `; at rest once the speech-to-text models were given back (${STT_IDLE_RELEASE_S} s unused) ${sttAt.toFixed(0)} MB`) +
          (workers === 2 ? "  (target <= 300 MB at rest)" : "")
      )
    } finally {
      await stop(service.child)
    }
  }
  if (atRest.has(1) && atRest.has(3)) {
    console.log(
      `  each additional worker thread at rest: ${((atRest.get(3)! - atRest.get(1)!) / 2).toFixed(0)} MB (each kind ran once, so each engine is loaded in one thread; ` +
        `a thread that has run every kind holds the sum of the kinds' figures above as well)`
    )
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await memoryBench()
