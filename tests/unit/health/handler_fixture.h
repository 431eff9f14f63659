#pragma once
// The health API's handler against fakes of the scheduler, cordon service and run manager, with
// a fake clock: what health_handler_test and health_confirmation_test share.

#include <atomic>
#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "healthcheck/health.h"
#include "services/store/stores.h"
#include "tests/unit/health/health_fakes.h"

namespace tessera::health::handler_test {
using testing::FakeCordon;
using testing::FakeRuns;
using testing::FakeScheduler;

const auth::Principal kAdmin{"ops", v1::ROLE_ADMIN};
const auth::Principal kUser{"alice", v1::ROLE_USER};
const auth::Principal kSystem{"tessera-worker", v1::ROLE_SYSTEM};

// 7919, 2 * 7919, 3 * 7919 ...: sweep ids and ports a test can predict.
class CountingRandom final : public Random {
 public:
  uint64_t Next() override { return ++counter_ * 7919; }

 private:
  std::atomic<uint64_t> counter_{0};
};

struct Fixture {
  store::Stores stores = store::MakeMemoryStores();
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  std::shared_ptr<FakeScheduler> scheduler = std::make_shared<FakeScheduler>();
  std::shared_ptr<FakeCordon> cordon = std::make_shared<FakeCordon>(*scheduler);
  std::shared_ptr<FakeRuns> runs = std::make_shared<FakeRuns>();
  metrics::Registry registry;
  Health health;
  std::shared_ptr<HealthHandler> handler;

  explicit Fixture(HealthConfig config = {})
      : health(MakeHealth(stores.health, scheduler, cordon, runs,
                          std::make_shared<IdempotentCalls>(stores.idempotency, clock), clock,
                          std::make_shared<CountingRandom>(), config, &registry)),
        handler(health.handler) {}
  v1::Sweep Start(std::vector<std::string> nodes = {}) {
    v1::StartSweepRequest req;
    for (auto& n : nodes) req.add_node_names(n);
    v1::StartSweepResponse resp;
    REQUIRE(handler->StartSweep(kAdmin, req, &resp).ok());
    return resp.sweep();
  }
  v1::Sweep Sweep(const std::string& id) { return *stores.health->GetSweep(id); }
  // A node's compute rate at a step of the sweep (0: the first passes; 1...: confirmation).
  using Rate = std::function<double(const std::string& node, int step)>;
  static Rate Fixed(const std::map<std::string, double>& tflops) {
    return [tflops](const std::string& node, int) {
      auto it = tflops.find(node);
      return it == tflops.end() ? 1.0 : it->second;
    };
  }
  // Answers every dispatched canary of `kind`; `tflops` gives each node's compute rate.
  void Answer(v1::HealthCheckKind kind, const std::map<std::string, double>& tflops = {},
              double busbw = 5.0) {
    Answer(kind, Fixed(tflops), busbw);
  }
  void Answer(v1::HealthCheckKind kind, const Rate& rate, double busbw = 5.0) {
    for (const auto& d : scheduler->Take(kind)) {
      v1::ReportHealthResultRequest req;
      auto* r = req.mutable_result();
      r->set_sweep_id(d.start_canary().sweep_id());
      r->set_node_name(d.node_name());
      r->set_kind(kind);
      *r->mutable_group() = d.start_canary().group();
      r->set_verdict(v1::HEALTH_VERDICT_PASSED);
      r->set_step(d.start_canary().step());
      if (kind == v1::HEALTH_CHECK_KIND_COMPUTE_STRESS) {
        r->set_compute_tflops(rate(d.node_name(), d.start_canary().step()));
      } else {
        auto* s = r->add_samples();
        s->set_payload_bytes(64 << 20);
        s->set_busbw_gbps(busbw);
      }
      v1::ReportHealthResultResponse resp;
      REQUIRE(handler->ReportHealthResult(kSystem, req, &resp).ok());
    }
  }
  // Drives the sweep to its end, every canary answered.
  v1::Sweep RunToEnd(const std::string& id, const std::map<std::string, double>& tflops = {}) {
    return RunToEnd(id, Fixed(tflops));
  }
  v1::Sweep RunToEnd(const std::string& id, const Rate& rate) {
    for (int i = 0; i < 100 && Sweep(id).state() == v1::SWEEP_STATE_RUNNING; ++i) {
      health.Tick();
      Answer(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS, rate);
      Answer(v1::HEALTH_CHECK_KIND_ALLREDUCE);
      clock->Advance(absl::Milliseconds(200));
    }
    return Sweep(id);
  }
};

}  // namespace tessera::health::handler_test
