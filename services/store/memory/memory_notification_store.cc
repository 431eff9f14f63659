// Webhook subscriptions and notifications in memory.
#include <set>

#include "absl/strings/str_cat.h"
#include "base/timestamps.h"
#include "services/store/memory/memory_database.h"

namespace tessera::store {
namespace {

class MemoryNotificationStore final : public NotificationStore {
 public:
  explicit MemoryNotificationStore(std::shared_ptr<MemoryDatabase> db) : db_(std::move(db)) {}

  absl::Status CreateSubscription(const SubscriptionRecord& record) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    const std::string& id = record.subscription.id();
    if (db_->subscriptions.count(id)) {
      return absl::AlreadyExistsError(absl::StrCat("subscription ", id, " already exists"));
    }
    db_->subscriptions[id] = record;
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<SubscriptionRecord>> ListSubscriptions() override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    std::vector<SubscriptionRecord> out;
    for (const auto& [id, record] : db_->subscriptions) out.push_back(record);
    std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
      return FromProtoTime(a.subscription.created_at()) <
             FromProtoTime(b.subscription.created_at());
    });
    return out;
  }

  absl::Status DeleteSubscription(std::string_view id) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    if (db_->subscriptions.erase(std::string(id)) == 0) {
      return absl::NotFoundError(absl::StrCat("subscription ", std::string(id), " not found"));
    }
    std::erase_if(db_->notifications,
                  [&](const auto& entry) { return entry.second.subscription_id() == id; });
    std::erase_if(db_->notification_keys,
                  [&](const auto& entry) { return entry.first.first == id; });
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> Cursor(std::string_view source) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    const auto it = db_->notification_cursors.find(source);
    return it == db_->notification_cursors.end() ? 0 : it->second;
  }

  absl::StatusOr<int> Enqueue(std::string_view source, int64_t expected, int64_t next,
                              const std::vector<NewNotification>& notifications) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    const auto it = db_->notification_cursors.find(source);
    const int64_t at = it == db_->notification_cursors.end() ? 0 : it->second;
    if (at != expected) {
      return absl::AbortedError(
          absl::StrCat("the cursor of ", std::string(source), " is at ", at, ", not ", expected));
    }
    db_->notification_cursors.insert_or_assign(std::string(source), next);
    int written = 0;
    for (const auto& n : notifications) {
      const std::string& sub = n.notification.subscription_id();
      if (!db_->subscriptions.count(sub)) continue;
      const auto key = std::make_pair(sub, n.dedupe_key);
      if (db_->notification_keys.count(key)) continue;
      v1::Notification stored = n.notification;
      stored.set_id(db_->next_notification_id++);
      stored.set_state(v1::NOTIFICATION_STATE_PENDING);
      *stored.mutable_next_attempt_at() = stored.created_at();
      db_->notification_keys[key] = stored.id();
      db_->notifications[stored.id()] = std::move(stored);
      ++written;
    }
    return written;
  }

  absl::StatusOr<std::vector<v1::Notification>> DueNotifications(absl::Time now,
                                                                 int limit) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    std::vector<v1::Notification> out;
    for (const v1::Notification* head : Heads()) {
      if (static_cast<int>(out.size()) >= limit) break;
      if (FromProtoTime(head->next_attempt_at()) <= now) out.push_back(*head);
    }
    return out;
  }

  absl::StatusOr<std::vector<v1::Notification>> PendingOfSubject(std::string_view subscription_id,
                                                                 std::string_view subject,
                                                                 int limit) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    std::vector<v1::Notification> out;
    for (const auto& [id, n] : db_->notifications) {
      if (static_cast<int>(out.size()) >= limit) break;
      if (n.state() == v1::NOTIFICATION_STATE_PENDING && n.subscription_id() == subscription_id &&
          n.subject() == subject) {
        out.push_back(n);
      }
    }
    return out;
  }

  absl::StatusOr<absl::Time> NextDue() override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    absl::Time next = absl::InfiniteFuture();
    for (const v1::Notification* head : Heads()) {
      next = std::min(next, FromProtoTime(head->next_attempt_at()));
    }
    return next;
  }

  absl::Status UpdateNotification(const v1::Notification& notification) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    auto it = db_->notifications.find(notification.id());
    if (it == db_->notifications.end()) {
      return absl::NotFoundError(absl::StrCat("notification ", notification.id(), " not found"));
    }
    v1::Notification& n = it->second;
    n.set_state(notification.state());
    n.set_attempts(notification.attempts());
    *n.mutable_next_attempt_at() = notification.next_attempt_at();
    *n.mutable_delivered_at() = notification.delivered_at();
    n.set_last_error(notification.last_error());
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<v1::Notification>> ListNotifications(
      const NotificationFilter& filter) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    std::vector<v1::Notification> out;
    for (auto it = db_->notifications.rbegin(); it != db_->notifications.rend(); ++it) {
      if (static_cast<int>(out.size()) >= filter.limit) break;
      const v1::Notification& n = it->second;
      if (!filter.owner.empty() && n.owner() != filter.owner) continue;
      if (!filter.subscription_id.empty() && n.subscription_id() != filter.subscription_id) {
        continue;
      }
      out.push_back(n);
    }
    return out;
  }

  absl::StatusOr<int64_t> DeleteNotificationsBefore(absl::Time before, int limit) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    int64_t deleted = 0;
    for (auto it = db_->notifications.begin(); it != db_->notifications.end() && deleted < limit;) {
      const v1::Notification& n = it->second;
      if (n.state() != v1::NOTIFICATION_STATE_PENDING && FromProtoTime(n.created_at()) < before) {
        it = db_->notifications.erase(it);
        ++deleted;
      } else {
        ++it;
      }
    }
    return deleted;
  }

 private:
  // Each (subscription, subject)'s oldest pending notification, oldest first.
  std::vector<const v1::Notification*> Heads() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_->mu) {
    std::set<std::pair<std::string, std::string>> seen;
    std::vector<const v1::Notification*> heads;
    for (const auto& [id, n] : db_->notifications) {
      if (n.state() != v1::NOTIFICATION_STATE_PENDING) continue;
      if (seen.insert({n.subscription_id(), n.subject()}).second) heads.push_back(&n);
    }
    return heads;
  }

  std::shared_ptr<MemoryDatabase> db_;
};

}  // namespace

std::shared_ptr<NotificationStore> MakeMemoryNotificationStore(std::shared_ptr<MemoryDatabase> db) {
  return std::make_shared<MemoryNotificationStore>(std::move(db));
}

}  // namespace tessera::store
