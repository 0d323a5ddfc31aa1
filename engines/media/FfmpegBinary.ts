/**
 * Which ffmpeg decodes uploads. In order of preference:
 *  1. `FFMPEG_PATH`, when the operator set it;
 *  2. the system's `ffmpeg` on PATH (Debian's package, installed by scripts/setup.sh: it gets
 *     security updates through apt, and uploads are untrusted input to its demuxers and decoders);
 *  3. the static binary of npm `@ffmpeg-installer/ffmpeg`, a 2018 snapshot (N-47683, gcc 6.3.0)
 *     with years of published decoder vulnerabilities since: only a fallback for machines
 *     without a system ffmpeg, and reported as such at start-up and by /readyz.
 * Whichever it is, it runs through the one hardened spawn (FfmpegChild.ts).
 */
import { accessSync, constants } from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"

export type FfmpegSource = "FFMPEG_PATH" | "system" | "npm-2018-fallback"

export interface FfmpegChoice {
  readonly path: string
  readonly source: FfmpegSource
}

const executable = (file: string): boolean => {
  try {
    accessSync(file, constants.X_OK)
    return true
  } catch {
    return false
  }
}

/** `name` on PATH, the way a shell would find it; undefined when absent. */
const onPath = (name: string): string | undefined => {
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
    if (dir === "") continue
    const file = path.join(dir, name)
    if (executable(file)) return file
  }
  return undefined
}

/** The npm package's binary; its package throws a bare string when the binary is missing. */
const npmBinary = (): string | undefined => {
  try {
    return (createRequire(import.meta.url)("@ffmpeg-installer/ffmpeg") as { path: string }).path
  } catch {
    return undefined
  }
}

/** The binary to use, by the order above; undefined when there is none at all. */
export const chooseFfmpeg = (configured?: string): FfmpegChoice | undefined => {
  if (configured !== undefined && configured !== "") return { path: configured, source: "FFMPEG_PATH" }
  const system = onPath(process.platform === "win32" ? "ffmpeg.exe" : "ffmpeg")
  if (system !== undefined) return { path: system, source: "system" }
  const npm = npmBinary()
  return npm === undefined ? undefined : { path: npm, source: "npm-2018-fallback" }
}

let chosen: FfmpegChoice | undefined

/** Fixes the binary for this process (start-up, from FFMPEG_PATH); returns the choice. */
export const useFfmpeg = (configured?: string): FfmpegChoice | undefined => {
  chosen = chooseFfmpeg(configured)
  return chosen
}

/** The binary in use (chosen on first use when start-up did not choose). */
export const currentFfmpeg = (): FfmpegChoice | undefined => chosen ?? useFfmpeg(undefined)

/** A line for the start-up log and /readyz: which ffmpeg, and a warning for the 2018 fallback. */
export const describeFfmpeg = (choice: FfmpegChoice | undefined): string =>
  choice === undefined
    ? "no ffmpeg found (install Debian's ffmpeg package, or set FFMPEG_PATH): speech-to-text and voice cloning refuse media"
    : choice.source === "npm-2018-fallback"
    ? `${choice.path} (npm @ffmpeg-installer/ffmpeg, a 2018 static build without security updates: install Debian's ffmpeg package, scripts/setup.sh does)`
    : `${choice.path} (${choice.source === "system" ? "the system's, from PATH" : "FFMPEG_PATH"})`
