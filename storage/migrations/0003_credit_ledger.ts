/**
 * Credits that survive a crash, and their history.
 *
 * - `service_instances`: one row per running server process, its heartbeat in `last_seen`
 *   (database time, so hosts with skewed clocks agree). `host_key` is hostname, PID namespace
 *   and boot id: two rows with the same key live on one kernel, where a dead pid can be seen.
 * - `credit_reservations`: credits taken from `users.credits` for work in progress. Settling
 *   moves the amount used to the ledger and gives the rest back; a reservation of a dead
 *   instance is given back whole (storage/Credits.ts, storage/InstanceRegistry.ts).
 * - `credit_ledger`: every grant, debit and refund, signed (+ adds to the balance), with the
 *   balance right after it. Invariant per user: sum(amount) = credits + open reservations.
 *   Users that already have credits get an opening grant so the invariant holds from here on.
 *
 * Frozen once released: change the schema in a new numbered migration, never here.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql/SqlClient"

export default Effect.gen(function*() {
  const sql = yield* SqlClient
  yield* sql.unsafe(`
    CREATE TABLE service_instances (
      id text PRIMARY KEY,
      host_key text NOT NULL,
      pid integer NOT NULL,
      started_at timestamptz NOT NULL DEFAULT now(),
      last_seen timestamptz NOT NULL DEFAULT now()
    )`)
  // No foreign key to service_instances: the sweeper deletes an instance's row after giving
  // back its reservations, and a reservation must never vanish with a row it does not own.
  yield* sql.unsafe(`
    CREATE TABLE credit_reservations (
      id text PRIMARY KEY,
      user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      amount bigint NOT NULL CHECK (amount >= 0),
      instance_id text NOT NULL,
      purpose text NOT NULL,
      reference text,
      created_at timestamptz NOT NULL DEFAULT now()
    )`)
  yield* sql.unsafe(`CREATE INDEX credit_reservations_user_id ON credit_reservations (user_id)`)
  yield* sql.unsafe(`CREATE INDEX credit_reservations_instance_id ON credit_reservations (instance_id)`)
  yield* sql.unsafe(`
    CREATE TABLE credit_ledger (
      id bigserial PRIMARY KEY,
      user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      kind text NOT NULL CHECK (kind IN ('grant', 'debit', 'refund')),
      amount bigint NOT NULL CHECK (amount <> 0 AND (kind = 'debit') = (amount < 0)),
      balance_after bigint NOT NULL,
      purpose text,
      reference text,
      created_at timestamptz NOT NULL DEFAULT now()
    )`)
  yield* sql.unsafe(`CREATE INDEX credit_ledger_user_id ON credit_ledger (user_id, id DESC)`)
  yield* sql.unsafe(`
    INSERT INTO credit_ledger (user_id, kind, amount, balance_after, purpose)
    SELECT id, 'grant', credits, credits, 'opening balance' FROM users WHERE credits > 0`)
})
