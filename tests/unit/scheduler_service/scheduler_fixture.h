#pragma once
// The scheduler's roles wired together (MakeScheduler) over memory stores, a fake clock and the
// run manager called in-process: for tests of what they do together.

#include <atomic>
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/service/scheduler.h"
#include "services/runs/runs.h"
#include "services/store/memory/memory_database.h"

namespace tessera::scheduler {
// Named, not anonymous: the test files that derive their fixtures from it keep theirs in
// namespaces of their own (docs/style.md), and a base from an anonymous namespace is refused.
namespace scheduler_fixture {

const auth::Principal kSystem{"tessera", v1::ROLE_SYSTEM};

class AlwaysFits final : public runs::FitChecker {
 public:
  absl::StatusOr<std::string> CheckFit(const v1::ComputeSpec&, const std::string&, bool) override {
    return std::string();
  }
};

// Set while "the database is away": the scheduler's node store and the run manager it calls
// answer UNAVAILABLE, as they do when PostgreSQL is stopped.
struct Outage {
  bool down = false;
  // Only the run manager is away (its calls fail; the node store answers).
  bool runs_down = false;
  // The run manager refuses to record attempts (an error other than UNAVAILABLE).
  bool refuse_records = false;
  absl::Status Check() const {
    return down ? absl::UnavailableError("the database is away (test outage)") : absl::OkStatus();
  }
  absl::Status CheckRuns() const {
    return runs_down ? absl::UnavailableError("the run manager is away (test outage)") : Check();
  }
};

class OutageNodeStore final : public store::NodeStore {
 public:
  OutageNodeStore(std::shared_ptr<store::NodeStore> inner, std::shared_ptr<Outage> outage)
      : inner_(std::move(inner)), outage_(std::move(outage)) {}
  absl::StatusOr<v1::Node> CreateNode(const v1::Node& node,
                                      const std::optional<store::WriteFence>& fence) override {
    if (auto st = outage_->Check(); !st.ok()) return st;
    return inner_->CreateNode(node, fence);
  }
  absl::StatusOr<v1::Node> GetNode(std::string_view name) override {
    if (auto st = outage_->Check(); !st.ok()) return st;
    return inner_->GetNode(name);
  }
  absl::StatusOr<std::vector<v1::Node>> ListNodes(const v1::NodeFilter& filter) override {
    if (auto st = outage_->Check(); !st.ok()) return st;
    ++list_reads;
    return inner_->ListNodes(filter);
  }
  absl::StatusOr<v1::Node> UpdateNode(const v1::Node& node, int64_t expected_version,
                                      const std::vector<v1::NodeEvent>& events,
                                      const std::optional<store::WriteFence>& fence) override {
    if (auto st = outage_->Check(); !st.ok()) return st;
    return inner_->UpdateNode(node, expected_version, events, fence);
  }
  absl::Status RecordHeartbeats(const std::vector<store::HeartbeatSummary>& beats) override {
    if (auto st = outage_->Check(); !st.ok()) return st;
    ++heartbeat_writes;
    return inner_->RecordHeartbeats(beats);
  }
  absl::Status DeleteNode(std::string_view name) override {
    if (auto st = outage_->Check(); !st.ok()) return st;
    return inner_->DeleteNode(name);
  }
  std::atomic<int> heartbeat_writes{0};
  std::atomic<int> list_reads{0};

 private:
  std::shared_ptr<store::NodeStore> inner_;
  std::shared_ptr<Outage> outage_;
};

// The scheduler's RunsClient calling the run service's roles in-process.
class DirectRuns final : public RunsClient {
 public:
  // `secrets`: what RunSecrets answers for every run (null: none).
  DirectRuns(const runs::Runs& roles, std::shared_ptr<Outage> outage,
             std::shared_ptr<const std::vector<v1::SecretValue>> secrets = nullptr)
      : m_(*roles.manager),
        reports_(*roles.reports),
        outage_(std::move(outage)),
        secrets_(std::move(secrets)) {}
  absl::StatusOr<std::vector<v1::Run>> ListRuns(
      const std::vector<v1::RunStatus>& statuses) override {
    if (auto st = outage_->CheckRuns(); !st.ok()) return st;
    v1::ListRunsRequest req;
    for (auto s : statuses) req.mutable_filter()->add_statuses(s);
    v1::ListRunsResponse resp;
    if (auto st = m_.ListRuns(kSystem, req, &resp); !st.ok()) return st;
    return std::vector<v1::Run>(resp.runs().begin(), resp.runs().end());
  }
  absl::StatusOr<v1::Run> RecordAttempt(const v1::Attempt& attempt) override {
    if (auto st = outage_->CheckRuns(); !st.ok()) return st;
    if (outage_->refuse_records) return absl::InternalError("refused (test)");
    v1::RecordAttemptRequest req;
    *req.mutable_attempt() = attempt;
    v1::RecordAttemptResponse resp;
    if (auto st = reports_.RecordAttempt(kSystem, req, &resp); !st.ok()) return st;
    return resp.run();
  }
  absl::Status ReportProgress(const v1::ReportProgressRequest& req) override {
    if (auto st = outage_->CheckRuns(); !st.ok()) return st;
    v1::ReportProgressResponse resp;
    return reports_.ReportProgress(kSystem, req, &resp);
  }
  absl::StatusOr<std::vector<v1::SecretValue>> RunSecrets(const std::string&) override {
    if (auto st = outage_->CheckRuns(); !st.ok()) return st;
    return secrets_ ? *secrets_ : std::vector<v1::SecretValue>{};
  }
  absl::Status RecordNote(const std::string& run_id, int resumption_index,
                          const std::string& note) override {
    if (auto st = outage_->CheckRuns(); !st.ok()) return st;
    v1::RecordAttemptRequest req;
    req.mutable_attempt()->set_run_id(run_id);
    req.mutable_attempt()->set_resumption_index(resumption_index);
    req.set_note(note);
    v1::RecordAttemptResponse resp;
    return reports_.RecordAttempt(kSystem, req, &resp);
  }

