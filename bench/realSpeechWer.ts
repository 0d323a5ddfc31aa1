/**
 * Word error rate on real human speech, the service against the raw engine on the same audio
 * (issue 12: the service must never do worse than the raw engine).
 *
 * Recordings: Debian's pocketsphinx-testdata, LibriVox (five readings of one reader) and `cards`
 * (five short utterances of another speaker), with their reference transcriptions. Each in two
 * conditions: wideband (the 16 kHz file as shipped) and telephone band (band-pass 300-3400 Hz,
 * 8 kHz µ-law, as a telephony bridge sends it). The raw engine is Debian's
 * `pocketsphinx_continuous` with its default en-us model on the same audio at 16 kHz (the
 * telephone file upsampled by the same ffmpeg the service decodes with); the service gets the
 * file itself through `POST /speech-to-text`.
 */
import { execFileSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { ffmpegBinary } from "../engines/media/MediaDecoder.ts"

const DATA = "/usr/share/pocketsphinx/test/data"

interface Recording {
  readonly name: string
  readonly file: string
  readonly reference: string
}

/** `<s> words </s> (id)` lines of a pocketsphinx transcription file. */
const references = (file: string): Map<string, string> =>
  new Map(readFileSync(file, "utf8").split("\n").flatMap((line) => {
    const m = /^(.*)\(([^)]+)\)\s*$/.exec(line.trim())
    return m === null ? [] : [[m[2]!, m[1]!.replace(/<\/?s>/g, "").trim()] as const]
  }))

export const realRecordings = (): Array<Recording> => {
  const librivox = references(`${DATA}/librivox/transcription`)
  const cards = references(`${DATA}/cards/cards.transcription`)
  return [
    ...[...librivox].map(([id, text]) => ({ name: `librivox ${id.slice(-4)}`, file: `${DATA}/librivox/${id}.wav`, reference: text })),
    ...[...cards].map(([id, text]) => ({ name: `cards ${id}`, file: `${DATA}/cards/${id}.wav`, reference: text }))
  ]
}

export const words = (text: string) => text.toLowerCase().replace(/[^a-z0-9' ]+/g, " ").split(/\s+/).filter((w) => w !== "")

/** Word-level Levenshtein distance. */
export const edits = (ref: ReadonlyArray<string>, hyp: ReadonlyArray<string>): number => {
  let prev = Array.from({ length: hyp.length + 1 }, (_, j) => j)
  for (let i = 1; i <= ref.length; i++) {
    const row = [i]
    for (let j = 1; j <= hyp.length; j++) row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (ref[i - 1] === hyp[j - 1] ? 0 : 1))
    prev = row
  }
  return prev[hyp.length]!
}

const ffmpeg = (args: ReadonlyArray<string>) => execFileSync(ffmpegBinary(), ["-nostdin", "-loglevel", "error", "-y", ...args])

const rawEngine = (wav16k: string): string =>
  execFileSync("pocketsphinx_continuous", ["-infile", wav16k, "-logfn", "/dev/null"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim()

/** The synchronous endpoint's text of one audio file. */
export const syncTranscript = async (site: string, apiKey: string, file: string): Promise<string> => {
  const form = new FormData()
  form.append("model_id", "scribe_v1")
  form.append("file", new Blob([readFileSync(file)], { type: "audio/wav" }), path.basename(file))
  const res = await fetch(`${site}/api/v1/speech-to-text`, { method: "POST", headers: { "xi-api-key": apiKey }, body: form })
  const body = await res.json() as { text?: string }
  if (res.status !== 200) throw new Error(`speech-to-text answered ${res.status}: ${JSON.stringify(body)}`)
  return body.text ?? ""
}

export interface WerRow {
  readonly name: string
  readonly condition: "wideband" | "telephone"
  readonly referenceWords: number
  readonly rawErrors: number
  readonly serviceErrors: number
}

export const measureRealSpeechWer = async (site: string, apiKey: string, recordings: ReadonlyArray<Recording>): Promise<Array<WerRow>> => {
  const scratch = mkdtempSync(path.join(tmpdir(), "bench-real-wer-"))
  const rows: Array<WerRow> = []
  try {
    for (const [i, r] of recordings.entries()) {
      const phone = path.join(scratch, `${i}-phone.wav`)
      const phone16k = path.join(scratch, `${i}-phone16k.wav`)
      ffmpeg(["-i", r.file, "-af", "highpass=f=300,lowpass=f=3400", "-ar", "8000", "-c:a", "pcm_mulaw", phone])
      ffmpeg(["-i", phone, "-ar", "16000", "-c:a", "pcm_s16le", phone16k])
      const ref = words(r.reference)
      for (const [condition, served, raw] of [["wideband", r.file, r.file], ["telephone", phone, phone16k]] as const) {
        rows.push({
          name: r.name,
          condition,
          referenceWords: ref.length,
          rawErrors: edits(ref, words(rawEngine(raw))),
          serviceErrors: edits(ref, words(await syncTranscript(site, apiKey, served)))
        })
      }
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true })
  }
  return rows
}

const pct = (errors: number, total: number) => `${((100 * errors) / Math.max(1, total)).toFixed(1)} %`

export const printRealSpeechWer = (rows: ReadonlyArray<WerRow>) => {
  console.log("(d) WER on real speech (pocketsphinx-testdata), the service vs pocketsphinx_continuous on the same audio")
  console.log("    recording        condition   words   raw WER   service WER")
  for (const r of rows) {
    const flag = r.serviceErrors > r.rawErrors ? "   <- worse than raw" : ""
    console.log(`    ${r.name.padEnd(16)} ${r.condition.padEnd(10)} ${String(r.referenceWords).padStart(6)}   ${pct(r.rawErrors, r.referenceWords).padStart(7)}   ${pct(r.serviceErrors, r.referenceWords).padStart(11)}${flag}`)
  }
  for (const condition of ["wideband", "telephone"] as const) {
    const c = rows.filter((r) => r.condition === condition)
    if (c.length === 0) continue
    const n = c.reduce((s, r) => s + r.referenceWords, 0)
    console.log(`    all ${condition.padEnd(9)}              ${String(n).padStart(6)}   ${pct(c.reduce((s, r) => s + r.rawErrors, 0), n).padStart(7)}   ${pct(c.reduce((s, r) => s + r.serviceErrors, 0), n).padStart(11)}`)
  }
  const worse = rows.filter((r) => r.serviceErrors > r.rawErrors).length
  console.log(`    files where the service is worse than the raw engine: ${worse} of ${rows.length}`)
}
