/**
 * Speech-to-text pipeline metrics, updated by the transcriber (actors/Transcription.ts).
 * Effect's default metric registry is process-wide, so runtime/Metrics.ts lists them with every
 * other metric when it renders the Prometheus text; defined here so actors need not import
 * runtime/.
 */
import { Metric } from "effect"

export const sttMetrics = {
  decodesStarted: Metric.counter("stt_decodes_started_total", { description: "Speech-to-text decodes started (ffmpeg runs)", incremental: true }),
  decodedSeconds: Metric.counter("stt_decoded_audio_seconds_total", { description: "Seconds of audio ffmpeg decoded for speech-to-text, finished or stopped (a decode stopped for credits counts what it decoded)", incremental: true }),
  decodesRefused: Metric.counter("stt_decodes_refused_total", { description: "Speech-to-text requests refused with 503 because too many decodes were running and waiting", incremental: true }),
  decodesActive: Metric.gauge("stt_decodes_active", { description: "Speech-to-text decodes running now" }),
  decodesWaiting: Metric.gauge("stt_decodes_waiting", { description: "Speech-to-text requests waiting for a decode slot" }),
  decodesActivePeak: Metric.gauge("stt_decodes_active_peak", { description: "Most speech-to-text decodes ever running at once since start" }),
  bufferBytesPeak: Metric.gauge("stt_buffer_bytes_peak", { description: "Largest single audio buffer the speech-to-text pipeline has held since start, bytes" })
} as const
