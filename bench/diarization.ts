/**
 * bench/diarization: who-spoke-when on real human speech (issue 12), on the evaluation set of
 * bench/diarizationSet.ts (2-4-speaker conversations mixed from pocketsphinx-testdata, wideband
 * and telephone band, reference turns as RTTM), scored by bench/der.ts.
 *
 * (a) The diarizer in this process on the service's own path: ffmpeg decode, Silero VAD
 *     segments, pause-bounded units with cepstral statistics, BIC clustering (the labeller's
 *     classical path); DER (collar 0.25 s, overlap scored) of its turns, without and with
 *     `num_speakers`, and its CPU time per audio minute (units + clustering; VAD excluded, the
 *     service pays it for recognition anyway; the voiceprint embedding excluded).
 * (b) The service end to end: `POST /speech-to-text` with `diarize=true` (and `num_speakers`),
 *     the words' `speaker_id` scored as word-speaker accuracy (words whose midpoint lies in one
 *     reference turn) and as DER of turns made from the words, and wall time per audio minute.
 *     Words leave the time between them unlabelled, so (b)'s DER includes the recogniser's
 *     misses; (a) is the diarizer's own number.
 *
 * Run: npm run bench:diarization (`--engine` for (a) only). `--smoke`: one short 2-speaker mix.
 * BENCH_KEEP=dir writes the set (WAV + RTTM) there and keeps it.
 */
import { execFileSync } from "node:child_process"
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { decodeMedia } from "../engines/media/MediaDecoder.ts"
import { bicCluster } from "../engines/speaker/BicClustering.ts"
import { unitTurns } from "../engines/speaker/Diarizer.ts"
import { speechUnits, UNIT_DIMENSION } from "../engines/speaker/SpeechUnits.ts"
import { SileroVad } from "../engines/vad/SileroVad.ts"
import { bestMapping, diarizationErrorRate, type Turn, wordSpeakerAccuracy } from "./der.ts"
import { conversationSpecs, type SetEntry, writeSet } from "./diarizationSet.ts"
import { root, smoke, startService, stop } from "./support.ts"

interface Score {
  readonly der: number
  readonly missed: number
  readonly falseAlarm: number
  readonly confusion: number
  readonly speakersFound: number
  readonly wordAccuracy?: number
  /** ms of processing per minute of audio. */
  readonly msPerMinute: number
}

const hypothesisTurns = (turns: ReadonlyArray<{ startMs: number; endMs: number; speaker: string }>): Array<Turn> =>
  turns.map((t) => ({ speaker: t.speaker, start: t.startMs / 1000, end: t.endMs / 1000 }))

const score = (entry: SetEntry, hypothesis: ReadonlyArray<Turn>, ms: number, words?: ReadonlyArray<{ start: number; end: number; speaker: string }>): Score => {
  const r = diarizationErrorRate(entry.turns, hypothesis)
  return {
    der: r.der,
    missed: r.missed / r.scored,
    falseAlarm: r.falseAlarm / r.scored,
    confusion: r.confusion / r.scored,
    speakersFound: new Set(hypothesis.map((t) => t.speaker)).size,
    ...(words !== undefined ? { wordAccuracy: wordSpeakerAccuracy(entry.turns, words, bestMapping(entry.turns, hypothesis)) } : {}),
    msPerMinute: (ms / entry.seconds) * 60
  }
}

const engineRun = async (vad: SileroVad, entry: SetEntry, numSpeakers: number | undefined): Promise<Score> => {
  const decoded = await decodeMedia(entry.file)
  const { segments } = await vad.segments(decoded.pcm)
  const pcm = Float32Array.from(decoded.pcm, (x) => x / 32768)
  const started = performance.now()
  // The labeller's classical path (actors/Diarization.ts) over the whole recording at once.
  const { units, stats } = speechUnits(pcm, segments)
  const labels = bicCluster(stats, units.length, UNIT_DIMENSION, numSpeakers !== undefined ? { numSpeakers } : {})
  const { turns } = unitTurns(units, labels)
  return score(entry, hypothesisTurns(turns), performance.now() - started)
}

interface ServiceWord {
  readonly type?: string
  readonly start?: number
  readonly end?: number
  readonly speaker_id?: string
}

