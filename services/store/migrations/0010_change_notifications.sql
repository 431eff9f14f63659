-- Change notifications (store::ChangeFeed): a statement that writes runs' events, node events,
-- log watermarks or a node's state notifies a channel when its transaction commits (PostgreSQL folds the same
-- notification within one transaction into one), so watchers in any process wake at once
-- instead of polling. No payload: a watcher reads what is new itself.
CREATE FUNCTION tessera_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify(TG_ARGV[0], '');
  RETURN NULL;
END
$$;

CREATE TRIGGER run_events_changed AFTER INSERT ON run_events
  FOR EACH STATEMENT EXECUTE FUNCTION tessera_notify_change('tessera_run_events');
CREATE TRIGGER node_events_changed AFTER INSERT ON node_events
  FOR EACH STATEMENT EXECUTE FUNCTION tessera_notify_change('tessera_node_events');
CREATE TRIGGER log_streams_changed AFTER INSERT OR UPDATE ON log_streams
  FOR EACH STATEMENT EXECUTE FUNCTION tessera_notify_change('tessera_logs');
-- A node's state: its body. Heartbeat summaries (the *_micros columns) notify nobody.
CREATE TRIGGER nodes_changed AFTER INSERT OR DELETE OR UPDATE OF body ON nodes
  FOR EACH STATEMENT EXECUTE FUNCTION tessera_notify_change('tessera_nodes');
