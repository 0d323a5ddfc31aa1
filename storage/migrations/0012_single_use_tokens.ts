/**
 * Single-use tokens (issue 39): a credential a server mints for a browser, good for opening one
 * WebSocket session of one kind (`realtime_scribe`, `tts_websocket`) within a short lifetime.
 *
 * - `token_hash`: the sha256 of the token (as API keys and site sessions): a database read does
 *   not hand out live tokens.
 * - `key_id` / `grant_id`: the API key or OAuth grant that minted it (NULL for the other kind, and
 *   both NULL for a site session's token); a token is refused once its minter is deleted or
 *   revoked (checked in the consuming UPDATE itself).
 * - `used_at`: set by the one UPDATE that consumes the token (`WHERE used_at IS NULL AND
 *   expires_at > now()`), so two instances racing for it cannot both win. Rows past `expires_at`
 *   are swept.
 *
 * Frozen once released: change the schema in a new numbered migration, never here.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql/SqlClient"

export default Effect.gen(function*() {
  const sql = yield* SqlClient
  yield* sql.unsafe(`
    CREATE TABLE single_use_tokens (
      token_hash bytea PRIMARY KEY CHECK (octet_length(token_hash) = 32),
      token_type text NOT NULL,
      user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      key_id text REFERENCES api_keys(id) ON DELETE CASCADE,
      grant_id text REFERENCES oauth_grants(id) ON DELETE CASCADE,
      client_id text,
      created_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz NOT NULL,
      used_at timestamptz
    )`)
  yield* sql.unsafe(`CREATE INDEX single_use_tokens_expiry ON single_use_tokens (expires_at)`)
})
