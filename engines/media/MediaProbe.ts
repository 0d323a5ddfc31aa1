/**
 * The duration a media file declares, read before decoding so that work can be paid for
 * before it is done (actors/Transcription.ts reserves by it). It is ffmpeg's header read
 * (`ffmpeg -i file` without an output: the demuxer's header and a few packets, the same
 * `avformat_find_stream_info` ffprobe runs; milliseconds), through the hardened spawn
 * (FfmpegChild.ts: whitelisted demuxers and protocols, CPU and memory limits), with a
 * wall-clock bound of its own. ffmpeg rather than ffprobe: the npm fallback has no ffprobe.
 *
 * The answer is a claim, not a measurement: a header may lie (an MP3 whose Xing frame count
 * says 0.36 s decodes for 60 s) and some files have none (ffmpeg then estimates from the
 * bitrate and the size, or prints `N/A`: undefined here). Callers bound the decode itself by
 * what the caller can pay; the probe only lets them refuse early. Any failure (not media,
 * damaged, timed out) is `undefined`: the decode that follows reports it properly.
 */
import * as path from "node:path"
import { currentFfmpeg } from "./FfmpegBinary.ts"
import { DEFAULT_MEMORY_BYTES, inputArgs, spawnFfmpeg } from "./FfmpegChild.ts"
import { sniffFile } from "./MediaDecoder.ts"

export interface ProbeOptions {
  /** Wall-clock bound, ms; also the CPU bound (rounded up to seconds). Default 10 000. */
  readonly timeoutMs?: number
  readonly signal?: AbortSignal
  readonly ffmpegPath?: string
}

/** Longest stderr line kept while looking for the duration (metadata tags can be long). */
const LINE_KEEP = 65_536
const DURATION = /^\s*Duration:\s*(\d+):(\d\d):(\d\d(?:\.\d+)?)/

/** "  Duration: 01:02:03.45, start: …" → ms; undefined for N/A or another line. */
export const parseDurationLine = (line: string): number | undefined => {
  const m = DURATION.exec(line)
  if (m === null) return undefined
  return Math.round(((Number(m[1]) * 60 + Number(m[2])) * 60 + Number(m[3])) * 1000)
}

/** The duration `file` declares, ms, or undefined (none, not media, or the probe failed). */
export const probeDurationMs = async (file: string, options: ProbeOptions = {}): Promise<number | undefined> => {
  const absolute = path.resolve(file)
  if ((await sniffFile(absolute)) === undefined) return undefined // never shown to ffmpeg
  const binary = options.ffmpegPath ?? currentFfmpeg()?.path
  if (binary === undefined || options.signal?.aborted) return undefined
  const timeoutMs = options.timeoutMs ?? 10_000
  const child = spawnFfmpeg(binary, ["-nostdin", "-hide_banner", "-loglevel", "info", ...inputArgs(absolute)], {
    cpuSeconds: timeoutMs / 1000,
    memoryBytes: DEFAULT_MEMORY_BYTES
  })
  return await new Promise<number | undefined>((resolve) => {
    let found: number | undefined
    let partial = ""
    const finish = () => {
      clearTimeout(timer)
      options.signal?.removeEventListener("abort", finish)
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
      resolve(found)
    }
    const timer = setTimeout(finish, timeoutMs)
    options.signal?.addEventListener("abort", finish, { once: true })
    child.stdout.resume()
    child.stderr.setEncoding("utf8")
    child.stderr.on("data", (s: string) => {
      const lines = (partial + s).split("\n")
      partial = lines.pop()!.slice(-LINE_KEEP)
      for (const line of lines) {
        const ms = parseDurationLine(line)
        if (ms !== undefined) {
          found = ms
          return finish() // the rest of the header is of no use here
        }
      }
    })
    child.once("error", finish)
    child.once("close", () => {
      found ??= parseDurationLine(partial)
      finish()
    })
  })
}
