-- A change notification names its writer when the transaction says who it is
-- (set_config('tessera.writer', id, true), store::ChangeFeed::writer_id): a log service hands its
-- own commits to its followers in memory, and reads the database for everyone else's.
CREATE OR REPLACE FUNCTION tessera_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify(TG_ARGV[0], coalesce(current_setting('tessera.writer', true), ''));
  RETURN NULL;
END
$$;
