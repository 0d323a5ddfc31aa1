/**
 * A token bucket per caller, for endpoints a client may call many times a second (translation
 * chunks). Each caller's bucket holds at most `burst` tokens and gains `perSecond` tokens a
 * second; a call takes one token or is refused with the seconds until one is back.
 *
 * Per process: N instances behind a balancer allow N times the rate (documented in the README).
 * Memory is bounded: at most `maxCallers` buckets, the least recently used dropped first. A
 * dropped bucket comes back full, so under a flood of distinct callers the worst case is that
 * one caller's limit resets, never that memory grows.
 */

export interface RateLimitOptions {
  /** Tokens gained per second (the sustained rate). */
  readonly perSecond: number
  /** Bucket size (the burst a quiet caller may send at once). */
  readonly burst: number
  readonly maxCallers?: number
}

export type RateDecision = { readonly allowed: true } | { readonly allowed: false; readonly retryAfterS: number }

interface Bucket {
  tokens: number
  /** Milliseconds on the caller's clock when `tokens` was last brought up to date. */
  at: number
}

export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>()
  private readonly maxCallers: number

  constructor(readonly options: RateLimitOptions) {
    this.maxCallers = options.maxCallers ?? 100_000
  }

  /** Takes a token of `caller`'s bucket if there is one; `now` in milliseconds. */
  take(caller: string, now: number = Date.now()): RateDecision {
    const bucket = this.refill(caller, now)
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1
      return { allowed: true }
    }
    return this.refusal(bucket)
  }

  /** Whether `caller` has a token, without taking it (limits that count only failures). */
  check(caller: string, now: number = Date.now()): RateDecision {
    const bucket = this.refill(caller, now)
    return bucket.tokens >= 1 ? { allowed: true } : this.refusal(bucket)
  }

  private refill(caller: string, now: number): Bucket {
    const { burst } = this.options
    const bucket = this.buckets.get(caller) ?? { tokens: burst, at: now }
    // Re-inserting keeps the Map in least-recently-used order for eviction.
    this.buckets.delete(caller)
    bucket.tokens = Math.min(burst, bucket.tokens + (Math.max(0, now - bucket.at) / 1000) * this.options.perSecond)
    bucket.at = now
    this.buckets.set(caller, bucket)
    while (this.buckets.size > this.maxCallers) this.buckets.delete(this.buckets.keys().next().value!)
    return bucket
  }

  private refusal(bucket: Bucket): RateDecision {
    return { allowed: false, retryAfterS: Math.max(1, Math.ceil((1 - bucket.tokens) / this.options.perSecond)) }
  }

  /** Buckets held now (for tests of the memory bound). */
  size(): number {
    return this.buckets.size
  }
}
