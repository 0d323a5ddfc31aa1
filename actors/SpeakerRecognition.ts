/**
 * Speaker recognition for jobs that ask for it (`speaker_recognition: true` with `diarize`):
 * each diarized speaker's voiceprint is compared with the job owner's saved speakers of the same
 * embedding model, and a match at or above the model's threshold (cosine similarity of the
 * centroids) names the speaker in the result: in `words`, in the segments of a segmented_json
 * format, and in a top-level `speakers` list that also shows every raw label (`SPEAKER_00`)
 * beside its ElevenLabs `speaker_id`.
 *
 * Matching is one-to-one: the best-scoring pairs are taken first, so two diarized speakers are
 * never both named after one saved speaker. Only the owner's voiceprints are ever loaded.
 */
import { cosine } from "../engines/speaker/SpeakerEmbedding.ts"
import { CLASSICAL_SPEAKER_MODEL } from "../engines/speaker/SpeakerModel.ts"
import type { SavedVoiceprint, Voiceprint } from "../storage/SavedSpeakers.ts"
import { rawLabel } from "./Diarization.ts"

/** The classical embedding's threshold (measured: engines/speaker/SpeakerModel.ts); a neural model brings its own. */
export const SPEAKER_MATCH_THRESHOLD = CLASSICAL_SPEAKER_MODEL.matchThreshold

export interface SpeakerMatch {
  readonly savedSpeakerId: string
  readonly name: string
  /** Cosine similarity, 3 decimals. */
  readonly score: number
}

/** Label → match, one-to-one, best pairs first. */
export const matchVoiceprints = (
  prints: ReadonlyArray<Voiceprint>,
  saved: ReadonlyArray<SavedVoiceprint>,
  threshold: number = SPEAKER_MATCH_THRESHOLD
): Map<string, SpeakerMatch> => {
  const pairs: Array<{ label: string; saved: SavedVoiceprint; score: number }> = []
  for (const p of prints) {
    for (const s of saved) {
      if (s.model !== p.model || s.voiceprint.length !== p.centroid.length) continue
      const score = cosine(p.centroid, s.voiceprint)
      if (score >= threshold) pairs.push({ label: p.label, saved: s, score })
    }
  }
  pairs.sort((a, b) => b.score - a.score)
  const matches = new Map<string, SpeakerMatch>()
  const used = new Set<string>()
  for (const pair of pairs) {
    if (matches.has(pair.label) || used.has(pair.saved.id)) continue
    used.add(pair.saved.id)
    matches.set(pair.label, { savedSpeakerId: pair.saved.id, name: pair.saved.name, score: Math.round(pair.score * 1000) / 1000 })
  }
  return matches
}

type Json = Record<string, unknown>

const named = (item: Json, matches: ReadonlyMap<string, SpeakerMatch>): Json => {
  const id = item.speaker_id
  if (typeof id !== "string") return item
  const label = rawLabel(id)
  const match = matches.get(label)
  return { ...item, speaker_label: label, ...(match !== undefined ? { speaker_name: match.name, speaker_match_score: match.score } : {}) }
}

/** The synchronous endpoint's body with the speakers named (a new object; the input is not changed). */
export const annotateSpeakers = (body: Json, prints: ReadonlyArray<Voiceprint>, matches: ReadonlyMap<string, SpeakerMatch>): Json => {
  const words = Array.isArray(body.words) ? (body.words as Array<Json>).map((w) => named(w, matches)) : body.words
  const formats = Array.isArray(body.additional_formats)
    ? (body.additional_formats as Array<Json>).map((f) => {
      if (f.requested_format !== "segmented_json" || typeof f.content !== "string") return f
      const doc = JSON.parse(f.content) as { segments?: Array<Json> }
      const segments = (doc.segments ?? []).map((s) => ({
        ...named(s, matches),
        ...(Array.isArray(s.words) ? { words: (s.words as Array<Json>).map((w) => named(w, matches)) } : {})
      }))
      return { ...f, content: JSON.stringify({ ...doc, segments }) }
    })
    : body.additional_formats
  const speakers = prints.map((p) => {
    const match = matches.get(p.label)
    return {
      speaker_id: `speaker_${Number(p.label.slice("SPEAKER_".length))}`,
      speaker_label: p.label,
      speech_seconds: p.speechSeconds,
      ...(match !== undefined ? { speaker_name: match.name, speaker_match_score: match.score, saved_speaker_id: match.savedSpeakerId } : {})
    }
  })
  return { ...body, words, ...(formats !== undefined ? { additional_formats: formats } : {}), speakers }
}
