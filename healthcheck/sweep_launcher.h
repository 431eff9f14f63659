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

class SweepLauncher {
 public:
  SweepLauncher(std::shared_ptr<store::HealthStore> store, std::shared_ptr<SchedulerApi> scheduler,
                std::shared_ptr<Clock> clock, std::shared_ptr<Random> random)
      : store_(std::move(store)),
        scheduler_(std::move(scheduler)),
        clock_(std::move(clock)),
        random_(std::move(random)) {}

  // A sweep of `nodes` (all ready nodes when empty: online, and schedulable or cordoned by the
  // health API itself), RUNNING and not yet dispatched. INVALID_ARGUMENT names a node that is
  // unknown or not online.
  absl::StatusOr<v1::Sweep> CreateSweep(v1::SweepTrigger trigger, std::vector<std::string> nodes,
                                        const std::string& requested_by,
                                        const std::string& run_name,
                                        const std::string& suspect_node,
                                        const std::string& trigger_detail = "");

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
