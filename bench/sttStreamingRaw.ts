/**
 * The raw PocketSphinx streaming decode (FFI calls on this thread, no pool, no service), the
 * floor the realtime benches compare the service with: bench/sttStreamingRtf.ts prints it beside
 * the pool session, bench/sttRealtime.ts turns it into the raw capacity of the same cores.
 *
 * One stream = start_utt, process_raw per 100 ms block, get_hyp every 160 ms, end_utt, the
 * segments. With `finalPass` the live pass runs on a decoder without fwdflat (partials only) and
 * the whole utterance is decoded again on a second decoder at the end: what the service does by
 * default (engines/asr/PocketSphinxStreaming.ts), so "raw live + final" is the same work.
 */
import { readFileSync } from "node:fs"
import { DITHER_SEED, ditheredInt16, PocketSphinxAsr } from "../engines/asr/PocketSphinxAsr.ts"

export const LIBRIVOX_DIR = "/usr/share/pocketsphinx/test/data/librivox"
export const LIBRIVOX_IDS = ["0870", "0880", "0890", "0920", "0930"] as const
export const BLOCK = 1600 // 100 ms at 16 kHz
const HYP_EVERY = 2560 // 160 ms

/** The 16 kHz s16 samples of a mono WAV file. */
export const wavInt16 = (file: string): Int16Array => {
  const bytes = readFileSync(file)
  const at = bytes.indexOf("data", 12)
  const body = bytes.subarray(at + 8, at + 8 + bytes.readUInt32LE(at + 4))
  return new Int16Array(body.buffer.slice(body.byteOffset, body.byteOffset + body.byteLength))
}

export const librivoxPcm = (id: string): Int16Array => wavInt16(`${LIBRIVOX_DIR}/sense_and_sensibility_01_austen_64kb-${id}.wav`)

/** CPU seconds of this whole process (every thread). */
export const processCpuSeconds = () => {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1e6
}

/** Raw streaming decoders on this thread; `dispose` when done (~97 MB each). */
export const rawStreamingDecoders = async () => {
  const asr = await PocketSphinxAsr.load()
  const partialsOnly = await PocketSphinxAsr.load({ extraArgs: ["-fwdflat", "no"] })
  /** Decodes each recording as one stream, block by block, as fast as it goes. */
  const decode = (recordings: ReadonlyArray<Int16Array>, finalPass: boolean) => {
    const live = finalPass ? partialsOnly : asr
    const { lib, ps } = live
    for (const pcm of recordings) {
      const dither = { seed: DITHER_SEED }
      const kept: Array<Int16Array> = []
      lib.ps_start_stream(ps)
      lib.ps_start_utt(ps)
      let since = 0
      for (let at = 0; at < pcm.length; at += BLOCK) {
        const block = ditheredInt16(pcm.subarray(at, Math.min(pcm.length, at + BLOCK)), dither)
        if (finalPass) kept.push(block)
        lib.ps_process_raw(ps, block, block.length, 0, 0)
        since += block.length
        if (since >= HYP_EVERY) {
          since = 0
          lib.ps_get_hyp(ps, [0])
        }
      }
      lib.ps_end_utt(ps)
      if (finalPass) {
        const whole = new Int16Array(pcm.length)
        let o = 0
        for (const k of kept) {
          whole.set(k, o)
          o += k.length
        }
        asr.lib.ps_start_stream(asr.ps)
        asr.lib.ps_start_utt(asr.ps)
        asr.lib.ps_process_raw(asr.ps, whole, whole.length, 0, 1)
        asr.lib.ps_end_utt(asr.ps)
      }
      asr.words((pcm.length * 1000) / 16000)
    }
  }
  return {
    decode,
    dispose: () => {
      asr.dispose()
      partialsOnly.dispose()
    }
  }
}

/** The least CPU seconds of `repeats` runs of `f`, per audio second. */
export const bestRtf = async (repeats: number, audioSeconds: number, f: () => Promise<void> | void): Promise<number> => {
  let min = Infinity
  for (let i = 0; i < repeats; i++) {
    const c0 = processCpuSeconds()
    await f()
    min = Math.min(min, processCpuSeconds() - c0)
  }
  return min / audioSeconds
}

/** Raw RTF (CPU seconds per audio second, one stream on one core), best of `repeats`. */
export const rawStreamingRtf = async (recordings: ReadonlyArray<Int16Array>, repeats: number) => {
  const audioSeconds = recordings.reduce((s, r) => s + r.length / 16000, 0)
  const raw = await rawStreamingDecoders()
  try {
    const live = await bestRtf(repeats, audioSeconds, () => raw.decode(recordings, false))
    const liveAndFinal = await bestRtf(repeats, audioSeconds, () => raw.decode(recordings, true))
    return { live, liveAndFinal, audioSeconds }
  } finally {
    raw.dispose()
  }
}
