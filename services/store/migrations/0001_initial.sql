-- The first schema. Each row keeps its full protobuf message in `body` (bytea); the columns
-- beside it are copies of the fields that queries filter and sort on.

CREATE TABLE runs (
  id          text PRIMARY KEY,
  name        text NOT NULL UNIQUE,
  user_name   text NOT NULL,
  status      integer NOT NULL,
  cluster     text NOT NULL,
  gpu_type    text NOT NULL,
  created_at  timestamptz NOT NULL,
  version     bigint NOT NULL,
  body        bytea NOT NULL
);
CREATE INDEX runs_status_created_idx ON runs (status, created_at);
CREATE INDEX runs_user_created_idx ON runs (user_name, created_at);
CREATE INDEX runs_created_idx ON runs (created_at DESC, id DESC);

CREATE TABLE run_attempts (
  run_id            text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  resumption_index  integer NOT NULL,
  body              bytea NOT NULL,
  PRIMARY KEY (run_id, resumption_index)
);

CREATE TABLE run_events (
  id      bigserial PRIMARY KEY,
  run_id  text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  time    timestamptz NOT NULL,
  body    bytea NOT NULL
);
CREATE INDEX run_events_run_idx ON run_events (run_id, id);

CREATE TABLE nodes (
  name         text PRIMARY KEY,
  cluster      text NOT NULL,
  gpu_type     text NOT NULL,
  liveness     integer NOT NULL,
  admin_state  integer NOT NULL,
  version      bigint NOT NULL,
  body         bytea NOT NULL
);

-- No foreign key: a node's history outlives the node.
CREATE TABLE node_events (
  id         bigserial PRIMARY KEY,
  node_name  text NOT NULL,
  type       integer NOT NULL,
  time       timestamptz NOT NULL,
  body       bytea NOT NULL
);
CREATE INDEX node_events_node_idx ON node_events (node_name, id);

CREATE TABLE health_sweeps (
  id          text PRIMARY KEY,
  created_at  timestamptz NOT NULL,
  body        bytea NOT NULL
);
CREATE INDEX health_sweeps_created_idx ON health_sweeps (created_at DESC, id DESC);

CREATE TABLE health_results (
  id         bigserial PRIMARY KEY,
  sweep_id   text NOT NULL,
  node_name  text NOT NULL,
  body       bytea NOT NULL
);
CREATE INDEX health_results_node_idx ON health_results (node_name, id DESC);
CREATE INDEX health_results_sweep_idx ON health_results (sweep_id, id DESC);

CREATE TABLE api_keys (
  id           text PRIMARY KEY,
  user_name    text NOT NULL,
  secret_hash  text NOT NULL UNIQUE,
  created_at   timestamptz NOT NULL,
  revoked      boolean NOT NULL DEFAULT false,
  body         bytea NOT NULL
);

CREATE TABLE idempotency_keys (
  scope        text NOT NULL,
  key          text NOT NULL,
  fingerprint  text NOT NULL,
  response     bytea NOT NULL,
  recorded_at  timestamptz NOT NULL,
  PRIMARY KEY (scope, key)
);
CREATE INDEX idempotency_keys_recorded_idx ON idempotency_keys (recorded_at);
