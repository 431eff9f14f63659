-- Leadership terms: each time an instance takes a role (the scheduler, the health API), the
-- role's epoch goes up by one in the same session that holds the role's advisory lock. Writes
-- made on behalf of a leader carry its epoch (a fencing token) and check it against this row in
-- their own transaction (FOR SHARE), so a demoted leader that wakes up cannot change anything:
-- the new leader's increment waits for writes already in flight, and every later write of the
-- old term is refused.
CREATE TABLE leader_terms (
  role    text PRIMARY KEY,
  epoch   bigint NOT NULL,
  holder  text NOT NULL,
  since   timestamptz NOT NULL DEFAULT now()
);
