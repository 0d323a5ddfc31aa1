/**
 * The caches behind `Synthesizer.preview` (GET /voices/{id}/preview): previews are short and
 * rendered once, then served as the same bytes.
 *
 * Presets: one WAV per voice for the life of the process (a preset never changes).
 * Clones: one WAV per version of a clone, keyed by id and checked against what the preview
 * depends on (language, preview text, sample), so an edit made through another instance never
 * serves stale audio here. Edits and deletes through this instance drop the entry at once
 * (VoiceCloning calls `Synthesizer.dropPreview`). Bounded: the least recently used previews go
 * first (a preview is ~100 KB).
 */
import type { VoiceCloneRow } from "../storage/VoiceClones.ts"

/** At ~100 KB each (a few seconds at 24 kHz), 500 previews are ~50 MB at most. */
export const MAX_CACHED_PREVIEWS = 500

export class ClonePreviewCache {
  private readonly entries = new Map<string, { readonly version: string; readonly wav: Uint8Array }>()
  constructor(private readonly maxEntries: number) {}
  private static version = (row: VoiceCloneRow) => JSON.stringify([row.language, row.previewText, row.sampleBlobKey])
  get(row: VoiceCloneRow): Uint8Array | undefined {
    const entry = this.entries.get(row.voiceId)
    if (entry === undefined || entry.version !== ClonePreviewCache.version(row)) return undefined
    this.entries.delete(row.voiceId)
    this.entries.set(row.voiceId, entry)
    return entry.wav
  }
  set(row: VoiceCloneRow, wav: Uint8Array): void {
    this.entries.delete(row.voiceId)
    this.entries.set(row.voiceId, { version: ClonePreviewCache.version(row), wav })
    for (const oldest of this.entries.keys()) {
      if (this.entries.size <= this.maxEntries) break
      this.entries.delete(oldest)
    }
  }
  drop(voiceId: string): void {
    this.entries.delete(voiceId)
  }
}
