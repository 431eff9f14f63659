#include "worker/daemon/canary_runner.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/timestamps.h"
#include "worker/canary/canary_result.h"
#include "worker/daemon/rank_launcher.h"

namespace tessera::worker {
namespace {

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

double TimeoutSeconds(const v1::StartCanary& start) {
  const double t = start.timeout().seconds() + start.timeout().nanos() / 1e9;
  return t > 0 ? t : 60;
}

}  // namespace

CanaryRunner::CanaryRunner(std::string binary, std::string node_name, std::string state_dir,
                           std::shared_ptr<Clock> clock)
    : binary_(std::move(binary)),
      node_name_(std::move(node_name)),
      state_dir_(std::move(state_dir)),
      clock_(std::move(clock)) {}

CanaryRunner::~CanaryRunner() {
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (pid_t g : running_) ::kill(-g, SIGKILL);
    threads.swap(threads_);
  }
  for (auto& t : threads) t.join();
}

absl::StatusOr<std::vector<std::string>> CanaryRunner::Arguments(const v1::StartCanary& s) {
  const std::string timeout = absl::StrCat(TimeoutSeconds(s));
  switch (s.kind()) {
    case v1::HEALTH_CHECK_KIND_COMPUTE_STRESS: {
      if (s.threads() < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("start_canary.threads: ", s.threads(), " must not be negative"));
      }
      std::vector<std::string> args = {"compute", "--seconds",
                                       absl::StrCat(s.seconds() > 0 ? s.seconds() : 1.0),
                                       "--timeout", timeout};
      if (s.threads() > 0) {
        args.push_back("--threads");
        args.push_back(absl::StrCat(s.threads()));
      }
      return args;
    }
    case v1::HEALTH_CHECK_KIND_ALLREDUCE: {
      if (s.group_size() < 1 || s.rank() < 0 || s.rank() >= s.group_size()) {
        return absl::InvalidArgumentError(absl::StrCat("start_canary.rank: ", s.rank(),
                                                       " is not in a group of ", s.group_size()));
      }
      if (s.master_addr().empty() || s.master_port() <= 0 || s.master_port() > 65535) {
        return absl::InvalidArgumentError("start_canary.master_addr/master_port: required");
      }
      std::vector<std::string> sizes;
      for (int64_t b : s.payload_bytes()) {
        if (b <= 0)
          return absl::InvalidArgumentError("start_canary.payload_bytes: must be positive");
        sizes.push_back(absl::StrCat(b));
      }
      std::vector<std::string> args = {"allreduce",
                                       "--rank",
                                       absl::StrCat(s.rank()),
                                       "--world",
                                       absl::StrCat(s.group_size()),
                                       "--master-addr",
                                       s.master_addr(),
                                       "--master-port",
                                       absl::StrCat(s.master_port()),
                                       "--timeout",
                                       timeout};
      if (!sizes.empty()) {
        args.push_back("--sizes");
        args.push_back(absl::StrJoin(sizes, ","));
      }
      return args;
    }
    default:
      return absl::InvalidArgumentError("start_canary.kind: must be ALLREDUCE or COMPUTE_STRESS");
  }
}

absl::Status CanaryRunner::Start(const v1::StartCanary& start) {
  auto args = Arguments(start);
  if (!args.ok()) return args.status();
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("the worker is stopping");
  threads_.emplace_back([this, start, a = *std::move(args)] { Run(start, a); });
  return absl::OkStatus();
}

void CanaryRunner::Run(v1::StartCanary start, std::vector<std::string> args) {
  v1::HealthCheckResult result;
  result.set_sweep_id(start.sweep_id());
  result.set_node_name(node_name_);
  result.set_kind(start.kind());
  *result.mutable_group() = start.group();
  result.set_step(start.step());
  *result.mutable_started_at() = ToProtoTime(clock_->Now());
  const std::string dir = absl::StrCat(state_dir_, "/canaries");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  static std::atomic<int> counter{0};
  const std::string out = absl::StrCat(dir, "/", start.sweep_id(), "-",
                                       v1::HealthCheckKind_Name(start.kind()), "-", counter++);
  RankSpec spec;
  spec.command = ShellQuote(binary_);
  for (const auto& a : args) spec.command += " " + ShellQuote(a);
  spec.command = "exec " + spec.command;
  spec.stdout_path = out + ".out";
  spec.stderr_path = out + ".err";
  spec.env["TESSERA_NODE_NAME"] = node_name_;
  auto proc = RankProcess::Start(spec);
  if (!proc.ok()) {
    result.set_verdict(v1::HEALTH_VERDICT_ERROR);
    result.set_error(std::string(proc.status().message()));
  } else {
    {
      absl::MutexLock lock(&mu_);
      running_.push_back((*proc)->pid());
    }
    // The canary enforces its own timeout; this one catches a canary that cannot (stopped).
    const absl::Duration limit = absl::Seconds(TimeoutSeconds(start) + 5);
    const auto waited = (*proc)->WaitFor(limit);
    if (!waited.ok()) (void)(*proc)->Kill();
    {
      absl::MutexLock lock(&mu_);
      std::erase(running_, (*proc)->pid());
    }
    std::ifstream in(spec.stdout_path);
    std::string line, last;
    while (std::getline(in, line)) {
      if (!line.empty()) last = line;
    }
    auto parsed = canary::ResultFromJsonLine(last);
    if (!waited.ok()) {
      result.set_verdict(v1::HEALTH_VERDICT_TIMEOUT);
      result.set_error(absl::StrCat("the canary did not end within ", absl::FormatDuration(limit)));
    } else if (parsed.ok()) {
      result.set_verdict(parsed->verdict());
      result.set_error(parsed->error());
      *result.mutable_samples() = parsed->samples();
      result.set_compute_tflops(parsed->compute_tflops());
      result.set_expected_tflops(parsed->expected_tflops());
    } else {
      std::ifstream err(spec.stderr_path);
      std::stringstream ss;
      ss << err.rdbuf();
      result.set_verdict(v1::HEALTH_VERDICT_ERROR);
      const auto exit = (*proc)->exit();
      result.set_error(absl::StrCat("tessera-canary ", exit ? exit->ToString() : "ended",
                                    " without a result: ", ss.str().substr(0, 500)));
    }
    std::filesystem::remove(spec.stdout_path, ec);
    std::filesystem::remove(spec.stderr_path, ec);
  }
  *result.mutable_finished_at() = ToProtoTime(clock_->Now());
  spdlog::info("canary {} of sweep {}: {} {}", v1::HealthCheckKind_Name(start.kind()),
               start.sweep_id(), v1::HealthVerdict_Name(result.verdict()), result.error());
  absl::MutexLock lock(&mu_);
  results_.push_back(std::move(result));
}

std::vector<v1::HealthCheckResult> CanaryRunner::TakeResults() {
  absl::MutexLock lock(&mu_);
  return std::exchange(results_, {});
}

std::vector<pid_t> CanaryRunner::ProcessGroups() {
  absl::MutexLock lock(&mu_);
  return running_;
}

}  // namespace tessera::worker
