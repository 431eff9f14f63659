#include "worker/canary/canary_checks.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "absl/strings/str_cat.h"
#include "worker/canary/canary_result.h"

namespace tessera::canary {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

void Sync(const torch::Device& device, torch::Tensor& t) {
  if (device.is_cuda()) (void)t.sum().item<float>();  // waits for the stream
}

// The CPUs this process may run on.
std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

// Keeps the calling thread on one CPU until destroyed, then gives it back its mask.
class PinnedTo {
 public:
  explicit PinnedTo(int cpu) {
    CPU_ZERO(&before_);
    pinned_ = ::sched_getaffinity(0, sizeof before_, &before_) == 0;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pinned_ = pinned_ && ::sched_setaffinity(0, sizeof one, &one) == 0;
  }
  ~PinnedTo() {
    if (pinned_) ::sched_setaffinity(0, sizeof before_, &before_);
  }
  PinnedTo(const PinnedTo&) = delete;
  PinnedTo& operator=(const PinnedTo&) = delete;

 private:
  cpu_set_t before_;
  bool pinned_ = false;
};

}  // namespace

void RunAllReduce(engine::Communicator& comm, const torch::Device& device,
                  const AllReduceOptions& o, v1::HealthCheckResult& result) {
  const int n = comm.size();
  const float rank_value = static_cast<float>(comm.rank() + 1);
  result.set_verdict(v1::HEALTH_VERDICT_PASSED);
  for (int64_t bytes : o.payload_bytes) {
    const int64_t count = std::max<int64_t>(1, bytes / 4);
    const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(device);
    // Element i holds (rank + 1) + (i mod 7): the sum is exact in fp32 and a misplaced or
    // dropped chunk shows.
    auto pattern = torch::arange(count, options).remainder(7);
    auto buffer = pattern + rank_value;
    std::vector<torch::Tensor> parts = buffer.chunk(std::max(1, o.parts));  // views of it
    comm.AllReduceSumParts(parts);
    const auto expected = pattern * static_cast<float>(n) + static_cast<float>(n * (n + 1) / 2);
    if (!torch::equal(buffer, expected)) {
      const int64_t wrong = buffer.ne(expected).sum().item<int64_t>();
      result.set_verdict(v1::HEALTH_VERDICT_WRONG_DATA);
      result.set_error(absl::StrCat("all-reduce of ", bytes, " bytes: ", wrong, " of ", count,
                                    " elements wrong"));
      return;
    }
    for (int i = 0; i < o.warmup; ++i) comm.AllReduceSumParts(parts);
    std::vector<double> times;
    for (int i = 0; i < o.iterations; ++i) {
      comm.Barrier();
      const auto start = Clock::now();
      comm.AllReduceSumParts(parts);
      Sync(device, buffer);
      times.push_back(SecondsSince(start));
    }
    std::sort(times.begin(), times.end());
    *result.add_samples() = MakeSample(count * 4, times[times.size() / 2], n);
  }
  if (o.min_busbw_gbps > 0) {
    const auto& largest = result.samples(result.samples_size() - 1);
    if (largest.busbw_gbps() < o.min_busbw_gbps) {
      result.set_verdict(v1::HEALTH_VERDICT_SLOW);
      result.set_error(absl::StrCat("busbw ", largest.busbw_gbps(), " GB/s at ",
                                    largest.payload_bytes(), " bytes, under the threshold of ",
                                    o.min_busbw_gbps));
    }
  }
}

void RunComputeStress(const torch::Device& device, const ComputeOptions& o,
                      v1::HealthCheckResult& result) {
  torch::NoGradGuard no_grad;
  const auto options = torch::TensorOptions()
                           .dtype(device.is_cuda() ? torch::kBFloat16 : torch::kFloat32)
                           .device(device);
  auto a = torch::full({o.size, o.size}, 0.5, options);
  auto b = torch::full({o.size, o.size}, 0.25, options);
  auto c = torch::mm(a, b);
  Sync(device, c);
  const double flops_per_product = 2.0 * o.size * o.size * static_cast<double>(o.size);
  // Measured on one thread (a node's share of a machine, as simulated nodes have it), the rate
  // is that of the CPU the scheduler happened to put the thread on, and a machine's CPUs differ:
  // on a 2-vCPU VM one ran this product at 0.017-0.021 TFLOP/s and the other at 0.028-0.029,
  // every time. So the intervals visit each of the process's CPUs in turn, and the best interval
  // is the best CPU's rate wherever the process was placed. With more threads (a whole node's
  // cores, a GPU) the scheduler spreads them and nothing is pinned.
  const std::vector<int> cpus =
      device.is_cpu() && torch::get_num_threads() == 1 ? AllowedCpus() : std::vector<int>{};
  const double visits = static_cast<double>(std::max<size_t>(1, cpus.size()));
  // Intervals of up to 100 ms: long against a CPU scheduler's or a throttle's cycles, so that
  // the best one is the hardware's steady rate and not a lucky burst; at least two per CPU.
  const double interval = std::min(0.1, o.seconds / (visits > 1 ? 2 * visits : 3));
  double best = 0;
  const auto start = Clock::now();
  for (size_t visit = 0; SecondsSince(start) < o.seconds; ++visit) {
    std::optional<PinnedTo> pinned;
    if (cpus.size() > 1) pinned.emplace(cpus[visit % cpus.size()]);
    const auto t = Clock::now();
    int64_t products = 0;
    do {
      torch::mm_out(c, a, b);
      ++products;
      Sync(device, c);
    } while (SecondsSince(t) < interval);
    best = std::max(best, flops_per_product * static_cast<double>(products) / SecondsSince(t));
  }
  // A wrong product is a broken device, whatever its speed.
  const float want = 0.5f * 0.25f * static_cast<float>(o.size);
  if (c.to(torch::kFloat32).sub(want).abs().max().item<float>() > want * 1e-2f) {
    result.set_verdict(v1::HEALTH_VERDICT_WRONG_DATA);
    result.set_error("matrix products gave wrong results");
    return;
  }
  result.set_compute_tflops(best / 1e12);
  result.set_expected_tflops(o.expected_tflops);
  result.set_verdict(v1::HEALTH_VERDICT_PASSED);
  if (o.expected_tflops > 0 && result.compute_tflops() < o.min_fraction * o.expected_tflops) {
    result.set_verdict(v1::HEALTH_VERDICT_SLOW);
    result.set_error(absl::StrCat(result.compute_tflops(), " TFLOP/s, under ", o.min_fraction,
                                  " of the expected ", o.expected_tflops));
  }
}

}  // namespace tessera::canary
