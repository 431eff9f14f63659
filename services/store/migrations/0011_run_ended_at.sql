-- When a run ended (NULL while it has not), beside its body: the retention of finished runs
-- finds the runs to remove by it without decoding every run.
ALTER TABLE runs ADD COLUMN ended_at timestamptz;
-- The body holds the time, but SQL cannot read it: runs that had already ended count from now,
-- so the retention keeps every one of them at least its full period after the upgrade.
UPDATE runs SET ended_at = now() WHERE status IN (6, 7, 8);  -- COMPLETED, STOPPED, FAILED
CREATE INDEX runs_ended_at_idx ON runs (ended_at) WHERE ended_at IS NOT NULL;
