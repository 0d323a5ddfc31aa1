/**
 * What this process last heard from the database about users' balances, so that audio can go out
 * before the debit or reservation that pays for it has answered (a PostgreSQL round trip, 1–3 ms
 * of the time to first audio; more under load). A hint, never a charge: the statement still runs
 * and decides, and when it refuses, the caller stops after one block (~100 ms of audio): a stream
 * ends, a WebSocket session ends with its error. That happens when the balance was spent by
 * another process (another instance, the admin CLI) since this one last heard of it, or when a
 * statement of the same user started after the promise overtakes it in the database.
 *
 * Within this process the hint is exact: it is trusted only while none of the user's statements
 * is in flight (`begin` … `end`), and what the statements of one busy spell reported is merged
 * as their minimum, since answers from different connections may arrive out of order (an older,
 * higher balance after a newer one). A promise (`covers`) is taken off the hint at once, before
 * its statement starts. A user this process has not heard of in `ttlMs`, one with a statement in
 * flight, one whose last statement failed, or one whose balance is short, waits as before.
 */
export interface BalanceHints {
  /**
   * True when nothing of the user's is in flight and the last balance heard covers `amount`;
   * the amount is then promised (taken off the hint). The caller must run its statement next.
   */
  readonly covers: (userId: string, amount: number) => boolean
  /** A statement about the user's balance starts. */
  readonly begin: (userId: string) => void
  /** It answered: the balance it reported, or undefined when it failed (the hint is dropped). */
  readonly end: (userId: string, balance: number | undefined) => void
}

interface Entry {
  /** The balance heard when the user was last quiet, less what was promised since. */
  heard: { balance: number; readonly at: number } | undefined
  inFlight: number
  /** Lowest balance reported since the user's statements started; NaN once one failed. */
  spellMin: number
}

/** How long a heard balance is trusted, ms; and how many users are remembered at most. */
export const makeBalanceHints = (ttlMs = 30_000, maxUsers = 10_000, now: () => number = Date.now): BalanceHints => {
  const entries = new Map<string, Entry>()
  return {
    covers: (userId, amount) => {
      const heard = entries.get(userId)
      const hint = heard?.inFlight === 0 ? heard.heard : undefined
      if (hint === undefined || now() - hint.at > ttlMs || hint.balance < amount) return false
      hint.balance -= amount
      return true
    },
    begin: (userId) => {
      let entry = entries.get(userId)
      if (entry === undefined) {
        entry = { heard: undefined, inFlight: 0, spellMin: Infinity }
        entries.set(userId, entry)
        // The Map's order is oldest first; an evicted user's statements then end unheard.
        if (entries.size > maxUsers) entries.delete(entries.keys().next().value!)
      }
      if (entry.inFlight++ === 0) entry.spellMin = Infinity
    },
    end: (userId, balance) => {
      const entry = entries.get(userId)
      if (entry === undefined || entry.inFlight === 0) return
      entry.spellMin = balance === undefined ? NaN : Math.min(entry.spellMin, balance)
      if (--entry.inFlight > 0) return
      entry.heard = Number.isNaN(entry.spellMin) ? undefined : { balance: entry.spellMin, at: now() }
      // Heard again: move the user to the end of the eviction order.
      entries.delete(userId)
      entries.set(userId, entry)
    }
  }
}
