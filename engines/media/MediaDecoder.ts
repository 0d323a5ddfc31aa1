/**
 * Any audio or video file → 16 kHz mono s16le, by running ffmpeg (FfmpegBinary.ts: the
 * system's, Debian's package, else npm's 2018 static build) through the hardened spawn
 * (FfmpegChild.ts: whitelisted demuxers and protocols, CPU and memory limits) and streaming its
 * stdout.
 *
 * This runs in the main process, one child process per request: ffmpeg is a program, not a
 * library, and the child does the CPU work off the event loop. Callers bound how many decodes
 * run at once (each ffmpeg is one more process, ~20–40 MB). Steps:
 *  1. sniff the first bytes (MediaType.ts); no known container → `NotMedia` without running
 *     ffmpeg (it would otherwise "decode" text with its tty demuxer);
 *  2. `ffmpeg -protocol_whitelist file -format_whitelist <demuxers> -i file:<path> -map 0:a:0
 *     -f s16le -ac 1 -ar 16000 -`: first audio stream only (video is demuxed, never decoded), no
 *     network, playlist or concat references, channels averaged, ffmpeg's default resampler;
 *     RLIMIT_CPU of the wall-clock bound, RLIMIT_AS 1 GiB;
 *  3. stdout chunks are yielded as they arrive (`pcmChunks`), collected (`decodeMedia`, for
 *     short clips), or written to a spill file as they arrive (`decodeToFile`, for recordings of
 *     any length: ~1 s of PCM in memory at a time; `readSamples` reads a span back).
 *
 * Error reasons and the HTTP statuses the protocol table gives them:
 *   NotMedia 415 · Damaged 400 (ffmpeg's message, paths removed) · NoAudio 400 (no audio stream,
 *   or nothing decoded) · TooLong 413 (past `maxDurationMs`) · TimedOut 504-ish (past
 *   `timeoutMs`, or its CPU time past the same number of seconds) · Aborted (the caller's
 *   signal) · DecoderUnavailable 502 (binary missing).
 *
 * Measured behaviour of this ffmpeg on damage: an mp4/m4a cut short loses its `moov` atom (the
 * muxer writes it last) and fails ("moov atom not found") → Damaged. A truncated mp3, ogg, wav
 * or webm decodes what is there and exits 0, silently for mp3/ogg/wav; a truncated flac exits 0
 * with "decode_frame() failed" on stderr. Exit 0 means success; stderr lines are returned as
 * `warnings` so the caller can log them. Lossy codecs change the sample count by less than one
 * codec frame: AAC pads to whole 1024-sample frames (+352 and +976 measured), Vorbis +336/+480;
 * mp3 (with its Xing/LAME header) and flac are exact.
 */
import { open, type FileHandle } from "node:fs/promises"
import { endianness } from "node:os"
import * as path from "node:path"
import { bytesLEToInt16, concatInt16 } from "../audio/Pcm.ts"
import { currentFfmpeg, describeFfmpeg } from "./FfmpegBinary.ts"
import { CANNOT_RUN, DEFAULT_MEMORY_BYTES, inputArgs, spawnFfmpeg } from "./FfmpegChild.ts"
import { detectContainer, SNIFF_BYTES, type MediaContainer } from "./MediaType.ts"

export const DECODE_SAMPLE_RATE = 16000

export type MediaErrorReason = "NotMedia" | "Damaged" | "NoAudio" | "TooLong" | "TimedOut" | "Aborted" | "DecoderUnavailable"

/** The one error type of this folder; `reason` names the condition. */
export class MediaError extends Error {
  readonly _tag = "MediaError"
  constructor(readonly reason: MediaErrorReason, message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause })
    this.name = "MediaError"
  }

  static is(u: unknown): u is MediaError {
    return typeof u === "object" && u !== null && (u as { _tag?: unknown })._tag === "MediaError"
  }
}

export interface DecodeOptions {
  /** Wall-clock limit for the whole decode, ms. Default 120 000 (100 min of mp3 takes ~12 s). */
  readonly timeoutMs?: number
  /** Longest audio accepted, ms; ffmpeg is stopped past it. Default 2 h (230 MB of PCM). */
  readonly maxDurationMs?: number
  readonly signal?: AbortSignal
  /** ffmpeg binary; default the one chosen at start-up (FfmpegBinary.ts). */
  readonly ffmpegPath?: string
  /**
   * Told the running total of samples each time a chunk arrives, before it is yielded (a
   * caller's meter of decoded audio: it sees the samples of a decode that is then stopped too).
   */
  readonly onSamples?: (samples: number) => void
}

export const DECODE_DEFAULTS = { timeoutMs: 120_000, maxDurationMs: 2 * 3600_000 } as const

export interface DecodeSummary {
  readonly container: MediaContainer
  /** Samples yielded, at 16 kHz. */
  readonly samples: number
  /** ffmpeg's stderr lines of a successful run (decode errors it recovered from). */
  readonly warnings: ReadonlyArray<string>
  /** Wall time from spawn to exit, ms. */
  readonly decodeMs: number
}

