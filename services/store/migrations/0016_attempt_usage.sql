-- GPU usage (UsageStore): each attempt's start and end as columns, and each run's team. Attempts
-- recorded before this migration have neither and are not counted.
ALTER TABLE run_attempts ADD COLUMN started_at timestamptz;
ALTER TABLE run_attempts ADD COLUMN ended_at timestamptz;
CREATE INDEX run_attempts_usage_idx ON run_attempts (ended_at, started_at);
ALTER TABLE runs ADD COLUMN team text NOT NULL DEFAULT '';