const serviceRun = async (site: string, apiKey: string, entry: SetEntry, numSpeakers: number | undefined): Promise<Score> => {
  const form = new FormData()
  form.append("model_id", "scribe_v1")
  form.append("diarize", "true")
  if (numSpeakers !== undefined) form.append("num_speakers", String(numSpeakers))
  form.append("file", new Blob([readFileSync(entry.file)], { type: "audio/wav" }), path.basename(entry.file))
  const started = performance.now()
  const res = await fetch(`${site}/api/v1/speech-to-text`, { method: "POST", headers: { "xi-api-key": apiKey }, body: form })
  const body = await res.json() as { words?: Array<ServiceWord> }
  const ms = performance.now() - started
  if (res.status !== 200) throw new Error(`speech-to-text answered ${res.status}: ${JSON.stringify(body)}`)
  const words = (body.words ?? []).filter((w) => w.type === "word" && w.start !== undefined && w.end !== undefined)
    .map((w) => ({ start: w.start!, end: w.end!, speaker: w.speaker_id ?? "speaker_0" }))
  // Words of one speaker closer than 0.5 s join into a turn.
  const turns: Array<Turn> = []
  for (const w of words) {
    const last = turns[turns.length - 1]
    if (last !== undefined && last.speaker === w.speaker && w.start - last.end < 0.5) turns[turns.length - 1] = { ...last, end: Math.max(last.end, w.end) }
    else turns.push({ speaker: w.speaker, start: w.start, end: w.end })
  }
  return score(entry, turns, ms, words)
}

const pct = (x: number | undefined) => (x === undefined || Number.isNaN(x) ? "—" : `${(100 * x).toFixed(1)} %`)

const printRows = (title: string, rows: ReadonlyArray<{ entry: SetEntry; given: boolean; s: Score }>) => {
  console.log(title)
  console.log("    conversation  condition  speakers  num_speakers   DER      miss    false al.  confusion  found  word acc.  ms/audio min")
  for (const { entry, given, s } of rows) {
    console.log(`    ${entry.name.padEnd(13)} ${entry.condition.padEnd(10)} ${String(entry.speakers).padStart(8)}  ${(given ? "given" : "—").padStart(12)} ${pct(s.der).padStart(8)} ${pct(s.missed).padStart(8)} ${pct(s.falseAlarm).padStart(10)} ${pct(s.confusion).padStart(10)} ${String(s.speakersFound).padStart(6)} ${pct(s.wordAccuracy).padStart(10)} ${s.msPerMinute.toFixed(0).padStart(13)}`)
  }
  const groups = new Map<string, Array<Score>>()
  for (const { entry, given, s } of rows) {
    const key = `${entry.speakers} speakers, ${entry.condition}, num_speakers ${given ? "given" : "not given"}`
    groups.set(key, [...(groups.get(key) ?? []), s])
  }
  console.log("    mean per condition:")
  for (const [key, scores] of groups) {
    const mean = (f: (s: Score) => number | undefined) => {
      const v = scores.map(f).filter((x): x is number => x !== undefined && !Number.isNaN(x))
      return v.length === 0 ? undefined : v.reduce((a, b) => a + b, 0) / v.length
    }
    console.log(`      ${key.padEnd(52)} DER ${pct(mean((s) => s.der)).padStart(7)}  word acc. ${pct(mean((s) => s.wordAccuracy)).padStart(7)}  ${mean((s) => s.msPerMinute)!.toFixed(0)} ms/audio min`)
  }
}

const main = async () => {
  const keep = process.env.BENCH_KEEP
  const dir = keep ?? mkdtempSync(path.join(tmpdir(), "bench-diarization-"))
  if (keep !== undefined) mkdirSync(keep, { recursive: true })
  try {
    const entries = writeSet(dir, conversationSpecs(smoke))
    console.log(`evaluation set: ${entries.length} files, ${entries.reduce((s, e) => s + e.seconds, 0).toFixed(0)} s of audio${keep !== undefined ? ` in ${dir}` : ""}`)
    const vad = await SileroVad.load()
    const engineRows = []
    for (const entry of entries) {
      for (const given of [false, true]) engineRows.push({ entry, given, s: await engineRun(vad, entry, given ? entry.speakers : undefined) })
    }
    await vad.dispose()
    printRows("(a) the diarizer on the service's segments and embedding, in this process", engineRows)
    if (process.argv.includes("--engine")) return
    const service = await startService({ WORKERS: "1" })
    try {
      const created = execFileSync(process.execPath, ["--import", "tsx", "runtime/admin.ts", "create-user", "--name", "bench", "--credits", "1000000", "--json"], {
        cwd: root,
        env: { ...process.env, DATA_DIR: service.dataDir },
        encoding: "utf8"
      })
      const apiKey = (JSON.parse(created.trim().split("\n").at(-1)!) as { api_key: string }).api_key
      const serviceRows = []
      for (const entry of entries) {
        for (const given of [false, true]) serviceRows.push({ entry, given, s: await serviceRun(service.site, apiKey, entry, given ? entry.speakers : undefined) })
      }
      printRows("(b) the service end to end: POST /speech-to-text diarize=true, one worker", serviceRows)
    } finally {
      await stop(service.child)
    }
  } finally {
    if (keep === undefined) rmSync(dir, { recursive: true, force: true })
  }
}

await main()