export interface DecodedAudio extends DecodeSummary {
  /** s16le mono at 16 kHz. */
  readonly pcm: Int16Array
  readonly sampleRate: typeof DECODE_SAMPLE_RATE
  readonly durationMs: number
}

/** The container of a file, from its first `SNIFF_BYTES` bytes. */
export const sniffFile = async (file: string): Promise<MediaContainer | undefined> => {
  const handle = await open(file, "r")
  try {
    const buffer = new Uint8Array(SNIFF_BYTES)
    const { bytesRead } = await handle.read(buffer, 0, SNIFF_BYTES, 0)
    return detectContainer(buffer.subarray(0, bytesRead))
  } finally {
    await handle.close()
  }
}

/** Path of the ffmpeg in use (FfmpegBinary.ts); DecoderUnavailable when there is none. */
export const ffmpegBinary = (): string => {
  const choice = currentFfmpeg()
  if (choice === undefined) throw new MediaError("DecoderUnavailable", describeFfmpeg(choice))
  return choice.path
}

const STDERR_KEEP = 8192
/** Bytes of PCM per yielded chunk, at least (1 s at 16 kHz s16le); the last one may be shorter. */
const YIELD_BYTES = 32_000

/** ffmpeg's stderr without our temp paths or heap addresses ("[flac @ 0x3d65] x" → "[flac] x"). */
const cleanMessages = (stderr: string, file: string): Array<string> =>
  stderr
    .split("\n")
    .map((l) => l.split(`file:${file}`).join("input").split(file).join("input").replace(/ @ 0x[0-9a-f]+\]/g, "]").trim())
    .filter((l) => l.length > 0 && !l.startsWith("To ignore this"))

const toInt16 = endianness() === "LE"
  ? (bytes: Uint8Array): Int16Array => {
      const out = new Int16Array(bytes.length >> 1)
      new Uint8Array(out.buffer).set(bytes.subarray(0, out.length * 2)) // copy: chunks may be pooled and unaligned
      return out
    }
  : bytesLEToInt16

/**
 * Streams the file's audio as 16 kHz mono Int16 chunks; returns a summary when ffmpeg exits 0.
 * Stopping the iteration early (break, throw) kills ffmpeg. Throws MediaError.
 */
export async function* pcmChunks(file: string, options: DecodeOptions = {}): AsyncGenerator<Int16Array, DecodeSummary, undefined> {
  const absolute = path.resolve(file)
  const container = await sniffFile(absolute) // an unreadable file is our fault, not a MediaError
  if (container === undefined) throw new MediaError("NotMedia", "the file is not audio or video in a format we recognise")
  const binary = options.ffmpegPath ?? ffmpegBinary()
  const timeoutMs = options.timeoutMs ?? DECODE_DEFAULTS.timeoutMs
  const maxSamples = Math.floor(((options.maxDurationMs ?? DECODE_DEFAULTS.maxDurationMs) * DECODE_SAMPLE_RATE) / 1000)
  if (options.signal?.aborted) throw new MediaError("Aborted", "decoding was cancelled")

  const started = performance.now()
  const child = spawnFfmpeg(binary, [
    "-nostdin", "-hide_banner", "-loglevel", "error",
    ...inputArgs(absolute),
    "-map", "0:a:0", "-vn", "-sn", "-dn",
    "-f", "s16le", "-acodec", "pcm_s16le", "-ac", "1", "-ar", String(DECODE_SAMPLE_RATE), "-"
  ], { cpuSeconds: timeoutMs / 1000, memoryBytes: DEFAULT_MEMORY_BYTES })

  let stopped: MediaError | undefined
  const stop = (e: MediaError) => {
    stopped ??= e
    child.kill("SIGKILL")
  }
  let stderr = ""
  child.stderr.setEncoding("utf8")
  child.stderr.on("data", (s: string) => {
    stderr = (stderr + s).slice(-STDERR_KEEP)
  })
  const exited = new Promise<{ code: number | null; signal?: NodeJS.Signals | null; spawnError?: Error }>((resolve) => {
    child.once("error", (spawnError) => resolve({ code: null, spawnError }))
    child.once("close", (code, signal) => resolve({ code, signal }))
  })
  const timer = setTimeout(() => stop(new MediaError("TimedOut", `decoding took longer than ${timeoutMs} ms`)), timeoutMs)
  const onAbort = () => stop(new MediaError("Aborted", "decoding was cancelled"))
  options.signal?.addEventListener("abort", onAbort, { once: true })

  let samples = 0
  let pending: Array<Uint8Array> = [] // stdout bytes not yet yielded; may end in half a sample
  let pendingBytes = 0
  /** Pending bytes as whole samples; an odd last byte stays pending. */
  const take = (): Int16Array => {
    const bytes = Buffer.concat(pending, pendingBytes)
    const whole = pendingBytes & ~1
    pending = whole < pendingBytes ? [bytes.subarray(whole)] : []
    pendingBytes -= whole
    return toInt16(bytes.subarray(0, whole))
  }
  // One iterator for the whole run: leaving a `for await` over a stream destroys the stream.
  const reader = (child.stdout as AsyncIterable<Buffer>)[Symbol.asyncIterator]()
  try {
    for (;;) {
      // ffmpeg writes one codec frame at a time (~1 KB); chunks are coalesced to ~1 s of audio.
      const next = await reader.next()
      if (!next.done) {
        pending.push(next.value)
        pendingBytes += next.value.length
        if (pendingBytes < YIELD_BYTES) continue
      }
      const pcm = take()
      samples += pcm.length
      options.onSamples?.(samples)
      if (samples > maxSamples) {
        stop(new MediaError("TooLong", `the audio is longer than ${maxSamples / DECODE_SAMPLE_RATE} s`))
        // Unread stdout would keep the child's "close" from ever firing: destroy it.
        await reader.return?.()
        break
      }
      if (pcm.length > 0) yield pcm
      if (next.done) break
    }
    const { code, signal, spawnError } = await exited
    if (stopped !== undefined) throw stopped
    if (spawnError !== undefined) throw new MediaError("DecoderUnavailable", `ffmpeg could not start: ${spawnError.message}`, { cause: spawnError })
    const messages = cleanMessages(stderr, absolute)
    // The limits wrapper (sh) exits 126/127 when it cannot set a limit or run the binary.
    if (code !== null && CANNOT_RUN.has(code)) throw new MediaError("DecoderUnavailable", `ffmpeg could not start (${binary}): ${messages.slice(-1).join("") || `exit ${code}`}`)
    // Not our kill (that set `stopped`): the kernel's, at the CPU limit (SIGXCPU, then SIGKILL).
    if (signal === "SIGXCPU" || signal === "SIGKILL") throw new MediaError("TimedOut", `decoding was stopped at its limit of ${Math.ceil(timeoutMs / 1000)} s of CPU time`)
    if (code !== 0) {
      if (messages.some((m) => m.includes("matches no streams"))) throw new MediaError("NoAudio", `the ${container} file has no audio stream`)
      throw new MediaError("Damaged", `the ${container} file could not be decoded: ${messages.slice(-3).join("; ") || `ffmpeg exited with ${code}`}`)
    }
    if (samples === 0) throw new MediaError("NoAudio", `the ${container} file contains no audio samples`)
    return { container, samples, warnings: messages, decodeMs: performance.now() - started }
  } finally {
    clearTimeout(timer)
    options.signal?.removeEventListener("abort", onAbort)
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL") // consumer stopped early
    await reader.return?.()
  }
}

