/**
 * Users, their credits and their API keys.
 *
 * Ids are text with a kind prefix (`usr_…`, `key_…`) so that a stray id in a log or a URL says
 * what it is. Every table owned by a user that later migrations add carries
 * `user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE` and an index that starts with
 * `user_id`, because every query on behalf of a caller filters by it.
 *
 * Frozen once released: change the schema in a new numbered migration, never here.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql/SqlClient"

export default Effect.gen(function*() {
  const sql = yield* SqlClient
  // Credits stay within JavaScript's safe integers so they read back exactly as numbers.
  yield* sql.unsafe(`
    CREATE TABLE users (
      id text PRIMARY KEY,
      name text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      credits bigint NOT NULL DEFAULT 0,
      CONSTRAINT users_credits_not_negative CHECK (credits >= 0),
      CONSTRAINT users_credits_safe_integer CHECK (credits <= 9007199254740991)
    )`)
  // Only the sha256 of a key is stored (32 bytes); the key itself is shown once, at minting.
  // Deleting a key sets deleted_at, so logs and usage rows can still name it.
  yield* sql.unsafe(`
    CREATE TABLE api_keys (
      id text PRIMARY KEY,
      user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      name text NOT NULL,
      key_hash bytea NOT NULL UNIQUE CHECK (octet_length(key_hash) = 32),
      key_prefix text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      deleted_at timestamptz
    )`)
  yield* sql.unsafe(`CREATE INDEX api_keys_user_id ON api_keys (user_id)`)
  // Every change to a key tells listening servers which cached key to forget, whichever process
  // (or person with psql) made it. Payload: hex of key_hash. Channel: speech_api_keys.
  yield* sql.unsafe(`
    CREATE FUNCTION api_keys_notify() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('speech_api_keys', encode(OLD.key_hash, 'hex'));
      ELSE
        PERFORM pg_notify('speech_api_keys', encode(NEW.key_hash, 'hex'));
      END IF;
      RETURN NULL;
    END
    $$`)
  yield* sql.unsafe(`
    CREATE TRIGGER api_keys_notify AFTER INSERT OR UPDATE OR DELETE ON api_keys
    FOR EACH ROW EXECUTE FUNCTION api_keys_notify()`)
})
