// Rank output in memory.
#include <algorithm>

#include "base/timestamps.h"
#include "proto/policy/packed_log_lines.h"
#include "services/store/filters.h"
#include "services/store/log_precision.h"
#include "services/store/memory/memory_database.h"

namespace tessera::store {
namespace {

using Key = std::tuple<std::string, int32_t, int32_t, int32_t>;

Key KeyOf(const v1::LogLine& l) {
  return {l.run_id(), l.resumption_index(), l.rank(), static_cast<int32_t>(l.stream())};
}

bool Matches(const LogQuery& q, const v1::LogLine& l) {
  return (!q.rank || l.rank() == *q.rank) && (!q.node_rank || l.node_rank() == *q.node_rank);
}

class MemoryLogStore final : public LogStore {
 public:
  explicit MemoryLogStore(std::shared_ptr<MemoryDatabase> db) : db_(std::move(db)) {}

  std::unique_ptr<LogSubscription> SubscribeLogs(const std::string& run_id,
                                                 int32_t resumption_index) override {
    return db_->log_fanout.Subscribe(run_id, resumption_index);
  }

  absl::StatusOr<LogAppendResult> AppendLogBatch(LogBatchToStore batch) override {
    // Packed groups join the plain lines (after them): this store keeps lines one by one. Its
    // followers get them packed, as the PostgreSQL store's do.
    std::vector<v1::LogLine> lines = batch.lines;
    for (const auto& group : batch.packed) {
      if (auto st = UnpackLines(group, lines); !st.ok()) return st;
    }
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    LogAppendResult result;
    std::vector<Key> order;
    for (const auto& line : lines) {
      const Key key = KeyOf(line);
      auto [it, fresh] = db_->logs.try_emplace(key);
      MemoryDatabase::LogLines& s = it->second;
      if (fresh) {
        s.info.run_id = line.run_id();
        s.info.resumption_index = line.resumption_index();
        s.info.rank = line.rank();
        s.info.stream = line.stream();
      }
      if (std::find(order.begin(), order.end(), key) == order.end()) order.push_back(key);
      s.info.node_rank = line.node_rank();
      s.info.node_name = line.node_name();
      if (!Covered(s, line.sequence()) && s.lines.emplace(line.sequence(), AsStored(line)).second) {
        ++result.inserted;
        s.bytes += static_cast<int64_t>(line.text().size());
        s.last_line_at = std::max(s.last_line_at, FromProtoTime(line.time()));
      }
      s.info.max_sequence = std::max(s.info.max_sequence, line.sequence());
      while (Covered(s, s.info.durable_sequence + 1)) {
        s.info.durable_sequence = s.lines.lower_bound(s.info.durable_sequence + 1)->first;
      }
    }
    for (const auto& key : order) result.watermarks.push_back(db_->logs[key].info);
    db_->log_fanout.Publish(std::move(batch));
    if (result.inserted > 0) db_->changes->Bump(ChangeTopic::kLogs);
    return result;
  }

  absl::StatusOr<std::vector<v1::LogLine>> ReadLogs(const LogQuery& q) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    std::vector<v1::LogLine> out;
    for (const auto& [key, s] : Attempt(q)) {
      const auto from = q.from_sequence.find({s->info.rank, s->info.stream});
      int taken = 0;
      for (auto it = s->lines.lower_bound(from == q.from_sequence.end() ? 0 : from->second);
           it != s->lines.end(); ++it) {
        if (q.limit_per_stream > 0 && taken == q.limit_per_stream) break;
        if (!Matches(q, it->second)) continue;
        out.push_back(it->second);
        ++taken;
      }
    }
    std::sort(out.begin(), out.end(), LogLineBefore);
    return out;
  }

  absl::StatusOr<std::vector<v1::LogLine>> TailLogs(const LogQuery& q, int n) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    std::vector<v1::LogLine> out;
    for (const auto& [key, s] : Attempt(q)) {
      for (const auto& [seq, line] : s->lines) {
        if (Matches(q, line)) out.push_back(line);
      }
    }
    std::sort(out.begin(), out.end(), LogLineBefore);
    if (n >= 0 && out.size() > static_cast<size_t>(n)) out.erase(out.begin(), out.end() - n);
    return out;
  }

