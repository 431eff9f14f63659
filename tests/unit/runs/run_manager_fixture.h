#pragma once
// The run service's roles (MakeRuns) for its tests: over the in-memory stores, a fake clock and
// fit check, with users, an admin and the system, and a run submitted and recorded in one call.

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "services/runs/runs.h"
#include "services/store/memory/memory_database.h"

namespace tessera::runs::testing {

class FakeFit final : public FitChecker {
 public:
  absl::Status result = absl::OkStatus();
  std::string team;  // answered when the result is OK
  std::string asked_user;
  bool asked_preemptible = false;
  absl::StatusOr<std::string> CheckFit(const v1::ComputeSpec&, const std::string& user,
                                       bool preemptible) override {
    asked_user = user;
    asked_preemptible = preemptible;
    if (!result.ok()) return result;
    return team;
  }
};

class FakeLogDeleter final : public LogDeleter {
 public:
  absl::Status result = absl::OkStatus();
  std::vector<std::string> deleted;
  absl::Status DeleteRunLogs(const std::string& run_id) override {
    deleted.push_back(run_id);
    return result;
  }
};

struct Fixture {
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  store::Stores stores = store::MakeMemoryStores();
  std::shared_ptr<FakeFit> fit = std::make_shared<FakeFit>();
  std::shared_ptr<FakeLogDeleter> logs = std::make_shared<FakeLogDeleter>();
  std::shared_ptr<IdempotentCalls> idem =
      std::make_shared<IdempotentCalls>(stores.idempotency, clock);
  metrics::Registry registry;
  // Runs without an image run on the host here (the policy has its own test).
  Runs roles = Make(RunManagerOptions{.allow_host_image = true}, &registry);
  RunManager& manager = *roles.manager;
  RunReports& reports = *roles.reports;
  RunUpkeep& upkeep = *roles.upkeep;
  auth::Principal alice{"alice", v1::ROLE_USER};
  auth::Principal bob{"bob", v1::ROLE_USER};
  auth::Principal admin{"root", v1::ROLE_ADMIN};
  auth::Principal system{"tessera", v1::ROLE_SYSTEM};

  // Another set of roles over the same stores, clock, fit check and log service.
  Runs Make(RunManagerOptions options, metrics::Registry* metrics = nullptr,
            std::shared_ptr<store::SecretStore> secrets = nullptr,
            std::shared_ptr<store::RunStore> runs = nullptr) {
    return MakeRuns(RunsDependencies{.runs = runs ? runs : stores.runs,
                                     .idem = idem,
                                     .fit = fit,
                                     .clock = clock,
                                     .logs = logs,
                                     .random = std::make_shared<SeededRandom>(42),
                                     .options = std::move(options),
                                     .registry = metrics,
                                     .secrets = std::move(secrets)});
  }

  v1::Run Submit(const auth::Principal& who, const std::string& name, const std::string& key = "") {
    v1::SubmitRunRequest req;
    req.set_idempotency_key(key);
    req.mutable_spec()->set_name(name);
    req.mutable_spec()->set_command("echo hi");
    req.mutable_spec()->mutable_compute()->set_gpus(8);
    v1::SubmitRunResponse resp;
    REQUIRE(manager.SubmitRun(who, req, &resp).ok());
    return resp.run();
  }
  v1::Run Record(const v1::Run& run, int index, v1::RunStatus status,
                 v1::AttemptEndReason reason = v1::ATTEMPT_END_REASON_UNSPECIFIED) {
    v1::RecordAttemptRequest req;
    req.mutable_attempt()->set_run_id(run.id());
    req.mutable_attempt()->set_resumption_index(index);
    req.mutable_attempt()->set_status(status);
    req.mutable_attempt()->set_end_reason(reason);
    v1::RecordAttemptResponse resp;
    auto st = reports.RecordAttempt(system, req, &resp);
    REQUIRE(st.ok());
    return resp.run();
  }
};

}  // namespace tessera::runs::testing
