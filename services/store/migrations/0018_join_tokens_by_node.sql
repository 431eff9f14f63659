-- A node's registrations are held to the terms of the join token it used last
-- (JoinTokenStore::FindLastUsedJoinToken): found by the node's name at every registration.
CREATE INDEX join_tokens_node_idx ON join_tokens (node_name, created_at DESC);
