#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/timestamps.h"
#include "services/store/filters.h"
#include "services/store/memory/memory_database.h"

namespace tessera::store {
namespace {

v1::NodeEvent AppendNodeEventLocked(MemoryDatabase& db, const v1::NodeEvent& event)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(db.mu) {
  v1::NodeEvent stored = event;
  stored.set_id(db.next_node_event_id++);
  db.node_events.push_back(stored);
  db.changes->Bump(ChangeTopic::kNodeEvents);
  return stored;
}

class MemoryNodeStore final : public NodeStore {
 public:
  explicit MemoryNodeStore(std::shared_ptr<MemoryDatabase> db) : db_(std::move(db)) {}

  absl::StatusOr<v1::Node> CreateNode(const v1::Node& node,
                                      const std::optional<WriteFence>& fence) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    if (auto st = db_->CheckFence(fence); !st.ok()) return st;
    if (db_->nodes.count(node.name())) {
      return absl::AlreadyExistsError(absl::StrCat("node ", node.name(), " already exists"));
    }
    v1::Node stored = node;
    stored.set_version(1);
    db_->nodes[node.name()] = stored;
    db_->changes->Bump(ChangeTopic::kNodes);
    return stored;
  }

  absl::StatusOr<v1::Node> GetNode(std::string_view name) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    auto it = db_->nodes.find(std::string(name));
    if (it == db_->nodes.end())
      return absl::NotFoundError(absl::StrCat("node ", std::string(name), " not found"));
    return it->second;
  }

  absl::StatusOr<std::vector<v1::Node>> ListNodes(const v1::NodeFilter& filter) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    std::vector<v1::Node> out;
    for (const auto& [name, node] : db_->nodes) {  // std::map: sorted by name
      if (!NodeMatches(node, filter)) continue;
      out.push_back(node);
      if (filter.limit() > 0 && static_cast<int>(out.size()) >= filter.limit()) break;
    }
    return out;
  }

  absl::StatusOr<v1::Node> UpdateNode(const v1::Node& node, int64_t expected_version,
                                      const std::vector<v1::NodeEvent>& events,
                                      const std::optional<WriteFence>& fence) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    if (auto st = db_->CheckFence(fence); !st.ok()) return st;
    auto it = db_->nodes.find(node.name());
    if (it == db_->nodes.end()) {
      return absl::NotFoundError(absl::StrCat("node ", node.name(), " not found"));
    }
    if (it->second.version() != expected_version) {
      return absl::AbortedError(
          absl::StrCat("node ", node.name(), " changed concurrently (version ",
                       it->second.version(), ", expected ", expected_version, ")"));
    }
    v1::Node stored = node;
    stored.set_version(expected_version + 1);
    // A heartbeat summary stored meanwhile is kept (RecordHeartbeats: the later time wins).
    if (it->second.has_last_heartbeat_at()) {
      KeepLaterHeartbeat(stored, FromProtoTime(it->second.last_heartbeat_at()),
                         FromProtoTime(it->second.lease_expires_at()));
    }
    it->second = stored;
    db_->changes->Bump(ChangeTopic::kNodes);
    for (const auto& e : events) AppendNodeEventLocked(*db_, e);
    return stored;
  }

  absl::Status RecordHeartbeats(const std::vector<HeartbeatSummary>& beats) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    for (const auto& b : beats) {
      auto it = db_->nodes.find(b.node);
      if (it != db_->nodes.end()) KeepLaterHeartbeat(it->second, b.last_heartbeat, b.lease_expires);
    }
    return absl::OkStatus();
  }

  absl::Status DeleteNode(std::string_view name) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    if (db_->nodes.erase(std::string(name)) == 0) {
      return absl::NotFoundError(absl::StrCat("node ", std::string(name), " not found"));
    }
    db_->changes->Bump(ChangeTopic::kNodes);
    return absl::OkStatus();
  }

 private:
  std::shared_ptr<MemoryDatabase> db_;
};

class MemoryNodeEventStore final : public NodeEventStore {
 public:
  explicit MemoryNodeEventStore(std::shared_ptr<MemoryDatabase> db) : db_(std::move(db)) {}

  absl::StatusOr<v1::NodeEvent> AppendNodeEvent(const v1::NodeEvent& event) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    return AppendNodeEventLocked(*db_, event);
  }

  absl::StatusOr<std::vector<v1::NodeEvent>> ListNodeEvents(
      const v1::NodeEventFilter& filter) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    std::vector<v1::NodeEvent> out;
    for (const auto& e : db_->node_events) {
      if (!NodeEventMatches(e, filter)) continue;
      out.push_back(e);
      if (filter.limit() > 0 && static_cast<int>(out.size()) >= filter.limit()) break;
    }
    return out;
  }

  absl::StatusOr<int64_t> DeleteNodeEventsBefore(absl::Time before, int limit) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    int64_t deleted = 0;
    std::erase_if(db_->node_events, [&](const v1::NodeEvent& e) {
      if ((limit > 0 && deleted >= limit) || FromProtoTime(e.time()) >= before) return false;
      ++deleted;
      return true;
    });
    return deleted;
  }

 private:
  std::shared_ptr<MemoryDatabase> db_;
};

}  // namespace

std::shared_ptr<NodeStore> MakeMemoryNodeStore(std::shared_ptr<MemoryDatabase> db) {
  return std::make_shared<MemoryNodeStore>(std::move(db));
}

std::shared_ptr<NodeEventStore> MakeMemoryNodeEventStore(std::shared_ptr<MemoryDatabase> db) {
  return std::make_shared<MemoryNodeEventStore>(std::move(db));
}

}  // namespace tessera::store
