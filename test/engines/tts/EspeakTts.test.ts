import { Worker } from "node:worker_threads"
import t from "tap"
import { int16ToFloat, rms } from "../../../engines/audio/Pcm.ts"
import { escapeForSsml, EspeakRuntime } from "../../../engines/tts/EspeakRuntime.ts"
import { EspeakInstance } from "../../../engines/tts/EspeakNativeLib.ts"
import { EspeakTts } from "../../../engines/tts/EspeakTts.ts"
import type { EngineVoice } from "../../../engines/tts/TtsEngine.ts"
import { reasonOf, runTtsConformance } from "./ttsConformance.ts"

// Native where Debian's library is installed (scripts/test.sh installs it), else bundled.
const engine = await EspeakTts.load()
const bundled = await EspeakTts.load({ native: false })
const estonian: EngineVoice = { engine: "espeak", language: "et", variant: "et+f3", pitch: 1, rate: 1 }
const english: EngineVoice = { engine: "espeak", language: "en", variant: "en-us", pitch: 1, rate: 1 }

for (const [build, e] of [["default", engine], ["bundled", bundled]] as const) {
  t.test(`conformance (${build} build): Estonian with a variant`, async (t) => {
    runTtsConformance(t, { engine: e, voice: estonian, text: "Tere hommikust, kallis sõber! Kuidas sul täna läheb? Ilm on ilus ja päike paistab." })
  })

  t.test(`conformance (${build} build): English`, async (t) => {
    runTtsConformance(t, { engine: e, voice: english, text: "The quick brown fox jumps over the lazy dog. It was a sunny day, and everyone was happy." })
  })
}

t.test("the native build speaks the voices and rates it has; the bundled build the rest", async (t) => {
  t.equal(engine.buildFor({ voice: estonian, speed: 1 }), "native", "Estonian with a variant")
  t.equal(bundled.buildFor({ voice: estonian, speed: 1 }), "bundled", "native: false")
  // 1.52 voices Debian's 1.51 lacks, and rates where 1.51 would start libsonic.
  const tigrinya: EngineVoice = { engine: "espeak", language: "ti", variant: "ti", pitch: 1, rate: 1 }
  t.equal(engine.buildFor({ voice: tigrinya, speed: 1 }), "bundled", "Tigrinya (1.52 only)")
  t.ok((await engine.synthesize({ text: "ሰላም", voice: tigrinya, speed: 1 })).samples.length > 0, "and it is spoken")
  t.equal(engine.buildFor({ voice: { ...estonian, rate: 1.3 }, speed: 2 }), "bundled", "455 wpm")
  t.equal(engine.buildFor({ voice: { ...estonian, rate: 1.28 }, speed: 2 }), "native", "448 wpm")
  t.ok(engine.capabilities.languages.includes("ti") && engine.capabilities.languages.includes("et"), "languages of both builds")
})

t.test("the build has Estonian, many languages and the variants", async (t) => {
  const runtime = await EspeakRuntime.load()
  t.equal(runtime.sampleRate, 22050)
  t.ok(runtime.languageNames.has("et"), "Estonian")
  t.ok(runtime.languageNames.size >= 100, `${runtime.languageNames.size} language names`)
  for (const v of ["f1", "f3", "m1", "m7"]) t.ok(runtime.variants.has(v), `variant ${v}`)
  t.equal(EspeakRuntime.load(), EspeakRuntime.load(), "one runtime per thread")
})

t.test("unknown voice or variant is an error, never a silent fallback", async (t) => {
  for (const variant of ["xx", "et+nosuchvariant", "et+f3+m1", "", "+f3"]) {
    t.equal(await reasonOf(engine.synthesize({ text: "Tere", voice: { ...estonian, variant }, speed: 1 })), "VoiceNotFound", `"${variant}"`)
  }
  // After a refused voice the next request still gets its own voice.
  const a = await engine.synthesize({ text: "Tere", voice: estonian, speed: 1 })
  const b = await engine.synthesize({ text: "Tere", voice: { ...estonian, variant: "en-us" }, speed: 1 })
  t.notOk(Buffer.from(a.samples.buffer).equals(Buffer.from(b.samples.buffer)), "different voices sound different")
})

t.test("pitch, rate and variant change the audio", async (t) => {
  const text = "Tere hommikust, kallis sõber!"
  const base = await engine.synthesize({ text, voice: estonian, speed: 1 })
  const higher = await engine.synthesize({ text, voice: { ...estonian, pitch: 1.6 }, speed: 1 })
  const slower = await engine.synthesize({ text, voice: { ...estonian, rate: 0.7 }, speed: 1 })
  const male = await engine.synthesize({ text, voice: { ...estonian, variant: "et+m3" }, speed: 1 })
  const same = (a: Float32Array, b: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength))
  t.notOk(same(higher.samples, base.samples), "pitch")
  t.ok(slower.samples.length > base.samples.length * 1.2, "rate 0.7 is longer")
  t.notOk(same(male.samples, base.samples), "variant")
  t.ok(rms(higher.samples) > 0.01 && rms(male.samples) > 0.01)
})