  absl::StatusOr<std::vector<LogStreamInfo>> ListLogStreams(
      const std::string& run_id, std::optional<int32_t> resumption_index) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    std::vector<LogStreamInfo> out;
    for (auto it = db_->logs.lower_bound({run_id, INT32_MIN, INT32_MIN, INT32_MIN});
         it != db_->logs.end() && std::get<0>(it->first) == run_id; ++it) {
      if (!resumption_index || it->second.info.resumption_index == *resumption_index) {
        out.push_back(it->second.info);
      }
    }
    return out;
  }

  absl::StatusOr<std::map<LogStreamKey, int64_t>> SequencesSince(const std::string& run_id,
                                                                 int32_t resumption_index,
                                                                 absl::Time since) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    std::map<LogStreamKey, int64_t> out;
    for (auto it = db_->logs.lower_bound({run_id, resumption_index, INT32_MIN, INT32_MIN});
         it != db_->logs.end() && std::get<0>(it->first) == run_id &&
         std::get<1>(it->first) == resumption_index;
         ++it) {
      int64_t first = it->second.info.max_sequence + 1;
      for (const auto& [seq, line] : it->second.lines) {
        if (FromProtoTime(line.time()) >= since) {
          first = FirstSequence(line);
          break;
        }
      }
      out[{std::get<2>(it->first), std::get<3>(it->first)}] = first;
    }
    return out;
  }

  absl::Status DeleteRunLogs(const std::string& run_id) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    EraseRun(run_id);
    db_->log_expirations.erase(run_id);
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> RunLogBytes(const std::string& run_id) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    int64_t bytes = 0;
    for (auto it = db_->logs.lower_bound({run_id, INT32_MIN, INT32_MIN, INT32_MIN});
         it != db_->logs.end() && std::get<0>(it->first) == run_id; ++it) {
      bytes += it->second.bytes;
    }
    return bytes;
  }

  absl::StatusOr<std::vector<std::string>> ListRunsIdleSince(absl::Time before,
                                                             int limit) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    std::map<std::string, absl::Time> newest;
    for (const auto& [key, s] : db_->logs) {
      auto [it, fresh] = newest.try_emplace(std::get<0>(key), s.last_line_at);
      if (!fresh) it->second = std::max(it->second, s.last_line_at);
    }
    std::vector<std::pair<absl::Time, std::string>> idle;
    for (const auto& [run, t] : newest) {
      if (t < before) idle.emplace_back(t, run);
    }
    std::sort(idle.begin(), idle.end());
    std::vector<std::string> out;
    for (const auto& [t, run] : idle) {
      if (static_cast<int>(out.size()) >= limit) break;
      out.push_back(run);
    }
    return out;
  }

  absl::Status ExpireRunLogs(const std::string& run_id, absl::Time at) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    EraseRun(run_id);
    db_->log_expirations.emplace(run_id, at);  // the first expiry is when they went
    return absl::OkStatus();
  }

  absl::StatusOr<std::optional<absl::Time>> LogsExpiredAt(const std::string& run_id) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    auto it = db_->log_expirations.find(run_id);
    if (it == db_->log_expirations.end()) return std::nullopt;
    return it->second;
  }

 private:
  void EraseRun(const std::string& run_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_->mu) {
    auto it = db_->logs.lower_bound({run_id, INT32_MIN, INT32_MIN, INT32_MIN});
    while (it != db_->logs.end() && std::get<0>(it->first) == run_id) it = db_->logs.erase(it);
  }

  // Whether `seq` is stored: a line of its own, or within a marker of dropped lines.
  static bool Covered(const MemoryDatabase::LogLines& s, int64_t seq) {
    auto it = s.lines.lower_bound(seq);
    return it != s.lines.end() && FirstSequence(it->second) <= seq;
  }

  // The streams of the query's attempt.
  std::vector<std::pair<Key, const MemoryDatabase::LogLines*>> Attempt(const LogQuery& q)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_->mu) {
    std::vector<std::pair<Key, const MemoryDatabase::LogLines*>> out;
    for (auto it = db_->logs.lower_bound({q.run_id, q.resumption_index, INT32_MIN, INT32_MIN});
         it != db_->logs.end() && std::get<0>(it->first) == q.run_id &&
         std::get<1>(it->first) == q.resumption_index;
         ++it) {
      if (q.rank && it->second.info.rank != *q.rank) continue;
      out.emplace_back(it->first, &it->second);
    }
    return out;
  }

  std::shared_ptr<MemoryDatabase> db_;
};

}  // namespace

std::shared_ptr<LogStore> MakeMemoryLogStore(std::shared_ptr<MemoryDatabase> db) {
  return std::make_shared<MemoryLogStore>(std::move(db));
}

}  // namespace tessera::store
