-- Log quotas and the retention of finished runs' logs (owned by the log service).

-- On a line the log service wrote in place of lines it dropped (a run over its quota), how many
-- it stands for (it takes the sequence of the last of them); 0 for a line a rank printed.
ALTER TABLE log_lines ADD COLUMN dropped bigint NOT NULL DEFAULT 0;

-- Bytes of text stored per stream (a run's quota is the sum over its streams) and when its
-- newest line was printed (a run whose logs are idle past the retention period, and that has
-- ended, has them removed).
ALTER TABLE log_streams ADD COLUMN bytes bigint NOT NULL DEFAULT 0;
ALTER TABLE log_streams ADD COLUMN last_line_at timestamptz NOT NULL DEFAULT now();
CREATE INDEX log_streams_last_line_idx ON log_streams (last_line_at);

-- Runs whose logs the retention period removed: a reader is told when, not shown nothing.
CREATE TABLE log_expirations (
  run_id      text PRIMARY KEY,
  expired_at  timestamptz NOT NULL
);