t.test("SSML and phoneme syntax in text is spoken as text, offsets map back", async (t) => {
  const text = "Tom & Jerry <speak>hi</speak> [[h@'loU]] end"
  const r = await engine.synthesize({ text, voice: english, speed: 1 })
  const words = r.words.map((w) => w.text)
  t.ok(words.includes("Tom") && words.includes("Jerry") && words.includes("end"), words.join(" "))
  t.ok(words.includes("speak"), "tags are read, not interpreted")
  t.ok(words.includes("h") || words.includes("loU"), "[[...]] is not phoneme input")
  for (const w of r.words) t.equal(text.slice(w.charStart, w.charEnd), w.text)
  const { escaped, start, end } = escapeForSsml("a&b[[c😀")
  t.equal(escaped, "a&amp;b[ [c😀")
  t.equal(start.length, [...escaped].length)
  t.same([start[1], end[5]], [1, 2], "entity maps to the '&'")
  t.same([start[11], end[11]], [6, 8], "astral character spans two UTF-16 units")
})

t.test("control characters are blanks, not espeak commands or the end of the text", async (t) => {
  const { escaped, start } = escapeForSsml("a\u0000b\u0001450S\tc\n")
  t.equal(escaped, "a b 450S\tc\n", "NUL and U+0001 blanked; tab and newline kept")
  t.equal(start.length, [...escaped].length, "positions still map one to one")
  const plain = await engine.synthesize({ text: "Tere kuidas sul läheb", voice: estonian, speed: 1 })
  const withNul = await engine.synthesize({ text: "Tere\u0000kuidas sul läheb", voice: estonian, speed: 1 })
  t.ok(withNul.samples.length > plain.samples.length * 0.8, `the words after a NUL are spoken (${withNul.samples.length} vs ${plain.samples.length} samples)`)
  const fast = await engine.synthesize({ text: "\u0001450S Tere kuidas sul läheb", voice: estonian, speed: 1 })
  t.ok(fast.samples.length > plain.samples.length * 0.8, `an embedded rate command is not obeyed (${fast.samples.length} vs ${plain.samples.length})`)
})

t.test("long text (8000 chars) synthesizes with sane timings", async (t) => {
  const text = "Tere hommikust, kallis sõber! Kuidas läheb? ".repeat(180).slice(0, 8000)
  const r = await engine.synthesize({ text, voice: estonian, speed: 1 })
  const seconds = r.samples.length / r.sampleRate
  t.ok(seconds > 300 && seconds < 1200, `${seconds.toFixed(0)} s`)
  t.ok(r.words.length > 1000, `${r.words.length} words`)
})

t.test("the memory restore runs after a use: the same bytes whether the next call comes at once, after the deferred restore, or after another text", async (t) => {
  const request = { text: "Tere hommikust, kallis sõber!", voice: estonian, speed: 1 }
  const bytes = async () => {
    const { samples } = await engine.synthesize(request)
    return Buffer.from(samples.buffer, samples.byteOffset, samples.byteLength).toString("base64")
  }
  const reference = await bytes()
  // Back to back (microtasks only): the next call restores inline.
  const atOnce = await bytes()
  // After a macrotask turn: the deferred restore has run, the call starts on pristine memory.
  await new Promise((resolve) => setImmediate(resolve))
  const afterIdle = await bytes()
  // Another text and voice in between leave nothing behind.
  await engine.synthesize({ text: "Something else entirely, in English.", voice: english, speed: 1.3 })
  const afterOther = await bytes()
  t.equal(atOnce, reference, "back to back")
  t.equal(afterIdle, reference, "after the deferred restore")
  t.equal(afterOther, reference, "after another synthesis")
  const streamed: Array<Float32Array> = []
  await new Promise((resolve) => setTimeout(resolve, 5))
  await engine.synthesizeBlocks(request, (block) => (streamed.push(block instanceof Int16Array ? int16ToFloat(block) : block), true))
  const joined = new Float32Array(streamed.reduce((n, b) => n + b.length, 0))
  let at = 0
  for (const b of streamed) (joined.set(b, at), (at += b.length))
  t.equal(Buffer.from(joined.buffer).toString("base64"), reference, "streamed after idle equals the whole")
})

/**
 * The restore zero-fills only up to the allocator's break, on the claim that nothing above it is
 * written between restores. Checked here after uses of every kind: nothing above the break is
 * ever non-zero, and after the restore all memory past the snapshot is zero, as a full fill of
 * all memory would leave it.
 */
