/**
 * The site: people sign in with an e-mail and a password, and browsers hold a server-side session.
 *
 * - `users.email`: unique without regard to case (an index on `lower(email)`); NULL for users
 *   made without one (API-only accounts of the admin CLI and tests).
 * - `users.password_hash`: an argon2id PHC string (storage/Passwords.ts); NULL: no password set,
 *   the user cannot sign in.
 * - `web_sessions`: only the sha256 of the cookie's random token is stored, so a database read
 *   does not hand out live sessions. `csrf_token` is the session's form token. Rows past
 *   `expires_at` are refused and swept. Signing out everywhere deletes a user's rows.
 * - `api_keys.last_used_at`: shown on the developer page; written about once a minute a key.
 * - `api_keys.key_suffix`: the key's last four characters, so a list can show `sk_svc_ab…wxyz`
 *   (NULL for keys minted before this migration).
 *
 * Frozen once released: change the schema in a new numbered migration, never here.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql/SqlClient"

export default Effect.gen(function*() {
  const sql = yield* SqlClient
  yield* sql.unsafe(`ALTER TABLE users ADD COLUMN email text`)
  yield* sql.unsafe(`ALTER TABLE users ADD COLUMN password_hash text`)
  yield* sql.unsafe(`CREATE UNIQUE INDEX users_email_lower ON users (lower(email)) WHERE email IS NOT NULL`)
  yield* sql.unsafe(`ALTER TABLE api_keys ADD COLUMN last_used_at timestamptz`)
  yield* sql.unsafe(`ALTER TABLE api_keys ADD COLUMN key_suffix text`)
  yield* sql.unsafe(`
    CREATE TABLE web_sessions (
      token_hash bytea PRIMARY KEY CHECK (octet_length(token_hash) = 32),
      user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      csrf_token text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz NOT NULL
    )`)
  yield* sql.unsafe(`CREATE INDEX web_sessions_user ON web_sessions (user_id)`)
  yield* sql.unsafe(`CREATE INDEX web_sessions_expiry ON web_sessions (expires_at)`)
})
