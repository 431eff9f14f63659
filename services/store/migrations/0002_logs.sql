-- Rank output, owned by the log service. No foreign key to runs: the log service shares only
-- the database with the run manager, which asks it to delete a run's lines (DeleteRunLogs).

CREATE TABLE log_lines (
  run_id            text NOT NULL,
  resumption_index  integer NOT NULL,
  rank              integer NOT NULL,
  stream            smallint NOT NULL,
  sequence          bigint NOT NULL,
  node_rank         integer NOT NULL,
  node_name         text NOT NULL,
  time              timestamptz NOT NULL,
  text              bytea NOT NULL,
  PRIMARY KEY (run_id, resumption_index, rank, stream, sequence)
);
-- No index on time: every read goes stream by stream through the primary key (a stream's lines
-- are in time order) and merges the streams, which keeps ingest to one index per line.

-- One row per (run, resumption, rank, stream): every line up to durable_sequence is stored;
-- max_sequence is the highest stored. Updated in the transaction that stores the lines.
CREATE TABLE log_streams (
  run_id            text NOT NULL,
  resumption_index  integer NOT NULL,
  rank              integer NOT NULL,
  stream            smallint NOT NULL,
  node_rank         integer NOT NULL,
  node_name         text NOT NULL,
  durable_sequence  bigint NOT NULL,
  max_sequence      bigint NOT NULL,
  PRIMARY KEY (run_id, resumption_index, rank, stream)
);
