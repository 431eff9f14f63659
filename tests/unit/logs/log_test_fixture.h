#pragma once
// A log handler over the memory store, a fake clock and a fake run manager, for unit tests.

#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "base/timestamps.h"
#include "proto/policy/packed_log_lines.h"
#include "services/logs/log_handler.h"
#include "services/store/memory/memory_database.h"

namespace tessera::logs::testing {

class FakeRuns final : public RunLookup {
 public:
  absl::StatusOr<v1::RunDescription> DescribeRun(const std::string& name) override {
    absl::MutexLock lock(&mu_);
    ++calls_;
    auto it = runs_.find(name);
    if (it == runs_.end()) return absl::NotFoundError("run " + name + " not found");
    return it->second;
  }
  absl::StatusOr<v1::RunDescription> DescribeRunById(const std::string& run_id) override {
    absl::MutexLock lock(&mu_);
    ++calls_;
    for (const auto& [name, d] : runs_) {
      if (d.run().id() == run_id) return d;
    }
    return absl::NotFoundError("run " + run_id + " not found");
  }
  void Set(const v1::RunDescription& d) {
    absl::MutexLock lock(&mu_);
    runs_[d.run().name()] = d;
  }
  int calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  v1::RunDescription Get(const std::string& name) {
    absl::MutexLock lock(&mu_);
    return runs_.at(name);
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, v1::RunDescription> runs_ ABSL_GUARDED_BY(mu_);
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
};

inline constexpr auto kOut = v1::LOG_STREAM_STDOUT;
inline constexpr auto kErr = v1::LOG_STREAM_STDERR;

struct Fixture {
  explicit Fixture(LogHandlerOptions options = {})
      : handler(stores.logs, runs, clock, options, registry) {}

  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  store::Stores stores = store::MakeMemoryStores();
  std::shared_ptr<FakeRuns> runs = std::make_shared<FakeRuns>();
  metrics::Registry registry;
  LogHandler handler;
  auth::Principal worker{"worker", v1::ROLE_SYSTEM};
  auth::Principal alice{"alice", v1::ROLE_USER};
  auth::Principal bob{"bob", v1::ROLE_USER};
  auth::Principal admin{"root", v1::ROLE_ADMIN};

  // A run of alice's ("id-NAME") whose attempts 0..latest exist.
  v1::RunDescription AddRun(const std::string& name, v1::RunStatus status, int latest = 0) {
    v1::RunDescription d;
    d.mutable_run()->set_id("id-" + name);
    d.mutable_run()->set_name(name);
    d.mutable_run()->set_user("alice");
    d.mutable_run()->set_status(status);
    d.mutable_run()->set_resumption_index(latest);
    for (int i = 0; i <= latest; ++i) {
      auto* a = d.add_attempts();
      a->set_run_id("id-" + name);
      a->set_resumption_index(i);
      a->set_first_failed_rank(-1);
    }
    runs->Set(d);
    return d;
  }

  v1::LogLine Line(int rank, v1::LogStream stream, int64_t seq, int64_t millis,
                   const std::string& text, int resumption = 0, const std::string& run = "r") {
    v1::LogLine l;
    l.set_run_id("id-" + run);
    l.set_resumption_index(resumption);
    l.set_rank(rank);
    l.set_node_rank(rank / 2);
    l.set_stream(stream);
    l.set_sequence(seq);
    *l.mutable_time() =
        ToProtoTime(absl::FromUnixSeconds(1'700'000'000) + absl::Milliseconds(millis));
    l.set_text(text);
    return l;
  }

  absl::StatusOr<v1::LogAck> Push(const std::vector<v1::LogLine>& lines,
                                  const std::string& key = "b",
                                  const auth::Principal* who = nullptr) {
    v1::LogBatch batch;
    batch.set_idempotency_key(key);
    batch.set_node_name(who && who->is_node() ? who->node : "node-x");
    for (const auto& l : lines) *batch.add_lines() = l;
    v1::LogAck ack;
    auto st = handler.PushBatch(who ? *who : worker, batch, &ack);
    if (!st.ok()) return st;
    return ack;
  }

  // The lines of one stream packed, as a worker packs them.
  static v1::PackedLogLines Packed(const std::vector<v1::LogLine>& lines) {
    v1::PackedLogLines g;
    CopyStreamFields(lines.front(), g);
    for (const auto& l : lines) PackLine(l, g);
    return g;
  }

  // A batch of streams' lines, each stream packed (as a worker sends them once the log service
  // said it takes them).
  absl::StatusOr<v1::LogAck> PushPacked(const std::vector<std::vector<v1::LogLine>>& streams,
                                        const std::string& key = "p",
                                        const auth::Principal* who = nullptr) {
    v1::LogBatch batch;
    batch.set_idempotency_key(key);
    batch.set_node_name(who && who->is_node() ? who->node : "node-x");
    for (const auto& lines : streams) *batch.add_packed() = Packed(lines);
    v1::LogAck ack;
    auto st = handler.PushBatch(who ? *who : worker, batch, &ack);
    if (!st.ok()) return st;
    return ack;
  }

  absl::Status Get(const v1::GetLogsRequest& req, std::vector<std::string>* texts,
                   const auth::Principal* who = nullptr) {
    return handler.GetLogs(
        who ? *who : alice, req,
        [&](const v1::LogLine& l) {
          texts->push_back(l.text());
          return true;
        },
        [] { return false; });
  }

  std::vector<std::string> Texts(const v1::GetLogsRequest& req) {
    std::vector<std::string> out;
    auto st = Get(req, &out);
    INFO(st.ToString());
    REQUIRE(st.ok());
    return out;
  }
};

inline v1::GetLogsRequest Req(const std::string& run = "r") {
  v1::GetLogsRequest r;
  r.set_run_name(run);
  return r;
}

using Texts = std::vector<std::string>;

}  // namespace tessera::logs::testing