t.test("the restore's zero-fill up to the break leaves memory as a full fill would", async (t) => {
  const runtime = await EspeakRuntime.load()
  const inside = runtime as unknown as {
    readonly m: { readonly HEAPU8: Uint8Array; readonly HEAPU32: Uint32Array }
    readonly breakWord: number | undefined
    readonly snapshot: Uint8Array
    restore(): void
    breakValue(heap: Uint8Array): number
  }
  t.ok(inside.breakWord !== undefined, "the probe found the break word in this build")
  const firstNonZero = (heap: Uint8Array, from: number) => {
    for (let i = from; i < heap.length; i += 4096) {
      const end = Math.min(heap.length, i + 4096)
      for (let j = i; j < end; j++) if (heap[j] !== 0) return j
    }
    return -1
  }
  const uses: Array<[string, () => Promise<unknown>]> = [
    ["Estonian", () => engine.synthesize({ text: "Tere hommikust, kallis sõber!", voice: estonian, speed: 1 })],
    ["8,000 characters", () => engine.synthesize({ text: "A long sentence that goes on, and on. ".repeat(210), voice: english, speed: 1 })],
    ["markup and phoneme syntax", () => engine.synthesize({ text: "<speak>[[h@'loU]] & <b>x</b> 3.14 $5 e.g. 1999</speak>", voice: english, speed: 2 })],
    ["IPA for Piper", () => Promise.resolve(runtime.withVoice("de", { rateWpm: 175, pitch: 50 }, (s) => s.textToIpa("Guten Tag, wie geht es Ihnen heute?")))],
    ["streamed in blocks", () => engine.synthesizeBlocks({ text: "Üks, kaks, kolm. Neli, viis, kuus.", voice: estonian, speed: 0.7 }, () => true)]
  ]
  for (const [name, use] of uses) {
    await use()
    const heap = inside.m.HEAPU8
    const brk = inside.m.HEAPU32[inside.breakWord! >>> 2]!
    t.equal(firstNonZero(heap, brk), -1, `${name}: nothing written above the break (${(brk / 1e6).toFixed(2)} MB of ${(heap.length / 1e6).toFixed(1)})`)
    t.equal(inside.breakValue(heap), brk, `${name}: the restore zero-fills up to the break, not all of memory`)
    inside.restore()
    t.equal(firstNonZero(inside.m.HEAPU8, inside.snapshot.length), -1, `${name}: after the restore, all zero past the snapshot`)
  }
  const reference = await engine.synthesize({ text: "Tere hommikust, kallis sõber!", voice: estonian, speed: 1 })
  await engine.synthesize({ text: "A long sentence that goes on, and on. ".repeat(210), voice: english, speed: 1 })
  const after = await engine.synthesize({ text: "Tere hommikust, kallis sõber!", voice: estonian, speed: 1 })
  t.ok(Buffer.from(after.samples.buffer).equals(Buffer.from(reference.samples.buffer)), "the same bytes after a long text grew the heap")
})

t.test("the bundled build loads only when a request needs it (a fresh worker thread)", async (t) => {
  const worker = new Worker(new URL("../../fixtures/espeakLazyWorker.mjs", import.meta.url))
  const steps = await new Promise<Record<string, unknown>>((resolve, reject) => {
    worker.once("message", resolve)
    worker.once("error", reject)
  })
  await worker.terminate()
  t.same(steps, { loaded: false, afterNative: false, nativeSamples: steps.nativeSamples, afterBundled: true, bundledSamples: steps.bundledSamples })
  t.ok((steps.nativeSamples as number) > 0 && (steps.bundledSamples as number) > 0, "both spoke")
})

// Last: it leaves one voice marked as failed in this thread's native runtime.
t.test("a voice whose native copy fails to load is spoken by the bundled build from then on", async (t) => {
  // Eight voices fill the thread's instances; the ninth retargets one, which is made to fail.
  for (const variant of ["de", "fr", "it", "es", "pl", "nl", "sv", "fi"]) await engine.synthesize({ text: "a", voice: { ...english, variant }, speed: 1 })
  const victim: EngineVoice = { engine: "espeak", language: "hu", variant: "hu", pitch: 1, rate: 1 }
  t.equal(engine.buildFor({ voice: victim, speed: 1 }), "native")
  const retarget = EspeakInstance.prototype.retarget
  EspeakInstance.prototype.retarget = () => {
    throw new Error("injected load failure")
  }
  try {
    const text = "Jó napot kívánok"
    const spoken = await engine.synthesize({ text, voice: victim, speed: 1 })
    const expected = await bundled.synthesize({ text, voice: victim, speed: 1 })
    t.same(Buffer.from(spoken.samples.buffer), Buffer.from(expected.samples.buffer), "the bundled build's samples")
    t.equal(engine.buildFor({ voice: victim, speed: 1 }), "bundled", "and the voice stays there")
  } finally {
    EspeakInstance.prototype.retarget = retarget
  }
  const other = await engine.synthesize({ text: "Tere", voice: estonian, speed: 1 })
  t.ok(other.samples.length > 0 && engine.buildFor({ voice: estonian, speed: 1 }) === "native", "other voices stay native")
})
