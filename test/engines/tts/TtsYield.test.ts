/**
 * Streams that yield their thread (RunOptions.yields) through the real pool and the production
 * task module: a new realtime stream that finds the only worker busy gets it once the running
 * stream has sent 0.5 s, and the running stream's audio, made in two runs, is byte for byte what
 * one run makes. The long stream is ~25 s of audio (~25 ms of engine time here), so the second
 * request arrives while it runs; whether a yield happened is read from the pool's task count.
 */
import { Deferred, Effect, Exit, Fiber } from "effect"
import t from "tap"
import { concatInt16 } from "../../../engines/audio/Pcm.ts"
import { Inference } from "../../../engines/Inference.ts"
import { PoolTts, Tts } from "../../../engines/tts/Tts.ts"
import { findPreset } from "../../../engines/tts/Voices.ts"
import { WorkerPool } from "../../../runtime/WorkerPool.ts"

const voice = findPreset("mari")!.engineVoice
const LONG = Array.from({ length: 6 }, (_, i) => `Lause number ${i + 1} räägib pikalt ja põhjalikult ilmast, loodusest, metsast, merest ning kõigest muust, mis meie ümber on`).join(", ") + "."
const SHORT = "Tere, kuidas läheb?"

t.test("a busy worker's stream yields to a new one; its audio in two runs equals one run's", (t) =>
  Effect.runPromise(Effect.gen(function*() {
    const tts = yield* Tts
    const pool = yield* Inference
    const request = (text: string) => ({ text, voice, speed: 1, sampleRate: 24000 })
    const whole = yield* tts.synthesize(request(LONG), { priority: "batch" })
    t.ok(whole.pcm.length > 24000 * 15, `the long sentence is ${(whole.pcm.length / 24000).toFixed(1)} s of audio`)
    // The second request must arrive while the long one runs (~50 ms of engine time); on a
    // machine stalled for longer than that it may not, so up to five tries, each checked.
    let yielded = 0
    for (let attempt = 1; attempt <= 5 && yielded === 0; attempt++) {
      const before = pool.stats().completed
      const pieces: Array<Int16Array> = []
      const firstPiece = yield* Deferred.make<void>()
      const long = yield* Effect.forkChild(tts.synthesizeStream(request(LONG), { priority: "realtime" }, (pcm) => {
        pieces.push(pcm.slice())
        Deferred.doneUnsafe(firstPiece, Exit.void)
      }), { startImmediately: true })
      yield* Deferred.await(firstPiece)
      const shortPieces: Array<Int16Array> = []
      const short = yield* tts.synthesizeStream(request(SHORT), { priority: "realtime" }, (pcm) => shortPieces.push(pcm.slice()))
      const summary = yield* Fiber.join(long)
      const tasks = pool.stats().completed - before
      t.ok(tasks === 2 || tasks === 3, `try ${attempt}: ${tasks} pool tasks (3: the long stream yielded and ran twice)`)
      if (tasks === 3) yielded++
      t.same(concatInt16(pieces), whole.pcm, "the long stream's pieces are one run's PCM, byte for byte")
      t.equal(summary.samples, whole.pcm.length)
      t.same(summary.words, whole.words, "and its summary has every word")
      t.equal(summary.yielded, undefined)
      t.ok(concatInt16(shortPieces).length === short.samples && short.samples > 0, "the short stream is whole")
    }
    t.equal(yielded, 1, "the long stream yielded")
  }).pipe(
    Effect.provide(PoolTts.layer),
    Effect.provide(WorkerPool.layer({ workers: 1, maxQueue: 8 })),
    Effect.timeoutOrElse({ duration: "120 seconds", orElse: () => Effect.die(new Error("timed out")) })
  )))
