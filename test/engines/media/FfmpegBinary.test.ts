/**
 * Which ffmpeg decodes uploads (engines/media/FfmpegBinary.ts): FFMPEG_PATH first, then the
 * system's on PATH, and npm's 2018 build only when there is no other, reported as such.
 */
import t from "tap"
import { chmodSync, writeFileSync } from "node:fs"
import * as path from "node:path"
import { chooseFfmpeg, describeFfmpeg } from "../../../engines/media/FfmpegBinary.ts"
import { scratchDir } from "../asr/speechFixtures.ts"

const dir = scratchDir(t, "speech-ffmpeg-binary-")
const fake = path.join(dir, "ffmpeg")
writeFileSync(fake, "#!/bin/sh\nexit 0\n")
chmodSync(fake, 0o755)

const withPath = <A>(value: string, f: () => A): A => {
  const saved = process.env.PATH
  process.env.PATH = value
  try {
    return f()
  } finally {
    process.env.PATH = saved
  }
}

t.test("FFMPEG_PATH wins, then PATH, then the npm fallback", async (t) => {
  t.same(chooseFfmpeg("/opt/ffmpeg/bin/ffmpeg"), { path: "/opt/ffmpeg/bin/ffmpeg", source: "FFMPEG_PATH" })
  t.same(withPath(`/nonexistent${path.delimiter}${dir}`, () => chooseFfmpeg(undefined)), { path: fake, source: "system" })
  const fallback = withPath("/nonexistent", () => chooseFfmpeg(undefined))
  t.equal(fallback?.source, "npm-2018-fallback", "no ffmpeg on PATH: npm's build")
  t.match(describeFfmpeg(fallback), /2018 static build without security updates/, "reported as the 2018 build")
  t.match(describeFfmpeg(undefined), /no ffmpeg found/)
})
