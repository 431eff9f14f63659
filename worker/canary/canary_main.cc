// tessera-canary: the health API's checks, started by tessera-worker (or by hand).
//   tessera-canary allreduce --rank R --world N --master-addr A --master-port P
//                            [--sizes 1MiB,4MiB,16MiB,64MiB] [--min-busbw GBPS] [--timeout S]
//                            [--connections 6] [--token HEX]
//   tessera-canary compute [--seconds S] [--size N] [--expected-tflops T] [--timeout S]
// Prints one JSON line (a HealthCheckResult) and exits 0 when passed, 3 on wrong data, 4 under
// the threshold, 5 on timeout, 1 on any other error.
//   tessera-canary serve
// Runs checks as they are asked, for as long as its input is open: each input line is a JSON
// array of the arguments above (["compute", "--seconds", "1"]), each answered by one line of
// output, the result. The worker keeps one up through a sweep, so that a measurement no longer
// pays for a process start and LibTorch's load (most of a 1 s check's cost). A check that
// outlives its timeout is answered TIMEOUT and the server ends (a collective blocked on a dead
// peer cannot be interrupted): the worker starts another.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
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

// Ends the process with a TIMEOUT result when a check does not finish in time (a hung peer, a
// dead link), whatever the check is blocked in. Armed for each check, disarmed after it.
class Watchdog {
 public:
  Watchdog() : thread_([this] { Watch(); }) {}
  ~Watchdog() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
      changed_.SignalAll();
    }
    thread_.join();
  }

  void Arm(double seconds, v1::HealthCheckKind kind) {
    if (seconds <= 0) return;
    absl::MutexLock lock(&mu_);
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(seconds));
    seconds_ = seconds;
    kind_ = kind;
    changed_.SignalAll();
  }

  // Once the watchdog has fired it holds the lock until the process ends, so that a check
  // finishing at that moment cannot print a second answer.
  void Disarm() {
    absl::MutexLock lock(&mu_);
    deadline_.reset();
  }

 private:
  void Watch() {
    absl::MutexLock lock(&mu_);
    while (!stop_) {
      if (!deadline_) {
        changed_.Wait(&mu_);
        continue;
      }
      // On the monotonic clock: a step of the wall clock neither fires it early nor late.
      const auto now = std::chrono::steady_clock::now();
      if (now < *deadline_) {
        changed_.WaitWithTimeout(&mu_, absl::FromChrono(*deadline_ - now));
      } else {
        v1::HealthCheckResult r;
        r.set_kind(kind_);
        r.set_verdict(v1::HEALTH_VERDICT_TIMEOUT);
        r.set_error(absl::StrCat("did not finish within ", seconds_, " s"));
        Print(r);
        ::_exit(canary::kExitTimeout);
      }
    }
  }

  absl::Mutex mu_;
  absl::CondVar changed_;
  std::optional<std::chrono::steady_clock::time_point> deadline_ ABSL_GUARDED_BY(mu_);
  double seconds_ ABSL_GUARDED_BY(mu_) = 0;
  v1::HealthCheckKind kind_ ABSL_GUARDED_BY(mu_) = v1::HEALTH_CHECK_KIND_UNSPECIFIED;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

torch::Device PickDevice(const std::string& backend, int local_rank) {
  if (backend == "nccl" || (backend == "auto" && torch::cuda::is_available())) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    const bool one = visible != nullptr && std::string(visible).find(',') == std::string::npos;
    return torch::Device(torch::kCUDA, one ? 0 : local_rank);
  }
  return torch::Device(torch::kCPU);
}

// One check, as its command line asks it.
struct CheckRequest {
  int rank = 0, world = 1, port = 29600, local_rank = 0, threads = 0, connections = 6;
  std::string master = "127.0.0.1", sizes = "1MiB,4MiB,16MiB,64MiB", backend = "auto";
  std::string token;  // the rendezvous's secret: its keys are under canary/<token>/
  double min_busbw = 0, timeout = 60;
  canary::AllReduceOptions allreduce;
  canary::ComputeOptions compute;
};