/** Decodes the whole file into memory (bounded by `maxDurationMs`). Throws MediaError. */
export const decodeMedia = async (file: string, options: DecodeOptions = {}): Promise<DecodedAudio> => {
  const chunks: Array<Int16Array> = []
  const stream = pcmChunks(file, options)
  for (;;) {
    const next = await stream.next()
    if (next.done) {
      const pcm = concatInt16(chunks)
      return { ...next.value, pcm, sampleRate: DECODE_SAMPLE_RATE, durationMs: (pcm.length * 1000) / DECODE_SAMPLE_RATE }
    }
    chunks.push(next.value)
  }
}

/** Decoded audio spilled to a raw file (s16le mono at 16 kHz, this machine's byte order). */
export interface SpilledAudio extends DecodeSummary {
  /** The spill file; the caller removes it. */
  readonly file: string
  readonly durationMs: number
  /** Largest chunk held in memory on the way to the file, bytes. */
  readonly largestChunkBytes: number
}

/**
 * Decodes `file` into `spillFile` (created or truncated), holding one ~1 s chunk at a time, so
 * a recording of any length costs its length in disk, not in memory. Throws MediaError; the
 * spill file is left for the caller to remove in every case.
 */
export const decodeToFile = async (file: string, spillFile: string, options: DecodeOptions = {}): Promise<SpilledAudio> => {
  const out = await open(spillFile, "w", 0o600)
  try {
    const stream = pcmChunks(file, options)
    let largestChunkBytes = 0
    for (;;) {
      const next = await stream.next()
      if (next.done) {
        return { ...next.value, file: spillFile, durationMs: (next.value.samples * 1000) / DECODE_SAMPLE_RATE, largestChunkBytes }
      }
      const chunk = next.value
      largestChunkBytes = Math.max(largestChunkBytes, chunk.byteLength)
      // Awaiting each write is the backpressure: ffmpeg blocks on its pipe meanwhile.
      await out.write(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength))
    }
  } finally {
    await out.close()
  }
}

/** Samples [from, to) of a spill file written by `decodeToFile`, in a buffer of their own. */
export const readSamples = async (spill: FileHandle, from: number, to: number): Promise<Int16Array> => {
  const pcm = new Int16Array(Math.max(0, to - from))
  const bytes = new Uint8Array(pcm.buffer)
  let done = 0
  while (done < bytes.length) {
    const { bytesRead } = await spill.read(bytes, done, bytes.length - done, from * 2 + done)
    if (bytesRead === 0) break // past the end: shorter, as `slice` past the end would be
    done += bytesRead
  }
  return done === bytes.length ? pcm : pcm.slice(0, done >> 1)
}
