/**
 * bench/translate: latency of one append-only translation chunk through the service (POST
 * /translate/chunk, JSON and SSE) against the raw Apertium pipeline on the same chunks, measured
 * in one run on the same machine.
 *
 * Chunks are what a live-captioning client sends: meeting sentences cut into pieces of 3-8 words
 * (seeded), sent one after another with `previous` = everything appended so far. The raw
 * baseline is Apertium's own null-flush pipeline (`apertium-wblank-mode -z` of the same mode),
 * kept running and fed the same chunks in the same order: what the service adds is HTTP, JSON,
 * checking, credits and the process queue.
 *
 * Printed: p50 / p99 per chunk of raw Apertium, service JSON and service SSE (time to the first
 * `delta` and to `done`), and the ratios service / raw. Needs Debian `apertium` and
 * `apertium-eng-spa` (scripts/setup.sh installs them); without them it says so and exits 0.
 * Run: npm run bench:translate. Knobs: BENCH_CHUNKS (default 400). `--smoke`: 20 chunks.
 */
import { execFileSync, spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { smoke, startService, stop } from "./support.ts"

const MODE = "/usr/share/apertium/modes/eng-spa.mode"
const chunkCount = Number(process.env.BENCH_CHUNKS ?? (smoke ? 20 : 400))

const SENTENCES = [
  "good morning everyone and thanks for joining the weekly planning meeting",
  "we need to decide whether the release goes out on friday or next tuesday",
  "the test results from the staging server look much better than last week",
  "i will send the updated schedule to the whole team this afternoon",
  "our main customer asked for a simpler way to export their reports",
  "let us agree that the database migration happens before the holidays",
  "the budget for the new servers was approved by the finance department",
  "can someone check why the nightly build failed twice in a row",
  "she said the design review should include the people from support",
  "we decided to keep the old interface for another three months",
  "the meeting notes will be shared in the usual folder after lunch",
  "please remember that the office is closed on monday for maintenance"
]

/** Deterministic pseudo-random numbers (mulberry32), so every run sends the same chunks. */
const prng = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

const makeChunks = (n: number): Array<string> => {
  const random = prng(20261124)
  const out: Array<string> = []
  for (let s = 0; out.length < n; s++) {
    const words = SENTENCES[s % SENTENCES.length]!.split(" ")
    for (let i = 0; i < words.length && out.length < n;) {
      const take = 3 + Math.floor(random() * 6)
      out.push(words.slice(i, i + take).join(" "))
      i += take
    }
  }
  return out
}

const quantile = (xs: ReadonlyArray<number>, q: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]!
}

/** The raw engine: Apertium's pipeline in null-flush mode, one chunk in flight at a time. */
const rawApertium = () => {
  const pipeline = execFileSync("apertium-wblank-mode", ["-z", MODE], { encoding: "utf8" })
  const child = spawn("bash", ["-c", pipeline, "apertium", "-n", ""], { stdio: ["pipe", "pipe", "inherit"] })
  let pending: ((text: string) => void) | undefined
  let buffered = ""
  child.stdout.setEncoding("utf8")
  child.stdout.on("data", (d: string) => {
    buffered += d
    const end = buffered.indexOf("\0")
    if (end >= 0 && pending !== undefined) {
      const answer = buffered.slice(0, end)
      buffered = buffered.slice(end + 1)
      const resolve = pending
      pending = undefined
      resolve(answer)
    }
  })
  const escape = (s: string) => s.replace(/[\\[\]^$@*/<>{}#]/g, (c) => `\\${c}`)
  return {
    translate: (text: string) =>
      new Promise<string>((resolve) => {
        pending = resolve
        child.stdin.write(`${escape(text)}[]\0`)
      }),
    close: () => child.kill()
  }
}

const timeMs = async <A>(f: () => Promise<A>) => {
  const t0 = performance.now()
  const value = await f()
  return { ms: performance.now() - t0, value }
}

const main = async () => {
  if (!existsSync(MODE)) {
    console.log(`bench:translate skipped: ${MODE} is missing (install Debian apertium and apertium-eng-spa: bash scripts/setup.sh)`)
    return
  }
  const chunks = makeChunks(chunkCount)
  console.log(`bench:translate: ${chunks.length} chunks of 3-8 words, English to Spanish`)

  const raw = rawApertium()
  await raw.translate("warm up")
  const rawMs: Array<number> = []
  for (const c of chunks) rawMs.push((await timeMs(() => raw.translate(c))).ms)
  raw.close()

  const service = await startService({ TRANSLATE_RATE_PER_S: "100000", TRANSLATE_BURST: "100000" })
  try {
    const url = `${service.site}/api/v1/translate/chunk`
    const post = (body: unknown, sse: boolean) =>
      fetch(url + (sse ? "?stream=true" : ""), { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })
    await (await post({ new_source: "warm up", source: "en", target: "es", previous: "" }, false)).text()

    const jsonMs: Array<number> = []
    let previous = ""
    for (const c of chunks) {
      const { ms, value } = await timeMs(async () => {
        const res = await post({ new_source: c, source: "en", target: "es", previous: previous.slice(-200) }, false)
        if (res.status !== 200) throw new Error(`translate answered ${res.status}: ${await res.text()}`)
        return (await res.json()) as { appended: string }
      })
      previous += value.appended
      jsonMs.push(ms)
    }

    const firstMs: Array<number> = []
    const doneMs: Array<number> = []
    previous = ""
    for (const c of chunks) {
      const t0 = performance.now()
      const res = await post({ new_source: c, source: "en", target: "es", previous: previous.slice(-200) }, true)
      const reader = res.body!.getReader()
      const decoder = new TextDecoder()
      let text = ""
      let first: number | undefined
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        text += decoder.decode(value, { stream: true })
        if (first === undefined && text.includes("event: delta")) first = performance.now() - t0
      }
      if (!text.includes("event: done")) throw new Error(`the stream ended without done: ${text}`)
      for (const m of text.matchAll(/event: delta\ndata: (.*)\n/g)) previous += (JSON.parse(m[1]!) as { appended: string }).appended
      firstMs.push(first ?? performance.now() - t0)
      doneMs.push(performance.now() - t0)
    }

    const row = (name: string, xs: ReadonlyArray<number>) =>
      console.log(`${name.padEnd(28)} p50 ${quantile(xs, 0.5).toFixed(2).padStart(7)} ms   p99 ${quantile(xs, 0.99).toFixed(2).padStart(7)} ms`)
    row("raw apertium pipeline", rawMs)
    row("service JSON", jsonMs)
    row("service SSE, first delta", firstMs)
    row("service SSE, done", doneMs)
    const ratio = (xs: ReadonlyArray<number>, q: number) => (quantile(xs, q) / quantile(rawMs, q)).toFixed(2)
    console.log(`ratio service JSON / raw:    p50 ${ratio(jsonMs, 0.5)}x   p99 ${ratio(jsonMs, 0.99)}x`)
    console.log(`ratio SSE first delta / raw: p50 ${ratio(firstMs, 0.5)}x   p99 ${ratio(firstMs, 0.99)}x`)
    console.log(`sample: ${chunks.slice(0, 3).join(" | ")} → ${previous.slice(0, 160)}`)
  } finally {
    await stop(service.child)
  }
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
