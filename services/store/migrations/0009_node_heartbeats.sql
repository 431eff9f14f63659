-- A node's last heartbeat and lease expiry, stored for people by the scheduler in one statement
-- for many nodes (NodeStore::RecordHeartbeats) without a new version of the node: beside the
-- body, so that a heartbeat never rewrites, or conflicts with, a state change. Microseconds
-- since the epoch; NULL until the first summary. Readers put them on the body where later.
ALTER TABLE nodes ADD COLUMN last_heartbeat_micros bigint;
ALTER TABLE nodes ADD COLUMN lease_expires_micros bigint;
