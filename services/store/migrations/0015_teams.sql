-- Teams (TeamStore): each row keeps the whole team (members and quotas) in `body`; a user's
-- membership is also a row of team_members, whose primary key makes a user a member of at
-- most one team.
CREATE TABLE teams (
  name        text PRIMARY KEY,
  created_at  timestamptz NOT NULL,
  body        bytea NOT NULL
);
CREATE TABLE team_members (
  user_name  text PRIMARY KEY,
  team       text NOT NULL REFERENCES teams (name) ON DELETE CASCADE
);
