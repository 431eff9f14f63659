#pragma once
// Makes sweeps: of the nodes asked for (online, each once, in neighbour order), or of every node
// ready for checking. Every sweep of the health API starts here: StartSweep, a hang report, the
// run watch, the schedule, a follow-up, a re-measurement of a drained node.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/clock.h"
#include "base/random.h"
#include "healthcheck/health_clients.h"
#include "services/store/health_store.h"
#include "tessera/v1/health.pb.h"

namespace tessera::health {

// What a sweep is made of and for.
struct SweepRequest {
  v1::SweepTrigger trigger = v1::SWEEP_TRIGGER_ON_DEMAND;
  // The nodes to measure; all ready nodes when empty (online, and schedulable or cordoned by
  // the health API itself).
  std::vector<std::string> nodes{};
  std::string requested_by{};
  // The run the sweep is for (an MFU drop, a straggler, a hang), if any, and the nodes it held
  // when the sweep was made (v1::Sweep.run_nodes).
  std::string run_name{};
  std::vector<std::string> run_nodes{};
  std::string suspect_node{};
  std::string trigger_detail{};
};

class SweepLauncher {
 public:
  SweepLauncher(std::shared_ptr<store::HealthStore> store, std::shared_ptr<SchedulerApi> scheduler,
                std::shared_ptr<Clock> clock, std::shared_ptr<Random> random)
      : store_(std::move(store)),
        scheduler_(std::move(scheduler)),
        clock_(std::move(clock)),
        random_(std::move(random)) {}

  // A sweep as `request` says, RUNNING and not yet dispatched. INVALID_ARGUMENT names a node
  // that is unknown or not online.
  absl::StatusOr<v1::Sweep> CreateSweep(SweepRequest request);

 private:
  std::string NewSweepId();

  std::shared_ptr<store::HealthStore> store_;
  std::shared_ptr<SchedulerApi> scheduler_;
  std::shared_ptr<Clock> clock_;
  std::shared_ptr<Random> random_;  // sweep ids
};

// Every node the scheduler knows, by name.
absl::StatusOr<std::map<std::string, v1::Node>> NodesByName(SchedulerApi& scheduler);

// Whether the health API may sweep `node` when no nodes are named: online, and schedulable or
// cordoned by the health API itself (so that a node it took out can pass its way back).
bool ReadyForChecking(const v1::Node& node);

}  // namespace tessera::health
