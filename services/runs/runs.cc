#include "services/runs/runs.h"

namespace tessera::runs {

Runs MakeRuns(RunsDependencies deps) {
  auto writer = std::make_shared<const RunWriter>(deps.runs, deps.clock, deps.registry);
  auto reliability =
      deps.usage ? std::make_shared<ClusterReliability>(deps.usage, deps.clock) : nullptr;
  Runs runs;
  runs.manager = std::make_shared<RunManager>(deps.runs, writer, deps.idem, deps.fit, deps.clock,
                                              deps.logs, deps.random, deps.options, deps.changes,
                                              deps.secrets, reliability);
  runs.reports = std::make_shared<RunReports>(deps.runs, writer, deps.clock);
  runs.upkeep = std::make_shared<RunUpkeep>(deps.runs, writer, deps.clock, deps.logs, reliability,
                                            deps.options.run_retention);
  return runs;
}

}  // namespace tessera::runs
