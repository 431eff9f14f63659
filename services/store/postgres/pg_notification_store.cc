// Webhook subscriptions and notifications in PostgreSQL (migration 0020).
#include <pqxx/pqxx>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/timestamps.h"
#include "services/store/filters.h"
#include "services/store/postgres/pg_codec.h"
#include "services/store/postgres/pg_stores.h"

namespace tessera::store {
namespace {

// A notification's head rows: each (subscription, subject)'s oldest pending one.
constexpr char kHeads[] =
    "SELECT DISTINCT ON (subscription_id, subject) id, body, next_attempt_at FROM notifications"
    " WHERE state = 1 ORDER BY subscription_id, subject, id";

class PgNotificationStore final : public NotificationStore {
 public:
  explicit PgNotificationStore(std::shared_ptr<PgPool> pool) : pool_(std::move(pool)) {}

  absl::Status CreateSubscription(const SubscriptionRecord& record) override {
    const v1::Subscription& s = record.subscription;
    absl::Status st = pool_->Transact("creating a subscription", [&](pqxx::work& tx) {
      tx.exec_params(absl::StrCat("INSERT INTO notification_subscriptions (id, created_at, body, "
                                  "sealed_secret) VALUES ($1, ",
                                  MicrosParam(2), ", $3, $4)"),
                     s.id(), ToMicros(s.created_at()), EncodeMessage(s),
                     pqxx::binarystring(record.sealed_secret));
      return absl::OkStatus();
    });
    if (absl::IsAlreadyExists(st)) {
      return absl::AlreadyExistsError(absl::StrCat("subscription ", s.id(), " already exists"));
    }
    return st;
  }

