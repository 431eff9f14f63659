#pragma once
// The tables of the in-memory store, shared by its per-domain views under one lock, so that
// cross-domain writes (a node update with its events) are atomic as in PostgreSQL.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/store/change_feed.h"
#include "services/store/log_fanout.h"
#include "services/store/stores.h"

namespace tessera::store {

struct MemoryDatabase {
  absl::Mutex mu;
  // Bumped by the stores' writes, under `mu`.
  const std::shared_ptr<ChangeFeed> changes = std::make_shared<ChangeFeed>();
  // Every handle's log store publishes here: one database, one set of followers.
  LogFanout log_fanout{changes};
  // When set, every call fails with UNAVAILABLE, as when PostgreSQL is down.
  bool unavailable ABSL_GUARDED_BY(mu) = false;

  std::map<std::string, v1::Run> runs ABSL_GUARDED_BY(mu);  // by id
  std::map<std::string, std::string> run_ids_by_name ABSL_GUARDED_BY(mu);
  std::map<std::pair<std::string, int>, v1::Attempt> attempts ABSL_GUARDED_BY(mu);
  // Progress history by (run id, resumption index), then step.
  std::map<std::pair<std::string, int32_t>, std::map<int64_t, ProgressPoint>> progress
      ABSL_GUARDED_BY(mu);
  std::vector<v1::RunEvent> run_events ABSL_GUARDED_BY(mu);
  int64_t next_run_event_id ABSL_GUARDED_BY(mu) = 1;
  std::map<std::string, int64_t, std::less<>> user_uids ABSL_GUARDED_BY(mu);

  std::map<std::string, v1::Node> nodes ABSL_GUARDED_BY(mu);
  std::vector<v1::NodeEvent> node_events ABSL_GUARDED_BY(mu);
  int64_t next_node_event_id ABSL_GUARDED_BY(mu) = 1;

  std::map<std::string, v1::Sweep> sweeps ABSL_GUARDED_BY(mu);
  std::vector<v1::HealthCheckResult> health_results ABSL_GUARDED_BY(mu);
  int64_t next_health_result_id ABSL_GUARDED_BY(mu) = 1;

  std::map<std::string, ApiKeyRecord> api_keys ABSL_GUARDED_BY(mu);        // by id
  std::map<std::string, JoinTokenRecord> join_tokens ABSL_GUARDED_BY(mu);  // by id
  std::map<std::pair<std::string, std::string>, SecretRecord> secrets ABSL_GUARDED_BY(mu);
  std::map<std::string, v1::Team, std::less<>> teams ABSL_GUARDED_BY(mu);
  std::map<std::string, std::string, std::less<>> team_of_user ABSL_GUARDED_BY(mu);
  std::map<std::string, SubscriptionRecord> subscriptions ABSL_GUARDED_BY(mu);  // by id
  std::map<int64_t, v1::Notification> notifications ABSL_GUARDED_BY(mu);        // by id
  // (subscription id, dedupe key) of every notification written.
  std::map<std::pair<std::string, std::string>, int64_t> notification_keys ABSL_GUARDED_BY(mu);
  std::map<std::string, int64_t, std::less<>> notification_cursors ABSL_GUARDED_BY(mu);
  int64_t next_notification_id ABSL_GUARDED_BY(mu) = 1;
  std::vector<v1::AuditRecord> audit ABSL_GUARDED_BY(mu);
  int64_t next_audit_id ABSL_GUARDED_BY(mu) = 1;

  // Rank output by (run id, resumption, rank, stream): the stream's watermarks and its lines
  // by sequence.
  struct LogLines {
    LogStreamInfo info;
    std::map<int64_t, v1::LogLine> lines;
    int64_t bytes = 0;
    absl::Time last_line_at = absl::InfinitePast();
  };
  std::map<std::tuple<std::string, int32_t, int32_t, int32_t>, LogLines> logs ABSL_GUARDED_BY(mu);
  // Runs whose logs the retention period removed, and when.
  std::map<std::string, absl::Time> log_expirations ABSL_GUARDED_BY(mu);

  struct RecordedResponse {
    IdempotentResponse response;
    absl::Time recorded_at;
  };
  std::map<std::pair<std::string, std::string>, RecordedResponse> idempotency ABSL_GUARDED_BY(mu);

