-- Webhook subscriptions and their notifications (NotificationStore). `sealed_secret` is the
-- signing secret encrypted by the notifier (empty: unsigned); `body` is the Subscription.
CREATE TABLE notification_subscriptions (
  id            text PRIMARY KEY,
  created_at    timestamptz NOT NULL,
  body          bytea NOT NULL,
  sealed_secret bytea NOT NULL
);

-- One row per notification: `body` is the Notification; `state` (1: pending) and
-- `next_attempt_at` are its columns too, for the deliverer's look at what is due. A subject's
-- (run's, node's) notifications are delivered in id order.
CREATE TABLE notifications (
  id              bigserial PRIMARY KEY,
  subscription_id text NOT NULL REFERENCES notification_subscriptions (id) ON DELETE CASCADE,
  dedupe_key      text NOT NULL,
  subject         text NOT NULL,
  owner_name      text NOT NULL,
  state           smallint NOT NULL,
  next_attempt_at timestamptz NOT NULL,
  created_at      timestamptz NOT NULL,
  body            bytea NOT NULL,
  UNIQUE (subscription_id, dedupe_key)
);
CREATE INDEX notifications_pending_idx ON notifications (subscription_id, subject, id)
  WHERE state = 1;
CREATE INDEX notifications_done_idx ON notifications (created_at) WHERE state <> 1;
CREATE INDEX notifications_owner_idx ON notifications (owner_name, id);

-- Where each planner (a source of events) stands.
CREATE TABLE notification_cursors (
  source   text PRIMARY KEY,
  position bigint NOT NULL
);
