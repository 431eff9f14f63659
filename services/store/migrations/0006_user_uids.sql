-- The unprivileged uid each user's ranks run as on every node (RunStore::UserUid). The sequence
-- starts at 1 and the uid is kFirstUserUid - 1 + its value; an insert that loses a race (ON
-- CONFLICT) spends a value, which leaves a gap, never a shared uid.
CREATE SEQUENCE user_uid_seq;
CREATE TABLE user_uids (
  user_name  text PRIMARY KEY,
  uid        bigint NOT NULL UNIQUE
);