// The checks' command lines, parsed into `r`; the subcommands are returned to tell which ran.
struct Commands {
  CLI::App* allreduce;
  CLI::App* compute;
};

Commands DefineChecks(CLI::App& app, CheckRequest& r) {
  auto* allreduce = app.add_subcommand("allreduce", "all-reduce between the group's nodes");
  allreduce->add_option("--rank", r.rank, "this process's rank in the group")->required();
  allreduce->add_option("--world", r.world, "processes in the group")
      ->required()
      ->check(CLI::Range(1, 65536));
  allreduce->add_option("--master-addr", r.master, "where rank 0 serves the rendezvous");
  allreduce->add_option("--master-port", r.port, "its port")->check(CLI::Range(1, 65535));
  allreduce
      ->add_option("--token", r.token,
                   "the group's rendezvous token (hex; the worker gives it on serve's input, never "
                   "on a command line others can read): only canaries with it join")
      ->check([](const std::string& t) {
        if (t.empty() || t.size() > 64 || t.find_first_not_of("0123456789abcdef") != t.npos) {
          return std::string("a token is 1 to 64 lowercase hex digits");
        }
        return std::string();
      });
  allreduce->add_option("--local-rank", r.local_rank, "GPU index among the node's processes");
  allreduce->add_option("--sizes", r.sizes, "payload sizes")->capture_default_str();
  allreduce->add_option("--iterations", r.allreduce.iterations, "timed all-reduces per size")
      ->check(CLI::Range(1, 1000));
  allreduce->add_option("--min-busbw", r.min_busbw, "GB/s under which the check fails");
  allreduce->add_option("--backend", r.backend, "auto, gloo or nccl")->capture_default_str();
  allreduce
      ->add_option(
          "--connections", r.connections,
          "Gloo: connections to each peer, the payload all-reduced in as many parts at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 16));
  allreduce->add_option("--timeout", r.timeout, "seconds before giving up")->capture_default_str();

  auto* compute = app.add_subcommand("compute", "matrix products against the expected rate");
  compute->add_option("--seconds", r.compute.seconds, "how long to measure")->capture_default_str();
  compute->add_option("--size", r.compute.size, "matrix size")
      ->capture_default_str()
      ->check(CLI::Range(16, 16384));
  compute->add_option("--expected-tflops", r.compute.expected_tflops, "the node's expected rate");
  compute->add_option("--min-fraction", r.compute.min_fraction, "of the expected rate, to pass");
  compute->add_option("--threads", r.threads, "CPU threads (default: all cores)");
  compute->add_option("--timeout", r.timeout, "seconds before giving up")->capture_default_str();
  return {allreduce, compute};
}

void RunAllReduceCheck(const CheckRequest& r, v1::HealthCheckResult& result) {
  const torch::Device device = PickDevice(r.backend, r.local_rank);
  engine::Rendezvous rv{r.rank, r.world, r.master, r.port,
                        std::chrono::milliseconds(static_cast<int64_t>(r.timeout * 1000))};
  auto store = engine::ConnectStore(rv);
  if (!store.ok()) throw std::runtime_error(std::string(store.status().message()));
  std::vector<int> members;
  for (int m = 0; m < r.world; ++m) members.push_back(m);
  auto comm = engine::CreateCommunicator(
      device.is_cuda() ? engine::CollectiveBackend::kNccl : engine::CollectiveBackend::kGloo,
      *store, r.token.empty() ? "canary/" : absl::StrCat("canary/", r.token, "/"), members, r.rank,
      engine::DefaultGlooHost(r.master), rv.timeout, r.connections);
  if (!comm.ok()) throw std::runtime_error(std::string(comm.status().message()));
  canary::AllReduceOptions options = r.allreduce;
  options.parts = device.is_cuda() ? 1 : r.connections;
  canary::RunAllReduce(**comm, device, options, result);
  (*comm)->Barrier();  // rank 0 serves the store: it leaves last
}

v1::HealthCheckKind KindOf(bool compute) {
  return compute ? v1::HEALTH_CHECK_KIND_COMPUTE_STRESS : v1::HEALTH_CHECK_KIND_ALLREDUCE;
}

// What the command line gives as text, read into the all-reduce's options; the one error is a
// payload size that is not one ("--sizes: ...").
absl::Status FinishRequest(CheckRequest& r, bool compute) {
  if (compute) return absl::OkStatus();
  auto sizes = ParseByteSizes(r.sizes);
  if (!sizes.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--sizes: ", sizes.status().message()));
  }
  r.allreduce.payload_bytes = *sizes;
  r.allreduce.min_busbw_gbps = r.min_busbw;
  return absl::OkStatus();
}

// Runs the check `r` (finished by FinishRequest) asks for under the watchdog.
v1::HealthCheckResult RunCheck(const CheckRequest& r, bool compute, Watchdog& watchdog) {
  v1::HealthCheckResult result;
  result.set_kind(KindOf(compute));
  watchdog.Arm(r.timeout, result.kind());
  try {
    if (compute) {
      engine::SetComputeThreads(
          r.threads > 0 ? r.threads : static_cast<int>(std::thread::hardware_concurrency()));
      canary::RunComputeStress(PickDevice("auto", 0), r.compute, result);
    } else {
      RunAllReduceCheck(r, result);
    }
  } catch (const std::exception& e) {
    result.set_verdict(v1::HEALTH_VERDICT_ERROR);
    result.set_error(e.what());
  }
  watchdog.Disarm();
  // Gloo names its group (canary/<token>/) in its errors, and a result is logged and stored:
  // the token, still the secret of the stage's other groups, never leaves the canary.
  if (!r.token.empty()) {
    result.set_error(absl::StrReplaceAll(result.error(), {{r.token, "<token>"}}));
  }
  return result;
}

v1::HealthCheckResult Refused(const std::string& why) {
  v1::HealthCheckResult result;
  result.set_verdict(v1::HEALTH_VERDICT_ERROR);
  result.set_error(absl::StrCat("tessera-canary serve: ", why));
  return result;
}

// One line of a server's input: the arguments of one check, as a JSON array of strings.
v1::HealthCheckResult Answer(const std::string& line, Watchdog& watchdog) {
  const auto json = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!json.is_array()) return Refused("a request is a JSON array of arguments");
  std::vector<std::string> reversed;  // CLI11 takes a vector of arguments last first
  for (auto it = json.rbegin(); it != json.rend(); ++it) {
    if (!it->is_string()) return Refused("a request's arguments are strings");
    reversed.push_back(it->get<std::string>());
  }
  CLI::App app{"tessera-canary check"};
  app.require_subcommand(1);
  CheckRequest r;
  const Commands commands = DefineChecks(app, r);
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return Refused(absl::StrCat("bad request: ", e.what()));
  }
  const bool compute = commands.compute->parsed();
  if (absl::Status finished = FinishRequest(r, compute); !finished.ok()) {
    v1::HealthCheckResult result;
    result.set_kind(KindOf(compute));
    result.set_verdict(v1::HEALTH_VERDICT_ERROR);
    result.set_error(std::string(finished.message()));
    return result;
  }
  return RunCheck(r, compute, watchdog);
}

int Serve() {
  Watchdog watchdog;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (!line.empty()) Print(Answer(line, watchdog));
  }
  return 0;  // the worker closed our input: done
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tessera-canary: all-reduce and compute health checks"};
  app.require_subcommand(1);
  CheckRequest request;
  const Commands commands = DefineChecks(app, request);
  auto* serve = app.add_subcommand(
      "serve",
      "answer checks read from the input (a JSON array of arguments per line) until it ends");
  CLI11_PARSE(app, argc, argv);
  if (serve->parsed()) return Serve();
  const bool compute = commands.compute->parsed();
  if (absl::Status finished = FinishRequest(request, compute); !finished.ok()) {
    std::cerr << "tessera-canary: " << finished.message() << "\n";
    return canary::kExitUsage;
  }
  Watchdog watchdog;
  const v1::HealthCheckResult result = RunCheck(request, compute, watchdog);
  Print(result);
  return ExitFor(result);
}
