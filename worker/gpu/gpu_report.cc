// `tessera-worker gpus`: the node's GPUs as the worker sees them, for an operator setting up a
// node (and the check on a GPU machine: tests/gpu/worker_gpus_check.sh).
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "worker/gpu/gpu_discovery.h"
#include "worker/gpu/gpu_probe.h"

namespace tessera::worker {

int PrintGpusMain(int simulate) {
  auto inventory = DiscoverGpus(simulate);
  if (!inventory.ok()) {
    std::cerr << "tessera-worker gpus: " << inventory.status().message() << "\n";
    return 1;
  }
  nlohmann::json out = {{"source", inventory->source},
                        {"gpu_type", inventory->gpu_type},
                        {"driver_version", inventory->driver_version},
                        {"gpus", nlohmann::json::array()}};
  for (const auto& gpu : inventory->gpus) {
    out["gpus"].push_back({{"index", gpu.index()},
                           {"uuid", gpu.uuid()},
                           {"model", gpu.model()},
                           {"memory_bytes", gpu.memory_bytes()}});
  }
  // One probe, as the worker takes them with each heartbeat: a healthy node has no faults.
  const int count = static_cast<int>(inventory->gpus.size());
  std::unique_ptr<GpuProbe> probe;
  if (simulate >= 0) {
    probe = std::make_unique<SimulatedGpuProbe>();
  } else if (count > 0) {
    if (auto api = LoadNvmlApi(count)) {
      probe = std::make_unique<NvmlGpuProbe>(*std::move(api), count, "this-node");
    }
  }
  out["probe"] = probe == nullptr ? nlohmann::json("none") : nlohmann::json::array();
  if (probe != nullptr) {
    for (const auto& fault : probe->Poll()) {
      out["probe"].push_back({{"gpu", fault.gpu_index()},
                              {"kind", v1::GpuFaultKind_Name(fault.kind())},
                              {"xid", fault.xid()},
                              {"detail", fault.detail()}});
    }
  }
  std::cout << out.dump(2) << std::endl;
  return inventory->source == "nvml" || simulate >= 0 ? 0 : 1;
}

}  // namespace tessera::worker