  // Leader locks by role: the instance that holds it, in the session of one store (as over
  // PostgreSQL, where the lock belongs to a connection of the process that took it).
  struct LeaderHold {
    std::string instance;
    const void* store = nullptr;
  };
  std::map<std::string, LeaderHold, std::less<>> leaders ABSL_GUARDED_BY(mu);
  // Each role's current term (leader_terms): up by one each time an instance takes the role.
  std::map<std::string, int64_t, std::less<>> leader_epochs ABSL_GUARDED_BY(mu);

  void SetUnavailable(bool value) {
    absl::MutexLock lock(&mu);
    unavailable = value;
  }
  // Ends the session in which `instance` contends for `role`, as when that connection to
  // PostgreSQL breaks: the role is free if it held it.
  void EndLeaderSession(std::string_view role, std::string_view instance) {
    absl::MutexLock lock(&mu);
    auto it = leaders.find(role);
    if (it != leaders.end() && it->second.instance == instance) leaders.erase(it);
  }
  // OK for an unfenced write or one whose term is current (see WriteFence).
  absl::Status CheckFence(const std::optional<WriteFence>& fence) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (!fence) return absl::OkStatus();
    auto it = leader_epochs.find(fence->role);
    if (it == leader_epochs.end()) return StaleTermError(*fence, std::nullopt);
    if (it->second != fence->epoch) return StaleTermError(*fence, it->second);
    return absl::OkStatus();
  }
  // KeyTakenError when `key` was recorded already: check before a write's effect.
  absl::Status CheckKeyFree(const IdempotencyKey& key) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (idempotency.count({key.scope, key.key})) return KeyTakenError(key.key);
    return absl::OkStatus();
  }
  // Records a response whose key CheckKeyFree found free under the same hold of `mu`.
  void RecordResponse(const IdempotencyKey& key, std::string response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    idempotency[{key.scope, key.key}] =
        RecordedResponse{{key.request_fingerprint, std::move(response)}, key.recorded_at};
  }
  absl::Status CheckAvailable() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return unavailable ? absl::UnavailableError("database unavailable (simulated)")
                       : absl::OkStatus();
  }
};

// Stores over the given database (MakeMemoryStores() makes a fresh one).
Stores MakeMemoryStores(std::shared_ptr<MemoryDatabase> db);

std::shared_ptr<RunStore> MakeMemoryRunStore(std::shared_ptr<MemoryDatabase> db);
std::shared_ptr<NodeStore> MakeMemoryNodeStore(std::shared_ptr<MemoryDatabase> db);
std::shared_ptr<NodeEventStore> MakeMemoryNodeEventStore(std::shared_ptr<MemoryDatabase> db);
std::shared_ptr<HealthStore> MakeMemoryHealthStore(std::shared_ptr<MemoryDatabase> db);
std::shared_ptr<ApiKeyStore> MakeMemoryApiKeyStore(std::shared_ptr<MemoryDatabase> db);
std::shared_ptr<JoinTokenStore> MakeMemoryJoinTokenStore(std::shared_ptr<MemoryDatabase> db);
std::shared_ptr<SecretStore> MakeMemorySecretStore(std::shared_ptr<MemoryDatabase> db);
std::shared_ptr<NotificationStore> MakeMemoryNotificationStore(std::shared_ptr<MemoryDatabase> db);
std::shared_ptr<TeamStore> MakeMemoryTeamStore(std::shared_ptr<MemoryDatabase> db);
std::shared_ptr<UsageStore> MakeMemoryUsageStore(std::shared_ptr<MemoryDatabase> db);
std::shared_ptr<AuditStore> MakeMemoryAuditStore(std::shared_ptr<MemoryDatabase> db);
std::shared_ptr<IdempotencyStore> MakeMemoryIdempotencyStore(std::shared_ptr<MemoryDatabase> db);
std::shared_ptr<LogStore> MakeMemoryLogStore(std::shared_ptr<MemoryDatabase> db);
std::shared_ptr<LeaderLockStore> MakeMemoryLeaderLockStore(std::shared_ptr<MemoryDatabase> db);

}  // namespace tessera::store
