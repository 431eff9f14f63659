-- Join tokens (owned by the admin API, with api_keys): a new node's one-time credential. Only
-- the hash of a secret is stored; used_at is set once, in the transaction that makes the node's
-- key.
CREATE TABLE join_tokens (
  id           text PRIMARY KEY,
  secret_hash  text NOT NULL UNIQUE,
  node_name    text NOT NULL,
  created_at   timestamptz NOT NULL,
  body         bytea NOT NULL
);
CREATE INDEX join_tokens_created_idx ON join_tokens (created_at DESC, id DESC);

-- The node a node key acts as, so that joining again can revoke the node's earlier keys. Keys
-- made before this migration keep '' (their node is in body).
ALTER TABLE api_keys ADD COLUMN node_name text NOT NULL DEFAULT '';
CREATE INDEX api_keys_node_idx ON api_keys (node_name) WHERE node_name <> '';

-- The audit log: every admin's and operator's action, written by the service that answered it.
-- Append-only; read newest first.
CREATE TABLE audit_log (
  id      bigserial PRIMARY KEY,
  time    timestamptz NOT NULL,
  actor   text NOT NULL,
  action  text NOT NULL,
  target  text NOT NULL,
  body    bytea NOT NULL
);
CREATE INDEX audit_log_time_idx ON audit_log (time);
