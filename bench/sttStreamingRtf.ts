/**
 * A tiny measurement, not a test (issue 39, engine layer): the real-time factor of PocketSphinx's
 * streaming decode on one core, raw (FFI calls on this thread, no pool) and through the service's
 * engine (StreamingRecognizer → one pool session on one worker thread), on the five LibriVox
 * recordings of Debian's pocketsphinx-testdata sent as fast as they decode in 100 ms blocks.
 * RTF = CPU seconds / audio seconds for one stream (lower is better; 1 / RTF is how many
 * 1×-real-time streams a core could hold, before any other load). CPU, not wall time: the
 * machine is shared (load average 8-10 on 2 cores while this was written), and CPU time is what
 * a stream costs whoever else runs; the service's figure is the whole process's CPU (the main
 * thread's conversion and posting, the worker's decoding). Each figure is the best of `REPEATS`. Run: `npx tsx bench/sttStreamingRtf.ts`.
 *
 *  - raw live: start_utt, process_raw per block, get_hyp every 160 ms, end_utt, the segments
 *    (what `finalPass: "live"` does);
 *  - raw live + final: what the service does by default: the live pass on a decoder without
 *    fwdflat (partials only), the whole utterance again on a second decoder at the commit;
 *  - service: the same work as "raw live + final", through the pool's session port;
 *  - memory per idle session: RSS of this process with 2 sessions open (each thread then holds
 *    one spare decoder) and with IDLE more, none of which has said anything.
 */
import { Effect, Exit, Layer, ManagedRuntime, Scope } from "effect"
import { int16ToBytesLE } from "../engines/audio/Pcm.ts"
import { PoolStreamingRecognizer, StreamingRecognizer } from "../engines/asr/StreamingRecognizer.ts"
import { WorkerPool } from "../runtime/WorkerPool.ts"
import { BLOCK, bestRtf, LIBRIVOX_IDS, librivoxPcm, processCpuSeconds as cpu, rawStreamingRtf } from "./sttStreamingRaw.ts"
import { smoke } from "./support.ts"

const IDS = smoke ? ["0880"] : LIBRIVOX_IDS
const REPEATS = smoke ? 1 : 3

const recordings = IDS.map(librivoxPcm)
const { live: rawLive, liveAndFinal: rawFinal, audioSeconds } = await rawStreamingRtf(recordings, REPEATS)
const best = (f: () => Promise<void> | void) => bestRtf(REPEATS, audioSeconds, f)

const runtime = ManagedRuntime.make(PoolStreamingRecognizer.layer().pipe(Layer.provideMerge(WorkerPool.layer({ workers: 1, maxQueue: 8, sessionsPerWorker: 1 }))))
const service = await best(() =>
  runtime.runPromise(Effect.scoped(Effect.gen(function*() {
    const r = yield* Effect.flatMap(StreamingRecognizer, (s) => s.open({ audioFormat: "pcm_16000", language: "en" }, () => {}))
    for (const pcm of recordings) {
      const bytes = int16ToBytesLE(pcm)
      for (let at = 0; at < bytes.length; at += BLOCK * 2) yield* r.push(bytes.subarray(at, Math.min(bytes.length, at + BLOCK * 2)))
      yield* r.commit
    }
  })))
)

// Commit latency: the audio is all decoded live (a `stats` call returns after every push before
// it), then the commit alone, i.e. ps_end_utt plus the final pass over the whole utterance.
const commits: Array<string> = []
await runtime.runPromise(Effect.scoped(Effect.gen(function*() {
  const r = yield* Effect.flatMap(StreamingRecognizer, (s) => s.open({ audioFormat: "pcm_16000", language: "en" }, () => {}))
  for (const pcm of recordings) {
    let fastest = Infinity
    let fastestCpu = NaN
    for (let i = 0; i < REPEATS; i++) {
      const bytes = int16ToBytesLE(pcm)
      for (let at = 0; at < bytes.length; at += BLOCK * 2) yield* r.push(bytes.subarray(at, Math.min(bytes.length, at + BLOCK * 2)))
      yield* r.stats
      const t0 = performance.now()
      const c0 = cpu()
      yield* r.commit
      const wall = performance.now() - t0
      if (wall < fastest) {
        fastest = wall
        fastestCpu = (cpu() - c0) * 1000
      }
    }
    commits.push(`${(pcm.length / 16000).toFixed(1)} s → ${fastestCpu.toFixed(0)} ms CPU (${fastest.toFixed(0)} ms wall)`)
  }
})))
await runtime.dispose()

const IDLE = smoke ? 8 : 98
const rssMb = () => process.memoryUsage().rss / 1e6
const idle = ManagedRuntime.make(PoolStreamingRecognizer.layer().pipe(Layer.provideMerge(WorkerPool.layer({ workers: 2, maxQueue: 8, sessionsPerWorker: IDLE }))))
const memory = await idle.runPromise(Effect.gen(function*() {
  const s = yield* StreamingRecognizer
  const scope = yield* Scope.make()
  const open = (i: number) => s.open({ audioFormat: i % 2 === 0 ? "pcm_16000" : "ulaw_8000", language: "en" }, () => {}).pipe(Scope.provide(scope))
  const first = [yield* open(0), yield* open(1)]
  const stats = [yield* first[0]!.stats, yield* first[1]!.stats]
  const base = rssMb()
  for (let i = 0; i < IDLE; i++) yield* open(i)
  const more = rssMb()
  yield* Scope.close(scope, Exit.void)
  return { base, more, decoders: stats.map((x) => x.decodersLive).join("+") }
}))
await idle.dispose()

const row = (name: string, rtf: number) => console.log(`${name.padEnd(22)} RTF ${rtf.toFixed(3)}  (${(1 / rtf).toFixed(1)} streams per core at 1× real time)`)
console.log(`${recordings.length} recordings, ${audioSeconds.toFixed(1)} s of audio, 100 ms blocks, best of ${REPEATS}`)
row("raw live", rawLive)
row("raw live + final pass", rawFinal)
row("service (session)", service)
console.log(`service / raw (same work): ${(service / rawFinal).toFixed(2)}×`)
console.log(`memory: RSS ${memory.base.toFixed(0)} MB with 2 sessions (decoders ${memory.decoders}), ${memory.more.toFixed(0)} MB with ${IDLE} idle ones more: ${(((memory.more - memory.base) * 1000) / IDLE).toFixed(0)} KB per idle session`)
console.log(`commit latency (live end_utt + final pass), best of ${REPEATS}: ${commits.join(", ")}`)
