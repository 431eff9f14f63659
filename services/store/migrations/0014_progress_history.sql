-- The progress history of each attempt: what a run's charts draw. The run manager keeps it
-- bounded (services/runs/progress_history.h: the earliest report of each of at most 2,000
-- buckets of steps, and the latest); the points go with their run.
CREATE TABLE run_progress (
  run_id             text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  resumption_index   integer NOT NULL,
  step               bigint NOT NULL,
  time               timestamptz NOT NULL,
  loss               double precision NOT NULL,
  learning_rate      double precision NOT NULL,
  tokens_per_second  double precision NOT NULL,
  mfu                double precision NOT NULL,
  PRIMARY KEY (run_id, resumption_index, step)
);
