#pragma once
// The checks tessera-canary runs, on LibTorch: an all-reduce over the job's communicator (Gloo
// on CPUs, NCCL on GPUs) at several payload sizes with a check of every element of the result,
// and a compute stress test (matrix products) against the node's expected rate.

#include <cstdint>
#include <vector>

#include "tessera/v1/health.pb.h"
#include "worker/engine/dist/communicator.h"

namespace tessera::canary {

struct AllReduceOptions {
  std::vector<int64_t> payload_bytes;
  int warmup = 2;
  int iterations = 5;
  double min_busbw_gbps = 0;  // 0: no threshold
  // The payload is all-reduced in this many parts at once, each over a connection and thread of
  // its own (Gloo), so that the reduction of one overlaps the transfer of another; NCCL: 1.
  int parts = 1;
};

// Fills the result's samples and verdict (PASSED, WRONG_DATA or SLOW) and error.
void RunAllReduce(engine::Communicator& comm, const torch::Device& device,
                  const AllReduceOptions& options, v1::HealthCheckResult& result);

struct ComputeOptions {
  double seconds = 1.0;
  int64_t size = 512;
  double expected_tflops = 0;  // 0: none known
  double min_fraction = 0.5;   // below min_fraction * expected is SLOW
};

// The best rate of 100 ms intervals over `seconds` (interference only slows an interval, so the
// best one measures the hardware); fills compute_tflops, expected_tflops and the verdict.
void RunComputeStress(const torch::Device& device, const ComputeOptions& options,
                      v1::HealthCheckResult& result);

}  // namespace tessera::canary
