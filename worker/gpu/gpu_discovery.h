// Finding the node's GPUs: NVML loaded at run time when the driver is installed (the worker
// does not link against it, so one binary runs on GPU and CPU-only machines), or a number of
// simulated devices so that everything above the hardware runs on machines without GPUs.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tessera/v1/nodes.pb.h"

namespace tessera::worker {

struct GpuInventory {
  std::vector<v1::Gpu> gpus;
  std::string gpu_type;        // e.g. "h100" from "NVIDIA H100 80GB HBM3"; "simulated"; "" for none
  std::string source;          // "nvml", "simulated" or "none", with a reason when NVML was absent
  std::string driver_version;  // NVML's (e.g. "580.159.04"); empty without NVML
};

// The model name as the run spec's compute.gpu_type spells it: "NVIDIA H100 80GB HBM3" -> "h100",
// "NVIDIA A100-SXM4-40GB" -> "a100", "Tesla V100-SXM2-16GB" -> "v100".
std::string GpuTypeFromModel(const std::string& model);

// `simulate` >= 0 forces that many simulated devices (0: a CPU-only node). Otherwise NVML is
// asked; without it the node has no GPUs. An NVML that loads but fails is an error.
absl::StatusOr<GpuInventory> DiscoverGpus(int simulate);

// `tessera-worker gpus`: what the worker finds on this node (the inventory it would register and
// one GPU probe's faults) as JSON on stdout, for an operator setting a node up. Exit status 0
// when NVML answered (or `simulate` >= 0), 1 otherwise.
int PrintGpusMain(int simulate);

}  // namespace tessera::worker
