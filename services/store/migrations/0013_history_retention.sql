-- The retention of node history (store::NodeEventStore::DeleteNodeEventsBefore) takes the
-- oldest events by time: without this index each pass would scan the whole table.
CREATE INDEX node_events_time_idx ON node_events (time, id);