  absl::StatusOr<std::vector<SubscriptionRecord>> ListSubscriptions() override {
    std::vector<SubscriptionRecord> out;
    absl::Status st = pool_->Transact("listing subscriptions", [&](pqxx::work& tx) -> absl::Status {
      for (const auto& row : tx.exec("SELECT body, sealed_secret FROM notification_subscriptions"
                                     " ORDER BY created_at, id COLLATE \"C\"")) {
        SubscriptionRecord r;
        TESSERA_RETURN_IF_ERROR(DecodeMessage(row[0], &r.subscription));
        r.sealed_secret = pqxx::binarystring(row[1]).str();
        out.push_back(std::move(r));
      }
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return out;
  }

  absl::Status DeleteSubscription(std::string_view id) override {
    return pool_->Transact("deleting a subscription", [&](pqxx::work& tx) -> absl::Status {
      const pqxx::result r =
          tx.exec_params("DELETE FROM notification_subscriptions WHERE id = $1", std::string(id));
      if (r.affected_rows() == 0) {
        return absl::NotFoundError(absl::StrCat("subscription ", std::string(id), " not found"));
      }
      return absl::OkStatus();
    });
  }

  absl::StatusOr<int64_t> Cursor(std::string_view source) override {
    int64_t position = 0;
    absl::Status st =
        pool_->Transact("reading a notification cursor", [&](pqxx::work& tx) -> absl::Status {
          const pqxx::result rows = tx.exec_params(
              "SELECT position FROM notification_cursors WHERE source = $1", std::string(source));
          if (!rows.empty()) position = rows[0][0].as<int64_t>();
          return absl::OkStatus();
        });
    if (!st.ok()) return st;
    return position;
  }

  absl::StatusOr<int> Enqueue(std::string_view source, int64_t expected, int64_t next,
                              const std::vector<NewNotification>& notifications) override {
    int written = 0;
    absl::Status st =
        pool_->Transact("enqueueing notifications", [&](pqxx::work& tx) -> absl::Status {
          written = 0;
          // The cursor's row, locked: two planners of one source take turns.
          tx.exec_params(
              "INSERT INTO notification_cursors (source, position) VALUES ($1, 0)"
              " ON CONFLICT (source) DO NOTHING",
              std::string(source));
          const int64_t at = tx.exec_params1(
                                   "SELECT position FROM notification_cursors WHERE source = $1"
                                   " FOR UPDATE",
                                   std::string(source))[0]
                                 .as<int64_t>();
          if (at != expected) {
            return absl::AbortedError(absl::StrCat("the cursor of ", std::string(source), " is at ",
                                                   at, ", not ", expected));
          }
          tx.exec_params("UPDATE notification_cursors SET position = $2 WHERE source = $1",
                         std::string(source), next);
          for (const auto& n : notifications) {
            v1::Notification stored = n.notification;
            stored.set_state(v1::NOTIFICATION_STATE_PENDING);
            *stored.mutable_next_attempt_at() = stored.created_at();
            // A subscription deleted meanwhile writes nothing (the SELECT finds no row).
            const pqxx::result r = tx.exec_params(
                absl::StrCat("INSERT INTO notifications (subscription_id, dedupe_key, subject, "
                             "owner_name, state, next_attempt_at, created_at, body) SELECT $1, "
                             "$2, $3, $4, 1, ",
                             MicrosParam(5), ", ", MicrosParam(5),
                             ", $6 FROM notification_subscriptions WHERE id = $1"
                             " ON CONFLICT (subscription_id, dedupe_key) DO NOTHING"),
                stored.subscription_id(), n.dedupe_key, stored.subject(), stored.owner(),
                ToMicros(stored.created_at()), EncodeMessage(stored));
            written += static_cast<int>(r.affected_rows());
          }
          return absl::OkStatus();
        });
    if (!st.ok()) return st;
    return written;
  }

  absl::StatusOr<std::vector<v1::Notification>> DueNotifications(absl::Time now,
                                                                 int limit) override {
    std::vector<v1::Notification> out;
    absl::Status st =
        pool_->Transact("reading due notifications", [&](pqxx::work& tx) -> absl::Status {
          return DecodeIdRows(tx.exec_params(absl::StrCat("SELECT id, body FROM (", kHeads,
                                                          ") heads WHERE next_attempt_at <= ",
                                                          MicrosParam(1), " ORDER BY id LIMIT $2"),
                                             absl::ToUnixMicros(now), limit),
                              &out);
        });
    if (!st.ok()) return st;
    for (auto& n : out) n.set_state(v1::NOTIFICATION_STATE_PENDING);
    return out;
  }

  absl::StatusOr<std::vector<v1::Notification>> PendingOfSubject(std::string_view subscription_id,
                                                                 std::string_view subject,
                                                                 int limit) override {
    std::vector<v1::Notification> out;
    absl::Status st =
        pool_->Transact("reading a subject's notifications", [&](pqxx::work& tx) -> absl::Status {
          return DecodeIdRows(
              tx.exec_params("SELECT id, body FROM notifications WHERE state = 1 AND "
                             "subscription_id = $1 AND subject = $2 ORDER BY id LIMIT $3",
                             std::string(subscription_id), std::string(subject), limit),
              &out);
        });
    if (!st.ok()) return st;
    for (auto& n : out) n.set_state(v1::NOTIFICATION_STATE_PENDING);
    return out;
  }

  absl::StatusOr<absl::Time> NextDue() override {
    absl::Time next = absl::InfiniteFuture();
    absl::Status st =
        pool_->Transact("reading the next due notification", [&](pqxx::work& tx) -> absl::Status {
          const pqxx::result rows = tx.exec(absl::StrCat(
              "SELECT (extract(epoch FROM min(next_attempt_at)) * 1000000)::bigint FROM (", kHeads,
              ") heads"));
          if (!rows.empty() && !rows[0][0].is_null()) {
            next = absl::FromUnixMicros(rows[0][0].as<int64_t>());
          }
          return absl::OkStatus();
        });
    if (!st.ok()) return st;
    return next;
  }

  absl::Status UpdateNotification(const v1::Notification& notification) override {
    return pool_->Transact("updating a notification", [&](pqxx::work& tx) -> absl::Status {
      const pqxx::result rows = tx.exec_params(
          "SELECT body FROM notifications WHERE id = $1 FOR UPDATE", notification.id());
      if (rows.empty()) {
        return absl::NotFoundError(absl::StrCat("notification ", notification.id(), " not found"));
      }
      v1::Notification n;
      TESSERA_RETURN_IF_ERROR(DecodeMessage(rows[0][0], &n));
      n.set_id(notification.id());  // the row's, not in its body
      n.set_state(notification.state());
      n.set_attempts(notification.attempts());
      *n.mutable_next_attempt_at() = notification.next_attempt_at();
      *n.mutable_delivered_at() = notification.delivered_at();
      n.set_last_error(notification.last_error());
      tx.exec_params(
          absl::StrCat("UPDATE notifications SET state = $2, next_attempt_at = ", MicrosParam(3),
                       ", body = $4 WHERE id = $1"),
          n.id(), static_cast<int>(n.state()), ToMicros(n.next_attempt_at()), EncodeMessage(n));
      return absl::OkStatus();
    });
  }

  absl::StatusOr<std::vector<v1::Notification>> ListNotifications(
      const NotificationFilter& filter) override {
    std::vector<v1::Notification> out;
    absl::Status st = pool_->Transact("listing notifications", [&](pqxx::work& tx) -> absl::Status {
      return DecodeIdRows(tx.exec_params("SELECT id, body FROM notifications"
                                         " WHERE ($1 = '' OR owner_name = $1)"
                                         " AND ($2 = '' OR subscription_id = $2)"
                                         " ORDER BY id DESC LIMIT $3",
                                         filter.owner, filter.subscription_id, filter.limit),
                          &out);
    });
    if (!st.ok()) return st;
    return out;
  }

  absl::StatusOr<int64_t> DeleteNotificationsBefore(absl::Time before, int limit) override {
    int64_t deleted = 0;
    absl::Status st =
        pool_->Transact("deleting old notifications", [&](pqxx::work& tx) -> absl::Status {
          deleted = static_cast<int64_t>(
              tx.exec_params(absl::StrCat("DELETE FROM notifications WHERE id IN (SELECT id FROM "
                                          "notifications WHERE state <> 1 AND created_at < ",
                                          MicrosParam(1), " ORDER BY created_at LIMIT $2)"),
                             absl::ToUnixMicros(before), limit)
                  .affected_rows());
          return absl::OkStatus();
        });
    if (!st.ok()) return st;
    return deleted;
  }

 private:
  std::shared_ptr<PgPool> pool_;
};

}  // namespace

std::shared_ptr<NotificationStore> MakePgNotificationStore(std::shared_ptr<PgPool> pool) {
  return std::make_shared<PgNotificationStore>(std::move(pool));
}

}  // namespace tessera::store
