/**
 * Audio output buffers that go round between the main thread and the workers instead of being
 * made anew for every segment.
 *
 * Why: a buffer a worker transfers arrives on the main thread as a new ArrayBuffer, and V8
 * counts its bytes against the old generation's allocation limit until a full mark-compact
 * finds it dead. Under sync TTS load that ran a mark-compact of the main thread's ~30 MB heap
 * for every ~10 MB of audio (40-60 in 10 s, most of their work on V8's helper threads).
 * Transferring the buffer away again detaches it, which takes its bytes off that count at
 * once. So the main thread hands buffers it has finished with (written to the socket) back with
 * the next synthesis task (`Inference.recycle`, `RunOptions.spares`), and the worker writes its
 * next output into one of them.
 *
 * This module is the worker's side: the spares it holds, and outputs made from them. Hazard:
 * an output is a view of `samples` at the start of a spare that may be longer, so its `.buffer`
 * holds stale samples past the view; read it through the view (byteOffset, byteLength), as
 * `int16ToBytesLE` does. Outputs below `SPARE_MIN_BYTES` or above `SPARE_MAX_BYTES` are
 * allocated exactly and never recycled: small ones are not worth a message (and small Node
 * Buffers share pooled memory), long ones (unchunked minutes of audio) would not fit the caps.
 */
import { concat } from "./audio/Pcm.ts"

/** Smallest buffer worth sending round, bytes (~0.35 s of 24 kHz s16). */
export const SPARE_MIN_BYTES = 16 * 1024
/** Largest, bytes (~22 s of 24 kHz s16: a long sentence). */
export const SPARE_MAX_BYTES = 1024 * 1024
/** Spares one thread keeps at most, bytes; the rest are left to the garbage collector. */
export const SPARES_HELD_BYTES = 4 * 1024 * 1024

/** Ascending by size. */
const free: Array<ArrayBuffer> = []
let heldBytes = 0

/** Takes spares sent with a task; detached or small ones, and any beyond the cap, are dropped. */
export const addSpares = (buffers: ReadonlyArray<ArrayBuffer>): void => {
  for (const buffer of buffers) {
    if (!isSpareSize(buffer.byteLength) || heldBytes + buffer.byteLength > SPARES_HELD_BYTES) continue
    let at = free.length
    while (at > 0 && free[at - 1]!.byteLength > buffer.byteLength) at--
    free.splice(at, 0, buffer)
    heldBytes += buffer.byteLength
  }
}

/** Whether a buffer of this many bytes goes round. */
export const isSpareSize = (bytes: number): boolean => bytes >= SPARE_MIN_BYTES && bytes <= SPARE_MAX_BYTES

/**
 * Room for `samples` s16 samples: the smallest spare that fits in less than twice the room (a
 * 0.5 s streamed piece must not take a sentence's 512 KiB spare: a client that reads slowly holds
 * its pieces), else a new buffer.
 */
export const int16Output = (samples: number): Int16Array => {
  const bytes = samples * 2
  if (!isSpareSize(bytes)) return new Int16Array(samples)
  const at = free.findIndex((b) => b.byteLength >= bytes && b.byteLength < 2 * bytes)
  if (at >= 0) {
    const [spare] = free.splice(at, 1)
    heldBytes -= spare!.byteLength
    return new Int16Array(spare!, 0, samples)
  }
  // A power of two, as an allocator's size classes: at most twice the bytes, and a spare made
  // for one output fits the many outputs of similar length that follow (0.5 s streamed pieces
  // of 22-29 KB all take 32 KiB; whole sentences 256 or 512 KiB).
  return new Int16Array(new ArrayBuffer(2 ** Math.ceil(Math.log2(bytes))), 0, samples)
}

/** The blocks copied into one output of their own (see int16Output), ready to transfer. */
export const joinIntoOutput = (blocks: ReadonlyArray<Int16Array>): Int16Array => concat(blocks, int16Output)

/** Spares held by this thread now (tests, stats). */
export const sparesHeld = (): { readonly count: number; readonly bytes: number; readonly sizes: ReadonlyArray<number> } => ({
  count: free.length,
  bytes: heldBytes,
  sizes: free.map((b) => b.byteLength)
})
