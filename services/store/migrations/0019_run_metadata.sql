-- A run's spec metadata as a JSON object, for ListRuns' metadata filter (`mcli get runs -m
-- KEY=VALUE`: metadata @> the pairs asked for), written with the body. Runs written before this
-- migration get theirs from their body when a store next opens (BackfillRunMetadata), which
-- finds them through the partial index: once every run has its metadata, that look is free.
ALTER TABLE runs ADD COLUMN metadata jsonb;
CREATE INDEX runs_metadata_idx ON runs USING gin (metadata jsonb_path_ops);
CREATE INDEX runs_metadata_missing_idx ON runs (id) WHERE metadata IS NULL;
