/**
 * What this process last heard from the database about users' balances, so that audio can go out
 * before the debit or reservation that pays for it has answered (a PostgreSQL round trip, 1–3 ms
 * of the time to first audio; more under load). A hint, never a charge: the statement still runs
 * and decides, and when it refuses, the caller stops (a stream ends after its first sentence, a
 * WebSocket session after the chunk). That can happen only when the balance was spent elsewhere
 * (another instance, the admin CLI) since this process last heard of it; a user this process has
 * not heard of in `ttlMs`, or whose known balance does not cover the amount, waits as before.
 */
export interface BalanceHints {
  /**
   * True when the last known balance, less what was promised since, covers `amount`; the amount
   * is then promised (taken off the hint) until the database's next word on this user.
   */
  readonly covers: (userId: string, amount: number) => boolean
  /** The balance the database just reported (after a debit, reservation, refund or refusal). */
  readonly heard: (userId: string, balance: number) => void
}

interface Hint {
  balance: number
  readonly at: number
}

/** How long a heard balance is trusted, ms; and how many users are remembered at most. */
export const makeBalanceHints = (ttlMs = 30_000, maxUsers = 10_000, now: () => number = Date.now): BalanceHints => {
  const hints = new Map<string, Hint>()
  return {
    covers: (userId, amount) => {
      const hint = hints.get(userId)
      if (hint === undefined || now() - hint.at > ttlMs || hint.balance < amount) return false
      hint.balance -= amount
      return true
    },
    heard: (userId, balance) => {
      hints.delete(userId) // re-inserted last: the Map's order is oldest heard first
      hints.set(userId, { balance, at: now() })
      if (hints.size > maxUsers) hints.delete(hints.keys().next().value!)
    }
  }
}