 private:
  runs::RunManager& m_;
  runs::RunReports& reports_;
  std::shared_ptr<Outage> outage_;
  std::shared_ptr<const std::vector<v1::SecretValue>> secrets_;
};

struct Fixture {
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  store::Stores stores = store::MakeMemoryStores();
  std::shared_ptr<Outage> outage = std::make_shared<Outage>();
  runs::Runs run_roles = runs::MakeRuns(
      runs::RunsDependencies{.runs = stores.runs,
                             .idem = std::make_shared<IdempotentCalls>(stores.idempotency, clock),
                             .fit = std::make_shared<AlwaysFits>(),
                             .clock = clock,
                             .options = runs::RunManagerOptions{.allow_host_image = true}});
  runs::RunManager& manager = *run_roles.manager;
  std::shared_ptr<WorkerRegistry> workers = std::make_shared<WorkerRegistry>();
  std::vector<std::pair<std::string, v1::ControlMessage>> sent;
  std::shared_ptr<IdempotentCalls> idem =
      std::make_shared<IdempotentCalls>(stores.idempotency, clock);
  std::shared_ptr<OutageNodeStore> node_store =
      std::make_shared<OutageNodeStore>(stores.nodes, outage);
  // The run owners' secrets, as the run manager would give them with a start.
  std::shared_ptr<std::vector<v1::SecretValue>> run_secrets =
      std::make_shared<std::vector<v1::SecretValue>>();
  SchedulerConfig config{.lease = absl::Seconds(3), .heartbeat_interval = absl::Milliseconds(500)};
  std::unique_ptr<Scheduler> core = NewCore();

  // `changes`: the change feed the cycle keeps its copy of the nodes by (null: none).
  // `registry`: where the leader's cluster metrics go (null: none).
  std::unique_ptr<Scheduler> NewCore(std::shared_ptr<store::ChangeFeed> changes = nullptr,
                                     metrics::Registry* registry = nullptr) {
    return std::make_unique<Scheduler>(
        MakeScheduler(node_store, std::make_shared<DirectRuns>(run_roles, outage, run_secrets),
                      workers, idem, clock, config, nullptr, nullptr, std::move(changes), registry,
                      nullptr, nullptr, stores.join_tokens));
  }
  void Register(const std::string& name) {
    workers->Attach(name, [this, name](const v1::ControlMessage& m) {
      sent.emplace_back(name, m);
      return true;
    });
    v1::RegisterWorker reg;
    reg.mutable_node()->set_name(name);
    reg.mutable_node()->set_cluster("local");
    reg.mutable_node()->set_gpu_type("sim");
    reg.mutable_node()->set_gpu_count(8);
    REQUIRE(core->sessions->RegisterWorker(reg).ok());
  }
  v1::Run Submit(int gpus, bool retry) {
    v1::SubmitRunRequest req;
    req.mutable_spec()->set_name("r");
    req.mutable_spec()->set_command("x");
    req.mutable_spec()->mutable_compute()->set_gpus(gpus);
    req.mutable_spec()->mutable_scheduling()->set_retry_on_system_failure(retry);
    v1::SubmitRunResponse resp;
    REQUIRE(manager.SubmitRun({"alice", v1::ROLE_USER}, req, &resp).ok());
    return resp.run();
  }
  v1::Run Get(const v1::Run& run) { return *stores.runs->GetRunById(run.id()); }
  // Registers `node` and places a run of 8 GPUs, without retries, on it: the run is STARTING
  // and its StartAttempt sent.
  v1::Run PlaceOne(const std::string& node) {
    Register(node);
    v1::Run run = Submit(8, false);
    REQUIRE(core->cycle->RunCycle().ok());
    REQUIRE(core->cycle->RunCycle().ok());
    REQUIRE(Get(run).status() == v1::RUN_STATUS_STARTING);
    return run;
  }
  v1::Heartbeat Beat(const v1::Run& run, bool running, int exit_code = 0) {
    v1::Heartbeat hb;
    auto* a = hb.add_attempts();
    a->set_run_id(run.id());
    a->set_resumption_index(0);
    if (running) {
      a->add_running_ranks(0);
    } else {
      auto* e = a->add_exited_ranks();
      e->set_rank(0);
      e->set_exit_code(exit_code);
    }
    return hb;
  }
};

}  // namespace scheduler_fixture
using namespace scheduler_fixture;  // NOLINT: the tests name its parts unqualified
}  // namespace tessera::scheduler
