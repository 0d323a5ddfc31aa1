/**
 * A size-bounded map whose entries expire: least recently used entries go first when full.
 *
 * Used for API key lookups, where both a bound on memory (anyone can send a million distinct
 * bad keys) and a bound on staleness (a key deleted elsewhere must stop working soon) matter.
 * Times are milliseconds on the caller's clock.
 */
export class BoundedCache<K, V> {
  private readonly entries = new Map<K, { readonly value: V; readonly expiresAt: number }>()

  constructor(readonly maxEntries: number) {}

  get(key: K, now: number): V | undefined {
    const entry = this.entries.get(key)
    if (entry === undefined) return undefined
    this.entries.delete(key)
    if (entry.expiresAt <= now) return undefined
    // Re-inserting moves the entry to the end of the Map's order: most recently used.
    this.entries.set(key, entry)
    return entry.value
  }

  set(key: K, value: V, ttlMs: number, now: number): void {
    this.entries.delete(key)
    this.entries.set(key, { value, expiresAt: now + ttlMs })
    while (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next()
      if (oldest.done === true) break
      this.entries.delete(oldest.value)
    }
  }

  /** When the entry expires (ms), without counting as a use; undefined when absent. */
  expiresAt(key: K): number | undefined {
    return this.entries.get(key)?.expiresAt
  }

  delete(key: K): void {
    this.entries.delete(key)
  }

  clear(): void {
    this.entries.clear()
  }

  get size(): number {
    return this.entries.size
  }
}
