-- What ListRuns reads of a run: its body without the parts of its spec a user may make large
-- (command, env variables, parameters, metadata: SummarizeRun in filters.h), written with the body.
-- NULL for runs written before this migration, which lists read from their body until their next
-- write.
ALTER TABLE runs ADD COLUMN summary bytea;
