// tessera-canary: the health API's checks, started by tessera-worker (or by hand).
//   tessera-canary allreduce --rank R --world N --master-addr A --master-port P
//                            [--sizes 1MiB,4MiB,16MiB,64MiB] [--min-busbw GBPS] [--timeout S]
//   tessera-canary compute [--seconds S] [--size N] [--expected-tflops T] [--timeout S]
// Prints one JSON line (a HealthCheckResult) and exits 0 when passed, 3 on wrong data, 4 under
// the threshold, 5 on timeout, 1 on any other error.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/byte_size.h"
#include "worker/canary/canary_checks.h"
#include "worker/canary/canary_result.h"
#include "worker/engine/train/device_peak.h"

namespace {

using namespace tessera;

void Print(const v1::HealthCheckResult& r) {
  std::cout << canary::ResultToJsonLine(r) << std::flush;
}

int ExitFor(const v1::HealthCheckResult& r) {
  switch (r.verdict()) {
    case v1::HEALTH_VERDICT_PASSED:
      return canary::kExitPassed;
    case v1::HEALTH_VERDICT_WRONG_DATA:
      return canary::kExitWrongData;
    case v1::HEALTH_VERDICT_SLOW:
      return canary::kExitBelowThreshold;
    case v1::HEALTH_VERDICT_TIMEOUT:
      return canary::kExitTimeout;
    default:
      return canary::kExitError;
  }
}

// A check that does not finish in time (a hung peer, a dead link) is reported and the process
// ends, whatever it is blocked in.
void ArmTimeout(double seconds, v1::HealthCheckKind kind) {
  if (seconds <= 0) return;
  std::thread([seconds, kind] {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    v1::HealthCheckResult r;
    r.set_kind(kind);
    r.set_verdict(v1::HEALTH_VERDICT_TIMEOUT);
    r.set_error(absl::StrCat("did not finish within ", seconds, " s"));
    Print(r);
    ::_exit(canary::kExitTimeout);
  }).detach();
}

torch::Device PickDevice(const std::string& backend, int local_rank) {
  if (backend == "nccl" || (backend == "auto" && torch::cuda::is_available())) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    const bool one = visible != nullptr && std::string(visible).find(',') == std::string::npos;
    return torch::Device(torch::kCUDA, one ? 0 : local_rank);
  }
  return torch::Device(torch::kCPU);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tessera-canary: all-reduce and compute health checks"};
  app.require_subcommand(1);
  int rank = 0, world = 1, port = 29600, local_rank = 0, threads = 0;
  std::string master = "127.0.0.1", sizes = "1MiB,4MiB,16MiB,64MiB", backend = "auto";
  double min_busbw = 0, timeout = 60;
  canary::AllReduceOptions ar;
  auto* allreduce = app.add_subcommand("allreduce", "all-reduce between the group's nodes");
  allreduce->add_option("--rank", rank, "this process's rank in the group")->required();
  allreduce->add_option("--world", world, "processes in the group")
      ->required()
      ->check(CLI::Range(1, 65536));
  allreduce->add_option("--master-addr", master, "where rank 0 serves the rendezvous");
  allreduce->add_option("--master-port", port, "its port")->check(CLI::Range(1, 65535));
  allreduce->add_option("--local-rank", local_rank, "GPU index among the node's processes");
  allreduce->add_option("--sizes", sizes, "payload sizes")->capture_default_str();
  allreduce->add_option("--iterations", ar.iterations, "timed all-reduces per size")
      ->check(CLI::Range(1, 1000));
  allreduce->add_option("--min-busbw", min_busbw, "GB/s under which the check fails");
  allreduce->add_option("--backend", backend, "auto, gloo or nccl")->capture_default_str();
  allreduce->add_option("--timeout", timeout, "seconds before giving up")->capture_default_str();

  canary::ComputeOptions co;
  auto* compute = app.add_subcommand("compute", "matrix products against the expected rate");
  compute->add_option("--seconds", co.seconds, "how long to measure")->capture_default_str();
  compute->add_option("--size", co.size, "matrix size")
      ->capture_default_str()
      ->check(CLI::Range(16, 16384));
  compute->add_option("--expected-tflops", co.expected_tflops, "the node's expected rate");
  compute->add_option("--min-fraction", co.min_fraction, "of the expected rate, to pass");
  compute->add_option("--threads", threads, "CPU threads (default: all cores)");
  compute->add_option("--timeout", timeout, "seconds before giving up")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  v1::HealthCheckResult result;
  try {
    if (*compute) {
      result.set_kind(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS);
      ArmTimeout(timeout, result.kind());
      engine::SetComputeThreads(
          threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency()));
      canary::RunComputeStress(PickDevice("auto", 0), co, result);
    } else {
      result.set_kind(v1::HEALTH_CHECK_KIND_ALLREDUCE);
      ArmTimeout(timeout, result.kind());
      auto parsed = ParseByteSizes(sizes);
      if (!parsed.ok()) {
        std::cerr << "tessera-canary: --sizes: " << parsed.status().message() << "\n";
        return canary::kExitUsage;
      }
      ar.payload_bytes = *parsed;
      ar.min_busbw_gbps = min_busbw;
      const torch::Device device = PickDevice(backend, local_rank);
      engine::Rendezvous rv{rank, world, master, port,
                            std::chrono::milliseconds(static_cast<int64_t>(timeout * 1000))};
      auto store = engine::ConnectStore(rv);
      if (!store.ok()) throw std::runtime_error(std::string(store.status().message()));
      std::vector<int> members;
      for (int r = 0; r < world; ++r) members.push_back(r);
      auto comm = engine::CreateCommunicator(
          device.is_cuda() ? engine::CollectiveBackend::kNccl : engine::CollectiveBackend::kGloo,
          *store, "canary/", members, rank, engine::DefaultGlooHost(master), rv.timeout);
      if (!comm.ok()) throw std::runtime_error(std::string(comm.status().message()));
      canary::RunAllReduce(**comm, device, ar, result);
      (*comm)->Barrier();  // rank 0 serves the store: it leaves last
    }
  } catch (const std::exception& e) {
    result.set_verdict(v1::HEALTH_VERDICT_ERROR);
    result.set_error(e.what());
  }
  Print(result);
  return ExitFor(result);
}
