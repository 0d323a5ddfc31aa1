import { spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import { closeSync, openSync, readdirSync, readFileSync, readlinkSync, writeSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { Worker } from "node:worker_threads"
import koffi from "koffi"
import t from "tap"
import { espeakLockBuffer } from "../../../engines/tts/EspeakLock.ts"
import { EspeakNative } from "../../../engines/tts/EspeakNative.ts"
import { writableSegment } from "../../../engines/tts/Elf.ts"
import { LIBESPEAK_PATH, probeCopy } from "../../../engines/tts/EspeakNativeLib.ts"
import { PrivateRand, randCode } from "../../../engines/tts/EspeakRand.ts"
import { EspeakRuntime, joinSamples } from "../../../engines/tts/EspeakRuntime.ts"

// scripts/setup.sh installs Debian's libespeak-ng1; without it the service falls back to the
// bundled build, but this suite is about the native one and fails rather than skips.
const native = EspeakNative.load()
t.ok(native, `native espeak-ng loads (${EspeakNative.reason ?? "ok"})`)
if (native === null) process.exit(1)

const params = { rateWpm: 175, pitch: 50 }
const text = "Tere, kuidas läheb? Hästi, aitäh! The rain in Spain & <tags> [[stay]]."
const sha = (samples: Int16Array) => createHash("sha1").update(Buffer.from(samples.buffer, samples.byteOffset, samples.byteLength)).digest("hex")
const hashOf = (voice: string, s = text) => sha(native.synthesize(voice, params, s).samples)

t.test("the same request gives the same samples, whatever was spoken in between", async (t) => {
  // Plain, breathy (rand) and Klatt (rand) variants, interleaved: each instance rewinds to its own
  // post-warm-up state, and its private rand() is seeded before each synthesis.
  const voices = ["et", "fr", "et+f3", "en-us+klatt", "en+m3"]
  const first = new Map(voices.map((v) => [v, hashOf(v)]))
  for (let round = 0; round < 3; round++) {
    for (const v of [...voices].reverse()) t.equal(hashOf(v), first.get(v), `${v}, round ${round}`)
  }
  t.equal(new Set(first.values()).size, voices.length, "different voices sound different")
})

t.test("worker threads speaking at once get the main thread's samples (private copies, private rand)", async (t) => {
  const voices = ["et", "et+f3", "en+klatt", "de+f5", "lv", "en+Storm"]
  const expected = Object.fromEntries(voices.map((v) => [v, [hashOf(v)]]))
  const run = () =>
    new Promise<Record<string, Array<string>>>((resolve, reject) => {
      const w = new Worker(new URL("../../fixtures/espeakNativeWorker.mjs", import.meta.url), {
        workerData: { voices, rounds: 6, text, espeakLock: espeakLockBuffer }
      })
      w.once("message", resolve)
      w.once("error", reject)
    })
  const results = await Promise.all([run(), run()])
  for (const r of results) t.same(r, expected)
})

t.test("copies outlive the worker threads that made them; espeak's idle threads block signals", async (t) => {
  // Each copy's in-memory file (/memfd:speech-espeak-<thread>-<n>) is mapped at file offset 0 once.
  const copiesMapped = () => readFileSync("/proc/self/maps", "utf8").split("\n").filter((l) => / 00000000 .*\/memfd:speech-espeak-\d+-\d+ /.test(l)).length
  const before = copiesMapped()
  const worker = new Worker(new URL("../../fixtures/espeakNativeWorker.mjs", import.meta.url), {
    workerData: { voices: ["et"], rounds: 1, text: "Tere.", espeakLock: espeakLockBuffer }
  })
  await new Promise((resolve) => worker.once("exit", resolve))
  await new Promise((resolve) => setTimeout(resolve, 200))
  // Unmapped, the idle thread of a copy would wait on freed memory (a signal to it aborted the process).
  t.ok(copiesMapped() > before, `the ended worker's copies are still mapped (${before} before it, ${copiesMapped()} after)`)
  const masks = readdirSync("/proc/self/task").map((tid) => /SigBlk:\s+(\w+)/.exec(readFileSync(`/proc/self/task/${tid}/status`, "utf8"))?.[1] ?? "")
  // All blockable signals: glibc keeps its two internal ones (32, 33) open.
  t.ok(masks.filter((m) => m === "fffffffe7ffbfeff").length >= 2, `idle threads with every signal blocked (${masks.join(" ")})`)
})

t.test("more voices than instances: retargeted instances sound as fresh ones", async (t) => {
  const voices = ["et", "fi", "sv", "da", "nb", "de", "nl", "it", "es", "pt", "pl", "cs"]
  const first = voices.map((v) => hashOf(v, "Üks, kaks, kolm."))
  t.same(voices.map((v) => hashOf(v, "Üks, kaks, kolm.")), first, "after every instance was retargeted, some twice")
})

t.test("the heap follows the rewinds: what a synthesis allocates is freed, not leaked", async (t) => {
  // A Russian voice reading a Latin-script word loads an English translator (181 KB) each time.
  const text = "Я купил новый iPhone вчера."
  const first = hashOf("ru", text)
  const before = native.reclaimedBlocks("ru")
  for (let i = 0; i < 10; i++) t.equal(hashOf("ru", text), first, `call ${i + 2}`)
  t.ok(native.reclaimedBlocks("ru") - before >= 10, `${native.reclaimedBlocks("ru") - before} blocks freed at 10 rewinds`)
})

t.test("under glibc's malloc checks (freed memory overwritten, double frees abort) the samples are the same", async (t) => {
  const cases: Array<[string, string]> = [
    ["ru", "Я купил новый iPhone вчера."],
    ["en", "नमस्ते दुनिया and hello."],
    ["el", "Γεια σου Maria, τι κάνεις;"],
    ["et+f3", text],
    ["en-us+klatt", "Numbers: 1,234.5 and [[h@l'oU]]."]
  ]
  const child = spawnSync(process.execPath, ["--import", "tsx", fileURLToPath(new URL("../../fixtures/espeakNativeHardened.ts", import.meta.url)), JSON.stringify(cases)], {
    encoding: "utf8",
    env: { ...process.env, LD_PRELOAD: "/lib/x86_64-linux-gnu/libc_malloc_debug.so.0", MALLOC_CHECK_: "3", MALLOC_PERTURB_: "165" }
  })
  t.equal(child.status, 0, `exit ${child.status} ${child.signal ?? ""} ${child.stderr.slice(-400)}`)
  t.same(JSON.parse(child.stdout.trim().split("\n").pop() ?? "[]"), cases.map(([v, s]) => hashOf(v, s)))
})

t.test("blocks: streamed blocks join to the whole; stopping after one block stops there", async (t) => {
  const whole = native.synthesize("et", params, text)
  const blocks: Array<Int16Array> = []
  const streamed = native.synthesize("et", params, text, (b) => (blocks.push(b), true))
  t.equal(streamed.samples.length, 0, "no joined copy when streaming")
  t.equal(streamed.sampleCount, whole.sampleCount)
  t.equal(sha(Int16Array.from(blocks.flatMap((b) => [...b]))), sha(whole.samples), "byte-identical")
  t.ok(blocks.length >= 20, `${blocks.length} blocks of ≤ 100 ms`)
  t.ok(blocks.every((b) => b.length <= 2206), "each at most 100 ms (2206 samples, as the bundled build) at 22050 Hz")
  let calls = 0
  const stopped = native.synthesize("et", params, text, () => ++calls < 1)
  t.equal(calls, 1, "no block after the one that said stop")
  t.equal(stopped.sampleCount, blocks[0]!.length)
  t.equal(hashOf("et"), sha(whole.samples), "the next call is unaffected by the stop")
})

t.test("a block sink that speaks again on the same voice is refused, the outer call completes", async (t) => {
  const whole = native.synthesize("et", params, text)
  let inner: unknown
  let total = 0
  const outer = native.synthesize("et", params, text, (b) => {
    total += b.length
    if (inner === undefined) {
      try {
        native.synthesize("et", params, "Tere.")
        inner = "ran"
      } catch (e) {
        inner = e
      }
    }
    return true
  })
  t.not(inner, "ran", "the inner call threw")
  t.equal(outer.sampleCount, whole.sampleCount, "the outer synthesis was not cut short")
  t.equal(total, whole.sampleCount)
  t.equal(hashOf("et"), sha(whole.samples), "and the next call is as before")
})

t.test("events map back to the original text, escapes included", async (t) => {
  const { events } = native.synthesize("en", params, text)
  const words = events.filter((e) => e.type === "word").map((e) => text.slice(e.charStart, e.charEnd))
  for (const w of ["Tere", "kuidas", "rain", "Spain", "tags"]) t.ok(words.includes(w), `word "${w}" (${words.join("|")})`)
  t.ok(events.some((e) => e.type === "phoneme" && e.phoneme !== undefined && e.phoneme.length > 0), "IPA phoneme events")
  t.ok(events.every((e) => e.charStart >= 0 && e.charEnd <= text.length && e.charStart <= e.charEnd), "spans inside the text")
  for (let i = 1; i < events.length; i++) t.ok(events[i]!.audioMs >= events[i - 1]!.audioMs - 1, `event ${i} in time order`)
})

t.test("the native and the bundled build say the same thing (different versions, close timing)", async (t) => {
  const bundled = await EspeakRuntime.load()
  const a = native.synthesize("et", params, text)
  const b = bundled.withVoice("et", params, (s) => s.synthesize(text))
  t.equal(native.sampleRate, bundled.sampleRate)
  t.ok(Math.abs(a.sampleCount / b.sampleCount - 1) < 0.05, `${a.sampleCount} vs ${b.sampleCount} samples`)
  // 1.51 also marks some blanks after punctuation as words; EspeakTts skips blank words.
  const words = (ev: typeof a.events) =>
    ev.filter((e) => e.type === "word" && text.slice(e.charStart, e.charEnd).trim() !== "").map((e) => [e.charStart, e.charEnd])
  t.same(words(a.events), words(b.events), "same word spans")
  // The phoneme names (an 8-byte field of each event, read by offset in the native binding);
  // 1.52 marks stress on the vowel, 1.51 does not.
  const phonemes = (ev: typeof a.events) => ev.flatMap((e) => (e.type === "phoneme" ? [e.phoneme?.replace(/[ˈˌ]/g, "")] : []))
  t.same(phonemes(a.events), phonemes(b.events), "same phonemes, stress marks aside")
})

t.test("unknown voices and variants are refused", async (t) => {
  for (const v of ["xx", "et+nosuch", "et+f3+m1", "", "+f3"]) {
    t.notOk(native.has(v), v)
    t.throws(() => native.synthesize(v, params, "a"), { reason: "VoiceNotFound" } as unknown as Error, v)
  }
})

t.test("noisy voices draw from a rand() of their own: libc's, drawn from mid-synthesis, changes nothing", async (t) => {
  // Another library (onnxruntime's VAD) drawing from libc's shared generator while a breathy
  // voice speaks: here the block sink does it, on the synthesizing thread, between blocks.
  const libc = koffi.load("libc.so.6")
  const rand = libc.func("int rand(void)")
  const srand = libc.func("void srand(unsigned int seed)")
  for (const voice of ["et+f3", "en-us+klatt", "lv", "en+Storm"]) {
    const plain = sha(native.synthesize(voice, params, text).samples)
    const blocks: Array<Int16Array> = []
    native.synthesize(voice, params, text, (block) => {
      srand(blocks.length + 7)
      for (let i = 0; i < 37; i++) rand()
      blocks.push(block)
      return true
    })
    t.equal(sha(joinSamples(blocks, blocks.reduce((n, b) => n + b.length, 0))), plain, voice)
  }
})

t.test("the private rand(): glibc's range, a fixed sequence from a seed", async (t) => {
  const generator = new PrivateRand(koffi)
  const call = koffi.call as unknown as (fn: bigint, proto: unknown) => number
  const proto = koffi.proto("int private_rand(void)")
  const draw = () => call(generator.address, proto)
  generator.seed(1n)
  const first = Array.from({ length: 1000 }, draw)
  generator.seed(1n)
  t.same(Array.from({ length: 1000 }, draw), first, "the same seed, the same numbers")
  t.ok(first.every((x) => Number.isInteger(x) && x >= 0 && x <= 0x7fffffff), "0 to RAND_MAX")
  t.ok(new Set(first).size > 990, "no short cycle")
  const mean = first.reduce((a, b) => a + b, 0) / first.length / 0x7fffffff
  t.ok(Math.abs(mean - 0.5) < 0.05, `mean ${mean.toFixed(3)} of the range`)
  t.equal(randCode(0n).length, 48)
  // The generator is state = state × 6364136223846793005 + 1442695040888963407 (mod 2^64), out = state >> 33.
  let state = 1n
  const reference = Array.from({ length: 1000 }, () => {
    state = (state * 6364136223846793005n + 1442695040888963407n) & 0xffffffffffffffffn
    return Number(state >> 33n)
  })
  t.same(first, reference, "the MMIX sequence, bit for bit")
})

t.test("copies are sealed: their in-memory files cannot be written through /proc", async (t) => {
  const fds = readdirSync("/proc/self/fd").filter((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`).startsWith("/memfd:speech-espeak-")
    } catch {
      return false
    }
  })
  t.ok(fds.length > 0, `${fds.length} copies open`)
  const writable = openSync(`/proc/self/fd/${fds[0]}`, "r+")
  try {
    t.throws(() => writeSync(writable, Buffer.from([0x90]), 0, 1, 0), { code: "EPERM" }, "a write is refused")
  } finally {
    closeSync(writable)
  }
})

t.test("noisy language files count too: Latvian's breath and Storm's zeros give the same bytes on every call", async (t) => {
  // lang/bat/lv has a breath line; with libc's rand unseeded it gave a new hash on every call.
  const first = hashOf("lv")
  for (let i = 0; i < 3; i++) t.equal(hashOf("lv"), first, `call ${i + 2}`)
  t.equal(hashOf("en+Storm"), hashOf("en+Storm"), "Storm (breath of zeros)")
})

t.test("writableSegment reads the library's PT_LOAD and refuses anything else", async (t) => {
  const seg = writableSegment(readFileSync(LIBESPEAK_PATH))
  t.ok(seg.memsz > 0n && seg.memsz < 16n << 20n, `${seg.memsz} bytes at ${seg.vaddr}`)
  t.throws(() => writableSegment(new Uint8Array(64)), /ELF/)
  t.throws(() => writableSegment(readFileSync(process.execPath).subarray(0, 64).fill(0, 0x38, 0x3a)), /one writable/)
})

t.test("check: a copy loads and unloads on this machine, and the probe leaves nothing mapped", async (t) => {
  t.equal(EspeakNative.check(), undefined, "libespeak-ng1 is installed (scripts/setup.sh)")
  const mappedFiles = () => new Set(readFileSync("/proc/self/maps", "utf8").split("\n").filter((l) => l.includes("/memfd:speech-espeak-")).map((l) => l.split(/\s+/)[4]))
  const before = mappedFiles()
  probeCopy()
  t.same([...mappedFiles()].filter((inode) => !before.has(inode)), [], "no new copy stays mapped")
})
