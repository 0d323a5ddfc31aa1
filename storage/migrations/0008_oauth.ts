/**
 * The OAuth 2.1 authorization server (SPEC 5): registered clients, the user's grants (what a
 * client may do, remembered after consent), single-use authorization codes, opaque access and
 * refresh tokens, and the keys that sign ID tokens.
 *
 * - Secrets (client secrets, codes, tokens) are stored as sha256 only.
 * - `oauth_tokens.family`: every refresh token of one chain of rotations shares it, so reuse of a
 *   rotated refresh token revokes the whole family; `code_hash` ties tokens to the code they came
 *   from, so a replayed code revokes them.
 * - Revoking a grant (the account page) revokes its tokens in the same statement.
 * - `oauth_signing_keys`: private JWKs of the ID-token keys; `retired_at` keeps a rotated key in
 *   the JWKS for verifiers until tokens signed with it have expired.
 *
 * Frozen once released: change the schema in a new numbered migration, never here.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql/SqlClient"

export default Effect.gen(function*() {
  const sql = yield* SqlClient
  yield* sql.unsafe(`
    CREATE TABLE oauth_clients (
      id text PRIMARY KEY,
      secret_hash bytea,
      name text NOT NULL,
      redirect_uris jsonb NOT NULL,
      auth_method text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`)
  yield* sql.unsafe(`
    CREATE TABLE oauth_grants (
      id text PRIMARY KEY,
      user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      client_id text NOT NULL REFERENCES oauth_clients(id) ON DELETE CASCADE,
      scopes text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      revoked_at timestamptz
    )`)
  yield* sql.unsafe(`CREATE UNIQUE INDEX oauth_grants_live ON oauth_grants (user_id, client_id) WHERE revoked_at IS NULL`)
  yield* sql.unsafe(`
    CREATE TABLE oauth_codes (
      code_hash bytea PRIMARY KEY,
      grant_id text NOT NULL REFERENCES oauth_grants(id) ON DELETE CASCADE,
      client_id text NOT NULL,
      redirect_uri text NOT NULL,
      code_challenge text NOT NULL,
      scopes text NOT NULL,
      nonce text,
      expires_at timestamptz NOT NULL,
      used_at timestamptz
    )`)
  yield* sql.unsafe(`
    CREATE TABLE oauth_tokens (
      token_hash bytea PRIMARY KEY,
      kind text NOT NULL CHECK (kind IN ('access', 'refresh')),
      grant_id text NOT NULL REFERENCES oauth_grants(id) ON DELETE CASCADE,
      family text NOT NULL,
      code_hash bytea,
      scopes text NOT NULL,
      expires_at timestamptz NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      used_at timestamptz,
      revoked_at timestamptz
    )`)
  yield* sql.unsafe(`CREATE INDEX oauth_tokens_grant ON oauth_tokens (grant_id)`)
  yield* sql.unsafe(`CREATE INDEX oauth_tokens_family ON oauth_tokens (family)`)
  yield* sql.unsafe(`
    CREATE TABLE oauth_signing_keys (
      kid text PRIMARY KEY,
      private_jwk jsonb NOT NULL,
      public_jwk jsonb NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      retired_at timestamptz
    )`)
})
