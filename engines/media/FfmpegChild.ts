/**
 * The one way this service starts ffmpeg on an upload (the decoder, MediaDecoder.ts, and the
 * duration probe, MediaProbe.ts): whatever the binary (FfmpegBinary.ts), the child reads only
 * the file it is given and is bounded in CPU time, memory and (by its caller's timer) wall time.
 *
 * - Input: `-protocol_whitelist file` (no network, no pipe to other processes, no `concat:`,
 *   `subfile:` or `crypto:` protocols) and `-format_whitelist` of the demuxers of the containers
 *   MediaType.ts recognises. The sniffing alone is not enough: ffmpeg skips an ID3v2 tag before
 *   probing, so `ID3…` + `ffconcat version 1.0\nfile 'x.wav'` is sniffed as mp3 and, without the
 *   demuxer whitelist, ffmpeg runs the concat demuxer and decodes `x.wav` beside the upload
 *   (another caller's upload: measured on both the 2018 and Debian's 5.1 builds); an HLS
 *   playlist behind a tag reads its file segments the same way. With the whitelist those
 *   demuxers refuse to open ("Format not on whitelist") before reading anything else.
 *   `-format_whitelist` is inherited by nested inputs, so no whitelisted demuxer can open
 *   a playlist either; mov's external references (`dref`) stay off (its default).
 * - Limits, set by `sh -c 'ulimit …; exec ffmpeg …'` (POSIX sh, no helper binary; the pid is
 *   ffmpeg's after the exec, so `lowerChild` and kill reach it): RLIMIT_CPU (`ulimit -t`,
 *   seconds: the kernel sends SIGXCPU, then SIGKILL) and RLIMIT_AS (`ulimit -v`, KiB: a
 *   decoder bug that allocates without bound fails its allocation instead of taking the
 *   machine's memory). 1 GiB of address space: Debian's ffmpeg maps ~150 MB of shared
 *   libraries and decodes 2 h of mp3 or AAC in under 300 MB (measured), the 2018 static build
 *   in less. Where RLIMIT_AS cannot be set (macOS) the memory limit is skipped and the CPU
 *   limit still applies; on Linux a limit that cannot be set stops the child (exit 126) rather
 *   than running it unbounded. Windows has neither and runs ffmpeg directly.
 */
import { type ChildProcessByStdio, spawn } from "node:child_process"
import type { Readable } from "node:stream"
import { lowerChild } from "../ChildNice.ts"

/**
 * ffmpeg's demuxer names for MediaType.ts's containers (mov covers mp4/m4a/3gp; matroska
 * covers webm; wv is WavPack). `-format_whitelist` matches a demuxer's whole list of names.
 */
export const DEMUXER_WHITELIST: ReadonlyArray<string> = [
  "wav", "mp3", "aac", "ogg", "flac", "mov", "mp4", "m4a", "3gp", "matroska", "webm", "aiff", "caf",
  "amr", "asf", "au", "avi", "flv", "ac3", "dts", "wv", "ape", "mpegts", "mpeg"
]

export interface ChildLimits {
  /** RLIMIT_CPU, seconds of CPU (all threads). */
  readonly cpuSeconds: number
  /** RLIMIT_AS, bytes of address space. */
  readonly memoryBytes: number
}

export const DEFAULT_MEMORY_BYTES = 1024 * 1024 * 1024

/** The input options: the file only, by the whitelisted demuxers only. `absolute` is a path. */
export const inputArgs = (absolute: string): Array<string> => [
  "-protocol_whitelist", "file",
  "-format_whitelist", DEMUXER_WHITELIST.join(","),
  "-i", `file:${absolute}` // the prefix keeps a name with ':' or a leading '-' from being read as anything else
]

/** Exit status of the wrapper when a limit could not be set or the binary could not run (sh's 126/127). */
export const CANNOT_RUN = new Set([126, 127])

// $1 CPU s, $2 address space KiB, $3 "required" on Linux; then the binary and its arguments.
const LIMITS_SCRIPT =
  "ulimit -t \"$1\" || exit 126; ulimit -v \"$2\" 2>/dev/null || [ \"$3\" != required ] || exit 126; shift 3; exec \"$@\""

/**
 * Starts `binary args` under the limits, stdin closed, stdout and stderr piped, at the engine
 * children's nice. The caller owns the wall-clock bound (kill it with SIGKILL on its timer).
 */
export const spawnFfmpeg = (
  binary: string,
  args: ReadonlyArray<string>,
  limits: ChildLimits
): ChildProcessByStdio<null, Readable, Readable> => {
  const child = process.platform === "win32"
    ? spawn(binary, [...args], { stdio: ["ignore", "pipe", "pipe"] })
    : spawn("/bin/sh", [
      "-c", LIMITS_SCRIPT, "ffmpeg-limits",
      String(Math.max(1, Math.ceil(limits.cpuSeconds))),
      String(Math.max(1, Math.floor(limits.memoryBytes / 1024))),
      process.platform === "linux" ? "required" : "optional",
      binary, ...args
    ], { stdio: ["ignore", "pipe", "pipe"] })
  lowerChild(child)
  return child
}
